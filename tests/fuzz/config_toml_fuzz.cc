// fuzz_config_toml: a configuration file through parse_config and validate_config, as `serve
// --config` reads it. A file is accepted or refused with a message; nothing else may happen (no
// exception escapes, no sanitizer report). An accepted configuration must validate or be refused
// with a message, and its listen address must parse or be refused with one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = tollgate::parse_config(text, "fuzz.toml");
  if (!config) {
    if (config.error().detail.empty()) __builtin_trap();  // a refusal names what was wrong
    return 0;
  }
  if (auto status = tollgate::validate_config(*config); !status && status.error().detail.empty()) __builtin_trap();
  if (auto listen = tollgate::parse_listen(config->listen); !listen && listen.error().detail.empty()) __builtin_trap();
  (void)tollgate::sqlite_path(config->database);
  (void)tollgate::is_postgres_uri(config->database);
  return 0;
}
