// Test support: real tollgate processes — a server to test against over HTTP, and one-shot
// commands (the CLI) whose exit code and output a test checks.
//
// ServerProcess spawns `tollgate serve --listen HOST:PORT --database sqlite:PATH` (port 0 by
// default: the server picks a free one, and the helper reads it from the server's log line
// "listening on HOST:PORT"). The child gets a clean environment: the test's own TOLLGATE_*
// variables are removed, then TOLLGATE_ADMIN_KEY and the options' `env` are set. Its stdout and
// stderr go to files in the helper's temporary folder (kept across restarts; log() and output()
// read them), so a chatty server never blocks on a full pipe. The helper can stop it gracefully
// (SIGTERM) or crash it (SIGKILL), and start it again on the same database and, by default, the
// same port. The destructor kills a server that is still running.
//
// Thread safety: a ServerProcess belongs to one thread; run_process may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/backends.h"

namespace tollgate::testing {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

struct ServerOptions {
  std::string binary;                                // empty: TOLLGATE_BINARY (the build's tollgate)
  std::string admin_key = "test-admin-key-0123456789abcdef";  // TOLLGATE_ADMIN_KEY; empty: the server
                                                     // generates one, which admin_key() then returns
  std::string database;                              // "sqlite:PATH" or a "postgresql://…" URI, passed as it is;
                                                     // empty: a new SQLite file in the helper's folder
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;                            // 0: any free port
  std::vector<std::string> extra_args;               // appended after serve --listen … --database …
  EnvVars env;                                       // added to the clean environment (e.g. TOLLGATE_HOLD_TTL_MS)
  std::chrono::milliseconds start_timeout{15'000};   // until the "listening on" line
};

class ServerProcess {
 public:
  // Starts the server and waits until it listens. Throws std::runtime_error (with the server's log)
  // if it exits or does not listen within start_timeout.
  explicit ServerProcess(ServerOptions options = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const;  // "http://HOST:PORT"
  const std::string& admin_key() const { return admin_key_; }
  const std::string& database() const { return database_; }  // "sqlite:PATH" or the postgresql:// URI
  const std::filesystem::path& folder() const { return dir_.path(); }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Sends `signal` (SIGTERM: graceful stop; SIGKILL: a crash) and waits up to `timeout` for the
  // process to end. Returns its exit code, or 128 + the signal that ended it; if it did not end in
  // time it is killed with SIGKILL and -1 is returned. 0 if it was not running.
  int stop(int signal = SIGTERM, std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Starts it again on the same database (stopping it first with SIGTERM if it runs). With
  // same_port the new process listens on the port of the previous one, so clients keep their URL.
  void restart(bool same_port = true);

  std::string log() const;     // everything written on stderr so far, by every run
  std::string output() const;  // everything written on stdout so far

 private:
  void start(std::uint16_t port);

  ServerOptions options_;
  TempDir dir_;
  std::string database_;
  std::string admin_key_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

struct ProcessResult {
  int exit_code = -1;      // the exit code, or 128 + signal; -1 if it timed out (then killed)
  std::string out;         // stdout
  std::string err;         // stderr
  bool timed_out = false;
  std::chrono::milliseconds duration{0};
};

// Runs argv[0] (a path) with `argv`, a clean environment (without the test's TOLLGATE_*) plus
// `env`, and stdin from /dev/null; waits at most `timeout` (then SIGKILL).
ProcessResult run_process(const std::vector<std::string>& argv, const EnvVars& env = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));
// run_process with `input` on its standard input (written to a file first, so that neither side can
// block on a full pipe).
ProcessResult run_process_with_input(const std::vector<std::string>& argv, std::string_view input,
                                     const EnvVars& env = {},
                                     std::chrono::milliseconds timeout = std::chrono::seconds(60));
// run_process with the build's tollgate binary as argv[0]: run_tollgate({"account", "show", "a"}).
ProcessResult run_tollgate(const std::vector<std::string>& args, const EnvVars& env = {},
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Starts argv[0] (a path) with `argv`, a clean environment (without the test's TOLLGATE_*) plus
// `env`, stdin from `in_path` (/dev/null by default), and stdout and stderr appended to the two
// files; its pid, whose ending the caller must collect (exit_code_if_ended, stop_process). Throws
// std::runtime_error if it cannot be started.
pid_t spawn_process(std::vector<std::string> argv, const EnvVars& env, const std::string& out_path,
                    const std::string& err_path, const std::string& in_path = "/dev/null");
// The exit code of a spawned process that has ended (then collected), or 128 + its signal; nullopt
// while it runs. Does not wait.
std::optional<int> exit_code_if_ended(pid_t pid);
// Sends `signal`, waits up to `timeout` for the process to end, else kills it with SIGKILL; its exit
// code (or 128 + signal), -1 when it had to be killed.
int stop_process(pid_t pid, int signal, std::chrono::milliseconds timeout);

// A free TCP port on 127.0.0.1 at the time of the call (bound, then closed): for a port that
// nothing listens on.
std::uint16_t unused_port();

}  // namespace tollgate::testing
