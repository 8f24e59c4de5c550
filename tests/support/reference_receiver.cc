#include "support/reference_receiver.h"

#include <boost/json.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "support/server_process.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

std::string text_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string string_or_empty(const json::object& line, std::string_view key) {
  const json::value* v = line.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::optional<std::int64_t> integer_or_none(const json::object& line, std::string_view key) {
  const json::value* v = line.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return std::nullopt;
}

ReceivedRequest parse_entry(std::string_view text) {
  boost::system::error_code ec;
  const json::value parsed = json::parse(text, ec);
  if (ec || !parsed.is_object()) throw std::runtime_error("the receiver logged a line that is not a JSON object: " + std::string(text));
  const json::object& line = parsed.get_object();
  ReceivedRequest entry;
  entry.webhook_id = string_or_empty(line, "webhook_id");
  entry.timestamp_s = integer_or_none(line, "timestamp");
  const json::value* verified = line.if_contains("verified");
  entry.verified = verified != nullptr && verified->is_bool() && verified->get_bool();
  entry.error = string_or_empty(line, "error");
  entry.type = string_or_empty(line, "type");
  entry.event_id = integer_or_none(line, "event_id");
  entry.attempt_seen = static_cast<int>(integer_or_none(line, "attempt_seen").value_or(0));
  entry.answered = static_cast<int>(integer_or_none(line, "answered").value_or(0));  // "dropped": 0
  entry.received_at_ms = integer_or_none(line, "received_at_ms").value_or(0);
  return entry;
}

}  // namespace

std::optional<std::string> reference_receiver_script() {
  const char* path = std::getenv("TOLLGATE_WEBHOOK_RECEIVER");
  if (path == nullptr || *path == '\0') return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  return std::string(path);
}

bool reference_receiver_required() {
  const char* v = std::getenv("TOLLGATE_REQUIRE_WEBHOOK_RECEIVER");
  return v != nullptr && std::string_view(v) == "1";
}

ReferenceReceiver::ReferenceReceiver(ReferenceReceiverOptions options) {
  const auto script = reference_receiver_script();
  if (!script) throw std::runtime_error("TOLLGATE_WEBHOOK_RECEIVER names no receiver.mjs");
  if (options.secrets.empty()) throw std::runtime_error("a ReferenceReceiver needs at least one secret");
  std::vector<std::string> argv{"/usr/bin/env", "node", *script, "--port", "0", "--log", dir_.file("requests.jsonl")};
  for (const auto& secret : options.secrets) {
    argv.insert(argv.end(), {"--secret", secret});
  }
  argv.insert(argv.end(), {"--drop-first", std::to_string(options.drop_first), "--fail-first",
                           std::to_string(options.fail_first), "--slow-ms", std::to_string(options.slow_ms),
                           "--status", std::to_string(options.status)});
  pid_ = spawn_process(argv, {}, dir_.file("stdout"), dir_.file("stderr"));

  // Its first stdout line, {"port":N}, says it listens.
  const auto deadline = std::chrono::steady_clock::now() + options.start_timeout;
  for (;;) {
    const std::string out = text_of(dir_.path() / "stdout");
    if (const auto end = out.find('\n'); end != std::string::npos) {
      boost::system::error_code ec;
      const json::value line = json::parse(std::string_view(out).substr(0, end), ec);
      const json::value* port = !ec && line.is_object() ? line.get_object().if_contains("port") : nullptr;
      if (port == nullptr || !port->is_int64() || port->get_int64() <= 0 || port->get_int64() > 65535) {
        stop_process(pid_, SIGKILL, std::chrono::seconds(5));
        throw std::runtime_error("the receiver printed no {\"port\": N} line: " + out + log());
      }
      port_ = static_cast<std::uint16_t>(port->get_int64());
      return;
    }
    if (const auto code = exit_code_if_ended(pid_)) {
      pid_ = -1;
      throw std::runtime_error("the receiver exited with " + std::to_string(*code) + " before listening:\n" + log());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      stop_process(pid_, SIGKILL, std::chrono::seconds(5));
      pid_ = -1;
      throw std::runtime_error("the receiver did not listen within " + std::to_string(options.start_timeout.count()) +
                               " ms:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ReferenceReceiver::~ReferenceReceiver() {
  if (pid_ > 0) stop_process(pid_, SIGKILL, std::chrono::seconds(5));
}

std::string ReferenceReceiver::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<ReceivedRequest> ReferenceReceiver::entries() const {
  const std::string text = text_of(dir_.path() / "requests.jsonl");
  std::vector<ReceivedRequest> out;
  std::size_t begin = 0;
  for (std::size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', begin)) {
    out.push_back(parse_entry(std::string_view(text).substr(begin, end - begin)));
    begin = end + 1;
  }
  return out;  // a line still being written (no '\n' yet) comes next time
}

bool ReferenceReceiver::wait_for(const std::function<bool(const std::vector<ReceivedRequest>&)>& done,
                                 std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done(entries())) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string ReferenceReceiver::log() const { return text_of(dir_.path() / "stderr"); }

}  // namespace tollgate::testing
