// fuzz_cli_args: a command line through the client commands' parsing, as main() does it — CLI11,
// the project's own validators (ids, amounts, integer ranges, booleans, JSON arguments) and the
// usage messages for unknown commands. The input is argv, arguments separated by NUL bytes.
//
// The server is out of reach on purpose: $TOLLGATE_URL is a URL the client refuses before it
// connects ("the scheme must be http"), and an input that names --url itself is skipped, so a
// command that parses runs up to its first request and stops there. What may not happen: an
// exception other than CLI11's ParseError escaping the parse (std::stoll's out_of_range on a
// number a validator let through, say), or a sanitizer report. Run with -close_fd_mask=3 (the
// commands print).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/cli.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("TOLLGATE_URL", "unreachable://fuzz", 1);
  ::setenv("TOLLGATE_KEY", "fuzz-key", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.find("--url") != std::string_view::npos) return 0;
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start <= bytes.size() && args.size() < 64) {
    const auto end = bytes.find('\0', start);
    args.emplace_back(bytes.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  CLI::App app{"tollgate"};
  app.require_subcommand(1);
  int exit_code = 0;
  tollgate::app::add_cli_commands(app, exit_code);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) (void)tollgate::app::command_usage_message(app, args);
  }
  return 0;
}
