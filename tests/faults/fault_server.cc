// A test-only `tollgate serve` whose SQLite files go through testing::FaultVfs (support/fault_vfs.h),
// for tests/faults/storage_faults_http_test.cc: the real server, with disk faults a test switches on
// and off from outside by creating and deleting files.
//
//   TOLLGATE_FAULT_DIR=DIR tollgate_fault_server serve --listen HOST:PORT --database sqlite:PATH
//
// Before anything opens a database it registers the fault VFS as SQLite's default one, watching DIR:
// while DIR/disk-full exists, writes that grow a file answer SQLITE_FULL; while DIR/fail-sync exists,
// every flush answers SQLITE_IOERR_FSYNC. Then it runs app::serve() as the tollgate binary does. The
// production binary has no such switch: this one exists only in the build's test targets.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "app/serve.h"
#include "config/config.h"
#include "support/fault_vfs.h"

int main(int argc, char** argv) {
  const char* dir = std::getenv("TOLLGATE_FAULT_DIR");
  if (dir == nullptr || *dir == '\0') {
    std::fprintf(stderr, "tollgate_fault_server: set TOLLGATE_FAULT_DIR\n");
    return 2;
  }
  static tollgate::testing::FaultVfs vfs("tollgate-fault", /*make_default=*/true);
  vfs.watch(dir);

  CLI::App app{"tollgate serve over a fault-injecting SQLite VFS (tests only)"};
  app.require_subcommand(1);
  int exit_code = 0;
  tollgate::ConfigOverrides overrides;
  auto* serve = app.add_subcommand("serve", "run the HTTP server");
  serve->add_option("--config", overrides.config_file, "TOML configuration file");
  serve->add_option("--listen", overrides.listen, "HOST:PORT to listen on");
  serve->add_option("--database", overrides.database, "sqlite:PATH");
  serve->callback([&] {
    auto config = tollgate::load_config(overrides);
    if (!config) {
      std::fprintf(stderr, "tollgate: configuration: %s\n", config.error().detail.c_str());
      exit_code = 2;
      return;
    }
    exit_code = tollgate::app::serve(*config);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
