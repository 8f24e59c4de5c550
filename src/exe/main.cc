// tollgate: the one binary. main() only wires: it parses the command line and calls the library.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "app/cli.h"
#include "demo/demo_kiosk.h"
#include "demo/fake_provider_command.h"
#include "app/serve.h"
#include "config/config.h"
#include "core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"tollgate — every credit spent once, never twice, never lost"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tollgate::kVersion);
  int exit_code = 0;

  auto* version = app.add_subcommand("version", "print the version");
  version->callback([] { std::printf("tollgate %s\n", tollgate::kVersion); });

  tollgate::ConfigOverrides overrides;
  auto* serve = app.add_subcommand("serve", "run the HTTP server (embedded SQLite store by default)");
  serve->add_option("--config", overrides.config_file, "TOML configuration file");
  serve->add_option("--listen", overrides.listen, "HOST:PORT to listen on (overrides the configuration)");
  serve->add_option("--database", overrides.database, "sqlite:PATH or a postgresql:// URI (overrides the configuration)");
  serve->add_option("--admin-key-file", overrides.admin_key_file,
                    "write the admin key generated at the first start to this file (mode 0600) instead of stdout");
  serve->callback([&] {
    auto config = tollgate::load_config(overrides);
    if (!config) {
      std::fprintf(stderr, "tollgate: configuration: %s\n", config.error().detail.c_str());
      exit_code = 2;
      return;
    }
    exit_code = tollgate::app::serve(*config);
  });

  // The client commands: account, key, hold, events, audit.
  tollgate::app::add_cli_commands(app, exit_code);
  // A fake paid provider for tests and demos.
  tollgate::app::add_fake_provider_command(app, exit_code);
  // The kiosk story, end to end.
  tollgate::app::add_demo_command(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2 (CLI11's own codes are 100+).
    if (e.get_exit_code() != 0) {
      if (auto message = tollgate::app::command_usage_message(app, std::vector<std::string>(argv + 1, argv + argc))) {
        std::fprintf(stderr, "tollgate: %s\n", message->c_str());
        return tollgate::app::kExitUsage;
      }
    }
    return app.exit(e) == 0 ? 0 : tollgate::app::kExitUsage;
  }
  return exit_code;
}
