#include "support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tollgate::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string default_binary() {
#ifdef TOLLGATE_BINARY
  return TOLLGATE_BINARY;
#else
  throw std::runtime_error("TOLLGATE_BINARY is not defined for this target");
#endif
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The test's environment without TOLLGATE_*, then `extra` (which wins).
std::vector<std::string> clean_environment(const EnvVars& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "TOLLGATE_", 9) != 0) out.emplace_back(*e);
  }
  for (const auto& [name, value] : extra) {
    const std::string prefix = name + "=";
    std::erase_if(out, [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
    out.push_back(prefix + value);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Waits for `pid` until `deadline`; the exit code, or nullopt if it still runs.
std::optional<int> wait_until(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return exit_code_of(status);
    if (r < 0 && errno != EINTR) return -1;  // not our child any more: treat as gone
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

// --- processes ------------------------------------------------------------------------------------
pid_t spawn_process(std::vector<std::string> argv, const EnvVars& env, const std::string& out_path,
                    const std::string& err_path, const std::string& in_path) {
  std::vector<std::string> environment = clean_environment(env);
  auto argv_p = pointers(argv);
  auto env_p = pointers(environment);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, argv_p.data(), env_p.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

std::optional<int> exit_code_if_ended(pid_t pid) { return wait_until(pid, Clock::now()); }

int stop_process(pid_t pid, int signal, std::chrono::milliseconds timeout) {
  ::kill(pid, signal);
  auto code = wait_until(pid, Clock::now() + timeout);
  if (!code) {
    ::kill(pid, SIGKILL);
    wait_until(pid, Clock::now() + std::chrono::seconds(30));
    code = -1;
  }
  return *code;
}

// --- ServerProcess ----------------------------------------------------------------------------------
ServerProcess::ServerProcess(ServerOptions options) : options_(std::move(options)) {
  if (options_.binary.empty()) options_.binary = default_binary();
  database_ = options_.database.empty() ? "sqlite:" + dir_.file("tollgate.db") : options_.database;
  admin_key_ = options_.admin_key;
  start(options_.port);
}

ServerProcess::~ServerProcess() {
  if (running()) stop(SIGKILL);
}

std::string ServerProcess::url() const { return "http://" + options_.host + ":" + std::to_string(port_); }

std::string ServerProcess::log() const { return read_file(dir_.path() / "server.stderr"); }
std::string ServerProcess::output() const { return read_file(dir_.path() / "server.stdout"); }

void ServerProcess::start(std::uint16_t port) {
  const std::string err_path = dir_.file("server.stderr");
  const std::string out_path = dir_.file("server.stdout");
  std::error_code ignored;
  const std::size_t log_offset = std::filesystem::exists(err_path) ? std::filesystem::file_size(err_path, ignored) : 0;
  const std::size_t out_offset = std::filesystem::exists(out_path) ? std::filesystem::file_size(out_path, ignored) : 0;

  std::vector<std::string> argv{options_.binary, "serve", "--listen", options_.host + ":" + std::to_string(port),
                                "--database", database_};
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  EnvVars env = options_.env;
  if (!options_.admin_key.empty()) env.emplace_back("TOLLGATE_ADMIN_KEY", options_.admin_key);
  pid_ = spawn_process(argv, env, out_path, err_path);

  // Wait for "listening on HOST:PORT" in this run's part of the log.
  const auto deadline = Clock::now() + options_.start_timeout;
  const std::string marker = "listening on " + options_.host + ":";
  for (;;) {
    const std::string log_text = read_file(err_path);
    const std::size_t at = log_text.find(marker, std::min(log_offset, log_text.size()));
    if (at != std::string::npos) {
      std::size_t i = at + marker.size();
      unsigned long value = 0;
      while (i < log_text.size() && log_text[i] >= '0' && log_text[i] <= '9') value = value * 10 + (log_text[i++] - '0');
      if (value == 0 || value > 65535) throw std::runtime_error("cannot read the port from the server's log:\n" + log_text);
      port_ = static_cast<std::uint16_t>(value);
      break;
    }
    if (auto code = exit_code_if_ended(pid_)) {
      pid_ = -1;
      throw std::runtime_error("the server exited with " + std::to_string(*code) + " before listening:\n" +
                               log_text.substr(std::min(log_offset, log_text.size())));
    }
    if (Clock::now() >= deadline) {
      stop(SIGKILL);
      throw std::runtime_error("the server did not listen within " + std::to_string(options_.start_timeout.count()) +
                               " ms:\n" + log_text.substr(std::min(log_offset, log_text.size())));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // A generated admin key is printed once on stdout, after the server bound its port and before
  // it logs "listening on".
  if (options_.admin_key.empty()) {
    const std::string out = read_file(out_path);
    const std::string key_marker = "generated admin key (shown once, stored hashed): ";
    const std::size_t at = out.find(key_marker, std::min(out_offset, out.size()));
    if (at != std::string::npos) {
      const std::size_t begin = at + key_marker.size();
      admin_key_ = out.substr(begin, out.find('\n', begin) - begin);
    }
  }
}

int ServerProcess::stop(int signal, std::chrono::milliseconds timeout) {
  if (!running()) return 0;
  const int code = stop_process(pid_, signal, timeout);
  pid_ = -1;
  return code;
}

void ServerProcess::restart(bool same_port) {
  if (running()) stop(SIGTERM);
  start(same_port ? port_ : options_.port);
}

// --- one-shot processes -----------------------------------------------------------------------------
namespace {

// run_process, with stdin from `in_path`.
ProcessResult run_with_stdin(const std::vector<std::string>& argv, const std::string& in_path, const EnvVars& env,
                             std::chrono::milliseconds timeout) {
  TempDir dir;
  const std::string out_path = dir.file("stdout");
  const std::string err_path = dir.file("stderr");
  const auto started = Clock::now();
  const pid_t pid = spawn_process(argv, env, out_path, err_path, in_path);
  ProcessResult result;
  auto code = wait_until(pid, started + timeout);
  if (!code) {
    ::kill(pid, SIGKILL);
    wait_until(pid, Clock::now() + std::chrono::seconds(30));
    result.timed_out = true;
  }
  result.exit_code = code.value_or(-1);
  result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const EnvVars& env, std::chrono::milliseconds timeout) {
  return run_with_stdin(argv, "/dev/null", env, timeout);
}

ProcessResult run_process_with_input(const std::vector<std::string>& argv, std::string_view input, const EnvVars& env,
                                     std::chrono::milliseconds timeout) {
  TempDir dir;
  const std::string in_path = dir.file("stdin");
  {
    std::ofstream in(in_path, std::ios::binary);
    in.write(input.data(), static_cast<std::streamsize>(input.size()));
    if (!in.flush()) throw std::runtime_error("cannot write " + in_path);
  }
  return run_with_stdin(argv, in_path, env, timeout);
}

ProcessResult run_tollgate(const std::vector<std::string>& args, const EnvVars& env, std::chrono::milliseconds timeout) {
  std::vector<std::string> argv{default_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, env, timeout);
}

std::uint16_t unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error(std::string("bind: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace tollgate::testing
