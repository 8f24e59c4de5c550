// tollgate demo: `tollgate fake-provider` — runs jobs::FakeProvider (demo/fake_provider.h) as a
// process, for the kiosk demo and for tests that want a provider in another process.
//
//   tollgate fake-provider --listen 127.0.0.1:9000 [--seed N] [--latency-ms MIN..MAX]
//       [--time-scale X] [--fail-rate R] [--lost-answer-rate R] [--late-answer-rate R]
//       [--never-received-rate R] [--late-extra-ms MS] [--threads N]
//
// Its first line on stdout is "listening on HOST:PORT" (flushed; with port 0 the port it picked);
// the options it runs with go to stderr. It serves until SIGINT or SIGTERM, then writes its final
// /stats JSON on one line to stderr and exits 0. Bad options exit 2 (kExitUsage), an address that
// cannot be bound exits 3 (kExitUnavailable).
//
// Thread safety: registration and the command run on main()'s thread only.
#pragma once

#include <CLI/CLI.hpp>

namespace tollgate::app {

// Adds `fake-provider` to `app`; the command stores its exit code in `exit_code`, which must
// outlive app.parse(). Argument errors are thrown as CLI::ParseError (exit 2).
void add_fake_provider_command(CLI::App& app, int& exit_code);

}  // namespace tollgate::app
