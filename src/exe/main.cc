// tollgate: the one binary. main() only wires: it parses the command line and calls the library.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"tollgate — every credit spent once, never twice, never lost"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tollgate::kVersion);

  auto* version = app.add_subcommand("version", "print the version");
  version->callback([] { std::printf("tollgate %s\n", tollgate::kVersion); });

  CLI11_PARSE(app, argc, argv);
  return 0;
}
