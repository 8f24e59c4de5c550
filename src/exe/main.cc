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
#include "config/config_keys.h"
#include "core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"tollgate — every credit spent once, never twice, never lost"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tollgate::kVersion);
  int exit_code = 0;

  auto* version = app.add_subcommand("version", "print the version");
  version->callback([] { std::printf("tollgate %s\n", tollgate::kVersion); });

  tollgate::ConfigOverrides overrides;
  bool print_config = false;
  auto* serve = app.add_subcommand("serve", "run the HTTP server (embedded SQLite store by default)");
  serve->footer(
      "Every key of the configuration file is described in docs/reference/configuration.md (also: tollgate config "
      "reference); each top-level key can be set with TOLLGATE_<KEY> as well.");
  serve->add_option("--config", overrides.config_file, "TOML configuration file");
  auto about = [](const char* key) {
    return std::string(tollgate::server_config_key(key).description) + " (the key " + key + "; overrides the file and " +
           tollgate::config_env_name(key) + ")";
  };
  serve->add_option("--listen", overrides.listen, about("listen"));
  serve->add_option("--database", overrides.database, about("database"));
  serve->add_option("--admin-key-file", overrides.admin_key_file, about("admin_key_file"));
  serve->add_flag("--print-config", print_config,
                  "print the effective configuration (file, environment and flags) as TOML, secrets masked, and exit");
  serve->callback([&] {
    auto config = tollgate::load_config(overrides);
    if (!config) {
      std::fprintf(stderr, "tollgate: configuration: %s\n", config.error().detail.c_str());
      exit_code = 2;
      return;
    }
    if (print_config) {
      std::fputs(tollgate::effective_config_toml(*config).c_str(), stdout);
      return;
    }
    exit_code = tollgate::app::serve(*config);
  });

  auto* config_command = app.add_subcommand("config", "the server's configuration keys");
  config_command->require_subcommand(1);
  auto* reference = config_command->add_subcommand(
      "reference", "print the configuration reference (Markdown: every key, its default, bounds and variable)");
  reference->callback([] { std::fputs(tollgate::config_reference_markdown().c_str(), stdout); });

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
