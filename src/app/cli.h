// tollgate app: the command-line client — `tollgate account|key|hold|job|lock|idem|ratelimit|events|
// audit …` — a client of a running server through tollgate::client (include/tollgate/client.h), never
// of the database.
//
// Every client command takes --url (default $TOLLGATE_URL, else http://127.0.0.1:8080), --key
// (default $TOLLGATE_KEY) and --json (print the server's JSON, one document per line, instead of
// tables and "key: value" lines). Failures are reported on stderr as
// "tollgate: <command>: <code>: <detail>" and by the exit code:
//   0 done · 1 the server refused the request (4xx) · 2 usage error (bad arguments; CLI11 and
//   main() map every parse error to 2) · 3 the server could not be reached, timed out or was
//   unavailable (5xx), after the client's bounded retries · 4 `audit` found violations ·
//   `job wait` only: 5 the job failed · 6 the job was cancelled · 7 it had not ended within
//   --timeout-ms (a job that completed exits 0) · coordination refusals a script branches on (with
//   --json their problem document is printed on stdout as well): 8 lock_held (`lock acquire`) ·
//   9 lock_lost (`lock renew|release`) · 10 lock_cancelled (`lock renew`, or `acquire` by the
//   holder: stop, the lock is freed) · 11 `idem begin` found the key finished (the stored response
//   is printed: do not do it again; 0 means "started, go ahead") · 12 in_progress (`idem begin`) ·
//   13 rate_limited (`ratelimit check`; retry_after_ms on stderr).
//
// Thread safety: registration and the commands run on main()'s thread only.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tollgate::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnavailable = 3;
inline constexpr int kExitAuditViolations = 4;
// `job wait`: the job ended but not completed, or did not end in time (completed is kExitOk).
inline constexpr int kExitJobFailed = 5;
inline constexpr int kExitJobCancelled = 6;
inline constexpr int kExitJobNotEnded = 7;
// Coordination: refusals (and one answer) that say what to do next, each its own code.
inline constexpr int kExitLockHeld = 8;       // lock acquire: another owner holds it
inline constexpr int kExitLockLost = 9;       // lock renew, release: not the holder any more
inline constexpr int kExitLockCancelled = 10;  // lock renew (acquire by the holder): stop; the lock is freed
inline constexpr int kExitReplayed = 11;      // idem begin: finished before; its response is printed
inline constexpr int kExitInProgress = 12;    // idem begin: claimed by a request still running
inline constexpr int kExitRateLimited = 13;   // ratelimit check: refused
inline constexpr int kExitNotAllowed = 14;    // hold check: a reservation would be refused now

// Adds the client subcommands to `app`. The command that runs stores its exit code in `exit_code`,
// which must outlive app.parse(). Argument errors are thrown as CLI::ParseError (exit 2).
void add_cli_commands(CLI::App& app, int& exit_code);

// After a usage error: when the words of `args` (argv without the program) name a command that
// does not exist, or stop before naming one, the message that says so and names the commands that
// do exist — "unknown command 'acount' (did you mean account?); the commands are: account, audit,
// …", "a command is missing after 'hold'; the hold commands are: commit, …" — else nullopt (the
// error was something else; CLI11's own message stands).
std::optional<std::string> command_usage_message(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace tollgate::app
