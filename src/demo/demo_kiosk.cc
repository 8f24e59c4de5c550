#include "demo/demo_kiosk.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/limits.h"
#include "core/parse.h"
#include "demo/webhook_receiver.h"
#include "payments/signature.h"
#include "tollgate/client.h"
#include "webhooks/signature.h"

extern char** environ;

namespace tollgate::app {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kAdminKey = "demo-admin-key-0123456789abcdef0123";
constexpr const char* kAccount = "event-kiosks";
constexpr const char* kProvider = "imagegen";
constexpr const char* kPack = "kiosk";  // [payments.stripe.packs] kiosk = the credits: what the owner buys
constexpr const char* kJamReason = "the print jammed";
constexpr const char* kJamRequestId = "kiosk-jammed-print";  // the refund's request_id, the same on both sends
// Real-world figures, in provider time (divided by the time scale).
constexpr std::int64_t kNaiveClientTimeoutMs = 25'000;  // the kiosk app gives up after 25 s (the longest generation)
constexpr std::int64_t kDemoDeadlineMs = 55'000;        // everything must have ended by then

std::int64_t scaled(std::int64_t provider_ms, double scale) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(static_cast<double>(provider_ms) / scale)));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// --- the server as a child process ------------------------------------------------------------------
class ChildServer {
 public:
  ChildServer(std::string binary, std::filesystem::path dir) : binary_(std::move(binary)), dir_(std::move(dir)) {}
  ~ChildServer() { kill_now(SIGKILL); }

  // Starts `serve --config` listening on 127.0.0.1:port (0: any); waits for "listening on".
  bool start(std::uint16_t port, std::string& error) {
    const std::string err_path = (dir_ / "server.log").string();
    std::error_code ec;
    const std::size_t offset = std::filesystem::exists(err_path) ? std::filesystem::file_size(err_path, ec) : 0;
    std::vector<std::string> argv{binary_, "serve", "--config", (dir_ / "tollgate.toml").string(), "--listen",
                                  "127.0.0.1:" + std::to_string(port)};
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, "TOLLGATE_", 9) != 0) env.emplace_back(*e);
    }
    std::vector<char*> argv_p, env_p;
    for (auto& s : argv) argv_p.push_back(s.data());
    argv_p.push_back(nullptr);
    for (auto& s : env) env_p.push_back(s.data());
    env_p.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, binary_.c_str(), &actions, nullptr, argv_p.data(), env_p.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      error = "cannot start " + binary_ + ": " + std::strerror(rc);
      return false;
    }
    pid_ = pid;
    const std::string marker = "listening on 127.0.0.1:";
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    for (;;) {
      const std::string log = read_file(err_path);
      const std::size_t at = log.find(marker, std::min(offset, log.size()));
      if (at != std::string::npos) {
        std::size_t i = at + marker.size();
        unsigned long value = 0;
        while (i < log.size() && log[i] >= '0' && log[i] <= '9') value = value * 10 + static_cast<unsigned long>(log[i++] - '0');
        if (value > 0 && value <= 65535) {
          port_ = static_cast<std::uint16_t>(value);
          return true;
        }
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        error = "the server exited before listening:\n" + log.substr(std::min(offset, log.size()));
        return false;
      }
      if (Clock::now() >= deadline) {
        kill_now(SIGKILL);
        error = "the server did not listen within 15 s:\n" + log.substr(std::min(offset, log.size()));
        return false;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  // Sends `signal` and reaps the process (SIGKILL after 10 s if a SIGTERM is not enough).
  void kill_now(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) break;
      if (Clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    pid_ = -1;
  }

  std::uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_file(dir_ / "server.log"); }

 private:
  std::string binary_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

std::string self_binary() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : path.string();
}

// --- the guests ------------------------------------------------------------------------------------
enum class GuestEnd { none, image, refused, failed, error, unresolved };

struct Guest {
  std::string id;
  GuestEnd end = GuestEnd::none;
  std::string status;  // the job's final status
  bool charged = false;
  std::int64_t attempts = 0;
  int resends = 0;  // POSTs and GETs sent again after a connection error or 503
  std::string error;
};

struct Shared {
  std::atomic<int> next_guest{0};
  std::atomic<int> done{0};
  std::atomic<int> in_flight{0};  // guests whose job was accepted and has not ended
  std::atomic<int> images{0};
  std::atomic<int> refused{0};
  std::atomic<int> failed{0};
  std::atomic<int> resends{0};
  std::atomic<bool> server_down{false};
  std::atomic<std::int64_t> credits_left{-1};
  std::atomic<std::int64_t> min_available{0};  // the lowest `available` the progress display read
  Clock::time_point deadline;
};

bool is_ended(std::string_view status) { return status == "completed" || status == "failed" || status == "cancelled"; }

bool must_resend(const client::Response& r) {
  return r.is_transport_error() || (r.is_problem() && r.problem().status == 503);
}

void serve_guest(Guest& guest, client::Client& kiosk, int kiosk_no, Shared& shared) {
  json::object body;
  body["client_request_id"] = guest.id;
  body["account_id"] = kAccount;
  body["cost"] = 1;
  body["provider"] = kProvider;
  body["input"] = json::object{{"prompt", "a portrait of " + guest.id + " at the event"}, {"kiosk", kiosk_no}};
  const json::value body_value(std::move(body));
  const std::string path = "/v1/jobs/" + client::Client::encode_component(guest.id);

  json::object job;
  // Submit: the same client_request_id every time, whatever happened to the previous attempt.
  for (;;) {
    if (Clock::now() >= shared.deadline) {
      guest.end = GuestEnd::unresolved;
      guest.error = "not accepted before the demo's deadline";
      return;
    }
    auto r = kiosk.call("POST", "/v1/jobs", &body_value, client::Resend::safe);
    if (r.ok()) {
      job = r.json().as_object();
      break;
    }
    if (must_resend(r)) {
      ++guest.resends;
      ++shared.resends;
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    if (r.problem().code == "insufficient_credits") {
      // Credits reserved by jobs in flight may come back (a failed job releases its hold): wait for
      // them; with nothing reserved the account is sold out.
      auto a = kiosk.get_account(kAccount);
      if (a.ok()) {
        const auto& acc = a.json().as_object();
        const auto reserved = acc.at("reserved").to_number<std::int64_t>();
        const auto available = acc.at("available").to_number<std::int64_t>();
        if (reserved == 0 && available < 1) {
          guest.end = GuestEnd::refused;
          return;
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    guest.end = GuestEnd::error;
    guest.error = "POST /v1/jobs: " + r.describe();
    return;
  }
  ++shared.in_flight;
  struct InFlight {
    std::atomic<int>& n;
    ~InFlight() { --n; }
  } in_flight{shared.in_flight};
  // Wait for its end: a long poll, asked again after a connection error (the server may have died).
  while (!is_ended(job.at("status").as_string())) {
    if (Clock::now() >= shared.deadline) {
      guest.end = GuestEnd::unresolved;
      guest.error = "still " + std::string(job.at("status").as_string()) + " at the demo's deadline";
      return;
    }
    auto r = kiosk.call("GET", path + "?wait_ms=10000", nullptr, client::Resend::safe);
    if (r.ok()) {
      job = r.json().as_object();
      continue;
    }
    if (must_resend(r)) {
      ++guest.resends;
      ++shared.resends;
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    guest.end = GuestEnd::error;
    guest.error = "GET " + path + ": " + r.describe();
    return;
  }
  guest.status = std::string(job.at("status").as_string());
  guest.charged = job.at("charged").as_bool();
  guest.attempts = job.at("attempts").to_number<std::int64_t>();
  guest.end = guest.status == "completed" ? GuestEnd::image : GuestEnd::failed;
}

// --- helpers for the final checks -------------------------------------------------------------------
std::optional<json::object> get_json(client::Client& c, std::string_view target, std::string& error) {
  for (int i = 0; i < 20; ++i) {
    auto r = c.call("GET", target, nullptr, client::Resend::safe);
    if (r.ok() && r.json().is_object()) return r.json().as_object();
    error = std::string(target) + ": " + r.describe();
    if (!must_resend(r)) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(200));
  }
  return std::nullopt;
}

std::int64_t num(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<std::int64_t>() : 0;
}

// --- the kiosk owner: told by webhook ---------------------------------------------------------------
// What the owner's system (an in-process demo::WebhookReceiver) was told: each balance notice once
// per webhook-id, its signature checked with tollgate's own webhooks::verify and the endpoint's secret.
struct OwnerNotice {
  std::string type;  // balance_low | balance_depleted | balance_recovered
  std::int64_t event_id = 0;
  std::int64_t available_after = 0;
  double at_s = 0;  // after the guests arrived (before: negative)
};

class OwnerInbox {
 public:
  void set_secret(std::string secret, std::int64_t threshold) {
    std::lock_guard lock(mu_);
    secret_ = std::move(secret);
    threshold_ = threshold;
  }
  void set_arrived(Clock::time_point arrived, bool tty) {
    std::lock_guard lock(mu_);
    arrived_ = arrived;
    tty_ = tty;
  }

  // On the receiver's I/O thread.
  void on_request(demo::ReceivedWebhook&& r) {
    const auto timestamp = parse_int(r.webhook_timestamp, 0);
    std::lock_guard lock(mu_);
    const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count();
    // As a Standard Webhooks receiver does: the signature, and a time-stamp within 5 minutes.
    if (!timestamp || std::llabs(now_s - *timestamp) > 300 ||
        !webhooks::verify(r.webhook_signature, secret_, r.webhook_id, *timestamp, r.body)) {
      ++bad_signatures_;
      return;
    }
    if (!seen_.insert(r.webhook_id).second) {
      ++repeats_;  // sent again after the crash (at least once): the receiver deduplicates by webhook-id
      return;
    }
    OwnerNotice n;
    try {
      const auto body = json::parse(r.body).as_object();
      n.type = std::string(body.at("type").as_string());
      const auto& data = body.at("data").as_object();
      n.event_id = num(data, "event_id");
      n.available_after = num(data, "available_after");
    } catch (const std::exception&) {
      ++bad_signatures_;  // signed but not the documented body: counted as refused
      return;
    }
    n.at_s = std::chrono::duration<double>(r.received - arrived_).count();
    std::fprintf(stderr, "%sowner told by webhook at %.1fs: %s (%s: %lld available, threshold %lld), signature verified\n",
                 tty_ ? "\r\033[K" : "", n.at_s, n.type.c_str(), meaning(n.type),
                 static_cast<long long>(n.available_after), static_cast<long long>(threshold_));
    notices_.push_back(std::move(n));
  }

  static const char* meaning(std::string_view type) {
    if (type == "balance_low") return "credits low";
    if (type == "balance_depleted") return "no credits";
    if (type == "balance_recovered") return "credits back above the threshold";
    return "?";
  }

  std::vector<OwnerNotice> notices() const {
    std::lock_guard lock(mu_);
    return notices_;
  }
  int repeats() const {
    std::lock_guard lock(mu_);
    return repeats_;
  }
  int bad_signatures() const {
    std::lock_guard lock(mu_);
    return bad_signatures_;
  }
  bool has_event(std::int64_t event_id) const {
    std::lock_guard lock(mu_);
    return std::any_of(notices_.begin(), notices_.end(), [&](const OwnerNotice& n) { return n.event_id == event_id; });
  }

 private:
  mutable std::mutex mu_;
  std::string secret_;
  std::int64_t threshold_ = 0;
  Clock::time_point arrived_ = Clock::now();
  bool tty_ = false;
  std::set<std::string> seen_;
  std::vector<OwnerNotice> notices_;
  int repeats_ = 0, bad_signatures_ = 0;
};

std::string progress_line(const Shared& s, int guests, double seconds, const char* server) {
  char buf[256];
  const auto credits = s.credits_left.load();
  std::snprintf(buf, sizeof buf, "%5.1fs  guests done %d/%d  in flight %d  images charged %d  nothing %d  credits left %s  server %s",
                seconds, s.done.load(), guests, s.in_flight.load(), s.images.load(), s.refused.load() + s.failed.load(),
                credits < 0 ? "?" : std::to_string(credits).c_str(), server);
  return buf;
}

}  // namespace

// --- public helpers ---------------------------------------------------------------------------------
jobs::FakeProviderOptions demo_provider_options(const DemoKioskOptions& options) {
  jobs::FakeProviderOptions p;
  p.host = "127.0.0.1";
  p.port = 0;
  p.seed = options.seed;
  p.latency_min_ms = 15'000;
  p.latency_max_ms = 25'000;
  p.time_scale = options.time_scale;
  p.fail_rate = 0.04;
  p.lost_answer_rate = 0.08;
  p.late_answer_rate = 0.08;
  p.never_received_rate = 0.04;
  p.late_extra_ms = 120'000;
  p.threads = 1;
  return p;
}

std::string demo_guest_id(const DemoKioskOptions& options, int guest) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "guest-%03d", guest + 1);
  (void)options;
  return buf;
}

std::int64_t demo_crash_at_ms(const DemoKioskOptions& options) {
  // The first round of generations has ended, the second is in flight.
  return scaled(37'500, options.time_scale);
}

NaiveFigures simulate_naive(const DemoKioskOptions& options, std::int64_t client_timeout_ms, std::int64_t restart_ms) {
  const jobs::FakeProviderOptions p = demo_provider_options(options);
  const std::int64_t crash_at = options.crash ? demo_crash_at_ms(options) : -1;
  const std::int64_t resume_at = crash_at + restart_ms;
  constexpr std::int64_t kQuickMs = 5;  // a balance read, a 422, a closed connection
  NaiveFigures f;
  std::int64_t balance = options.credits;
  std::int64_t in_progress = 0;
  f.min_balance = balance;

  // Events (time, sequence, kind, kiosk, guest, call): ordered by time, then by when they were made.
  enum Kind { kiosk_free = 0, call_end = 1, call_lost = 2 };
  struct Call {
    std::string id;
    bool work_done = false;  // the provider did the work (whatever the app saw)
    bool success = false;    // a 2xx answer before the client's time-out
    std::int64_t start = 0;
  };
  std::vector<Call> calls;
  using Event = std::tuple<std::int64_t, std::int64_t, int, int, int, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::int64_t seq = 0;
  for (int k = 0; k < options.kiosks; ++k) events.emplace(0, seq++, kiosk_free, k, -1, -1);
  int next_guest = 0;
  std::vector<int> returning;  // guests whose call the crash swallowed: first in line again

  auto start_call = [&](std::int64_t t, int k, int g, const std::string& id) {
    const auto plan = jobs::plan_request(p, id, 0);
    const std::int64_t latency = std::chrono::duration_cast<milliseconds>(plan.latency).count();
    const std::int64_t late = std::chrono::duration_cast<milliseconds>(plan.late_extra).count();
    Call c;
    c.id = id;
    c.start = t;
    std::int64_t answer_at = t + latency;
    bool good_answer = false;
    switch (plan.fault) {
      case jobs::FakeFault::none: c.work_done = true; good_answer = true; break;
      case jobs::FakeFault::refuse: answer_at = t + kQuickMs; break;
      case jobs::FakeFault::lose_answer: c.work_done = true; break;
      case jobs::FakeFault::answer_late: c.work_done = true; good_answer = true; answer_at = t + latency + late; break;
      case jobs::FakeFault::never_receive: answer_at = t + kQuickMs; break;
    }
    const std::int64_t give_up_at = t + client_timeout_ms;
    const std::int64_t end = std::min(answer_at, give_up_at);
    c.success = good_answer && answer_at <= give_up_at;
    ++f.calls;
    ++in_progress;  // the app's "in progress" mark
    calls.push_back(c);
    const int call_no = static_cast<int>(calls.size()) - 1;
    if (crash_at >= 0 && t < crash_at && end >= crash_at) {
      events.emplace(crash_at, seq++, call_lost, k, g, call_no);
    } else {
      events.emplace(end, seq++, call_end, k, g, call_no);
    }
  };

  while (!events.empty()) {
    auto [t, s, kind, k, g, call_no] = events.top();
    events.pop();
    (void)s;
    if (kind == kiosk_free) {
      if (crash_at >= 0 && t >= crash_at && t < resume_at) {
        events.emplace(resume_at, seq++, kiosk_free, k, -1, -1);
        continue;
      }
      int guest = -1;
      std::string id;
      if (!returning.empty()) {
        guest = returning.front();
        returning.erase(returning.begin());
        id = demo_guest_id(options, guest) + ":again";
      } else if (next_guest < options.guests) {
        guest = next_guest++;
        id = demo_guest_id(options, guest);
      } else {
        continue;
      }
      if (balance < 1) {  // the check: the balance as read, other kiosks' calls invisible
        ++f.refused;
        events.emplace(t + kQuickMs, seq++, kiosk_free, k, -1, -1);
        continue;
      }
      start_call(t, k, guest, id);
    } else if (kind == call_end) {
      const Call& c = calls[static_cast<std::size_t>(call_no)];
      --in_progress;
      if (c.success) {
        balance -= 1;  // UPDATE … SET balance = balance - 1: it checked before the call
        ++f.charged;
        ++f.images_delivered;
        f.min_balance = std::min(f.min_balance, balance);
      } else {
        ++f.failed;
        if (c.work_done) ++f.free_generations;  // timed out, 500 or answered too late: done, unpaid
      }
      events.emplace(t, seq++, kiosk_free, k, -1, -1);
    } else {  // the app died during the call: the mark stays, the work (if any) is never paid
      const Call& c = calls[static_cast<std::size_t>(call_no)];
      if (c.work_done) ++f.free_generations;
      // After the restart the guest, still standing there, presses again: a new call, checked again.
      returning.push_back(g);
      events.emplace(resume_at, seq++, kiosk_free, k, -1, -1);
    }
  }
  // A print jammed: its refund reaches the app twice (a second click, a resend after a lost answer);
  // with no request id to tell them apart, each adds the credit back.
  if (f.images_delivered > 0) {
    f.refunded = 2;
    balance += f.refunded;
  }
  f.frozen_credits = in_progress;
  f.final_balance = balance;
  f.double_spends = std::max<std::int64_t>(0, f.charged - options.credits);
  return f;
}

namespace {

// The owner's purchase of the account's credits at Stripe: one checkout session, its
// checkout.session.completed event posted to tollgate signed, then delivered again as Stripe does.
struct Purchase {
  std::string session;         // cs_demo_… (made per run)
  std::string reference;       // stripe:{session}: the credit's reference
  std::int64_t credits = 0;    // what the first delivery's answer says it credited
  std::string outcome;         // the first delivery: credited
  std::string replay_outcome;  // the same event again: replayed
  std::int64_t purchased_after_replay = -1;  // the account's purchased once both were delivered
};

// The jammed print: one completed job's charge given back (POST /v1/jobs/{id}/refund), the refund
// sent twice with one request_id. job empty: no job completed, nothing refunded.
struct JammedPrint {
  std::string job;
  std::int64_t refunded = -1, refunded_after_resend = -1;  // the answers' refunded_amount
  std::int64_t used_before = -1, used_after = -1, used_after_resend = -1;
};

// One run of the demo: its folder, the provider, the server, and the admin's client.
struct DemoSetup {
  std::filesystem::path dir;
  jobs::FakeProviderOptions provider_options;
  std::unique_ptr<jobs::FakeProvider> provider;
  std::unique_ptr<ChildServer> server;
  client::Options admin_options;
  std::unique_ptr<client::Client> admin;
  std::string kiosk_key;
  std::string stripe_secret;  // [payments.stripe] signing_secrets: whsec_… made per run
  Purchase purchase;
  std::int64_t expected_ms = 0;  // the longest generation, scaled
  // The kiosk owner's system, told "credits low" and "no credits" by webhook (the inbox outlives
  // the receiver that feeds it).
  std::unique_ptr<OwnerInbox> owner;
  std::unique_ptr<demo::WebhookReceiver> owner_receiver;
  std::int64_t low_balance_threshold = 0;
};

// What the crash did (crashed false: no crash was made).
struct CrashReport {
  bool crashed = false;
  bool restart_failed = false;
  int in_flight_at_crash = 0;
  std::int64_t crash_ms = -1;
  std::int64_t restart_ms = 0;
};

// What the progress thread shows besides the guests' counters.
struct ProgressState {
  std::atomic<bool> kiosks_done{false};
  std::atomic<const char*> server_state{"up"};
};

// What the guests saw, counted.
struct GuestTally {
  int images = 0, refused = 0, failed = 0, errors = 0, unresolved = 0, resends = 0;
  std::int64_t charged_flags = 0, attempts_total = 0;
};

// What the server says after the run.
struct ServerFigures {
  std::int64_t available = 0, reserved = 0, used = 0, purchased = 0;
  std::int64_t audit_violations = -1, accounts_checked = 0;
  std::int64_t charge_events = 0, charged_amount = 0, double_charges = 0, jobs_charged = 0;
  std::int64_t credit_events = 0, credited_amount = 0;  // `credited`: the purchase
  std::int64_t refund_events = 0, refunded_amount = 0;  // `refunded`: the jammed print
  std::vector<std::string> credit_references, refund_references, refund_jobs;
  std::int64_t jobs_completed_listed = -1;
  std::int64_t recovered = -1;  // jobs the restarted server recovered (its counters start at its start)
  std::vector<std::int64_t> notice_events;  // the account's balance_* events, by id
  std::int64_t lost_credits() const { return purchased - (available + reserved + used); }
};

// Everything the summary and the JSON line report.
struct DemoReport {
  const DemoKioskOptions& options;
  const std::filesystem::path& dir;
  const Purchase& purchase;
  CrashReport crash;
  JammedPrint jam;
  GuestTally tally;
  ServerFigures figures;
  jobs::FakeProviderStats provider;
  NaiveFigures naive;
  std::int64_t naive_timeout_ms = 0;
  std::int64_t min_available = 0;
  std::vector<std::string> failures;
  double total_seconds = 0;
  std::vector<OwnerNotice> owner_notices;
  int owner_repeats = 0, owner_bad_signatures = 0;
  std::int64_t threshold = 0;
  bool ok() const { return failures.empty(); }
};

void write_demo_config(const std::filesystem::path& dir, const jobs::FakeProvider& provider, std::int64_t expected_ms,
                       const std::string& stripe_secret, std::int64_t credits) {
  std::ofstream toml(dir / "tollgate.toml");
  toml << "listen = \"127.0.0.1:0\"\n"
       << "database = \"sqlite:" << (dir / "tollgate.db").string() << "\"\n"
       << "admin_key = \"" << kAdminKey << "\"\n"
       << "hold_ttl_ms = 120000\n"
       << "late_commit = \"charge\"\n\n"
       << "[providers." << kProvider << "]\n"
       << "url = \"" << provider.base_url() << "/generate\"\n"
       << "status_url = \"" << provider.base_url() << "/status/{id}\"\n"
       << "timeout_ms = " << 3 * expected_ms << "\n"
       << "expected_duration_ms = " << expected_ms << "\n"
       << "max_attempts = 3\n\n"
       << "[payments.stripe]\n"
       << "signing_secrets = [\"" << stripe_secret << "\"]\n\n"
       << "[payments.stripe.packs]\n"
       << kPack << " = " << credits << "\n";
}

// Stripe's checkout.session.completed for the owner's purchase of the pack: paid, the account as
// client_reference_id, the pack in the metadata (the shape of Stripe's event, the fields tollgate reads).
std::string checkout_event(const std::string& session) {
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch()).count();
  json::object checkout{{"id", session},
                        {"object", "checkout.session"},
                        {"mode", "payment"},
                        {"status", "complete"},
                        {"payment_status", "paid"},
                        {"client_reference_id", kAccount},
                        {"metadata", json::object{{"tollgate_pack", kPack}}}};
  json::object event{{"id", client::Client::new_request_id("evt_demo_")},
                     {"object", "event"},
                     {"type", "checkout.session.completed"},
                     {"created", now_s},
                     {"livemode", false},
                     {"data", json::object{{"object", std::move(checkout)}}}};
  return json::serialize(event);
}

// The owner buys the account's credits at Stripe: Stripe posts the session's event to
// /v1/payments/stripe signed with the endpoint's secret (no API key), then delivers the very same
// event again (it delivers at least once; each delivery signed anew). False (with `error`) when a
// delivery was refused; the outcomes are checked at the end.
bool buy_credits(DemoSetup& s, std::string& error) {
  client::Options so = s.admin_options;
  so.key.clear();  // the signature is the authentication
  client::Client stripe(so);
  Purchase& p = s.purchase;
  p.session = client::Client::new_request_id("cs_demo_");
  p.reference = "stripe:" + p.session;
  const std::string body = checkout_event(p.session);
  for (std::string* outcome : {&p.outcome, &p.replay_outcome}) {
    const std::int64_t t = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string signature = "t=" + std::to_string(t) + ",v1=" + payments::stripe_signature(s.stripe_secret, t, body);
    auto r = stripe.call_raw("POST", "/v1/payments/stripe", body, {{"Stripe-Signature", signature}});
    if (!r.ok() || !r.json().is_object()) {
      error = "POST /v1/payments/stripe: " + r.describe();
      return false;
    }
    const auto* o = r.json().as_object().if_contains("outcome");
    *outcome = o != nullptr && o->is_string() ? std::string(o->as_string()) : "?";
    if (outcome == &p.outcome) p.credits = num(r.json().as_object(), "credits");
  }
  auto a = s.admin->get_account(kAccount);
  if (a.ok()) p.purchased_after_replay = num(a.json().as_object(), "purchased");
  return true;
}

// The account the kiosks share, its credits (bought at Stripe) and the kiosks' key; false (with
// `error`) when refused.
bool create_kiosk_account(DemoSetup& s, std::string& error) {
  auto a = s.admin->create_account({kAccount, std::nullopt, std::nullopt});
  if (!a.ok()) {
    error = a.describe();
    return false;
  }
  if (!buy_credits(s, error)) return false;
  auto k = s.admin->create_key(kAccount);
  if (!k.ok()) {
    error = k.describe();
    return false;
  }
  s.kiosk_key = std::string(k.json().as_object().at("secret").as_string());
  return true;
}

// The owner's receiver, the account's low_balance_threshold (a quarter of the credits, at least 1)
// and a webhook endpoint for its balance notices; false (with `error`) when refused.
bool set_up_owner(const DemoKioskOptions& o, DemoSetup& s, std::string& error) {
  s.owner = std::make_unique<OwnerInbox>();
  demo::WebhookReceiverOptions ro;
  ro.on_request = [inbox = s.owner.get()](demo::ReceivedWebhook&& r) { inbox->on_request(std::move(r)); };
  try {
    s.owner_receiver = std::make_unique<demo::WebhookReceiver>(ro);
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
  s.low_balance_threshold = std::max<std::int64_t>(1, (o.credits + 3) / 4);
  client::UpdateAccountRequest threshold;
  threshold.low_balance_threshold = s.low_balance_threshold;
  auto u = s.admin->update_account(kAccount, threshold);
  if (!u.ok()) {
    error = "low_balance_threshold: " + u.describe();
    return false;
  }
  client::CreateWebhookEndpointRequest endpoint;
  endpoint.url = s.owner_receiver->url("/owner");
  endpoint.event_types = {"balance_low", "balance_depleted", "balance_recovered"};
  endpoint.account_id = kAccount;
  endpoint.description = "the kiosk owner";
  auto e = s.admin->create_webhook_endpoint(endpoint);
  if (!e.ok()) {
    error = "webhook endpoint: " + e.describe();
    return false;
  }
  s.owner->set_secret(std::string(e.json().as_object().at("secret").as_string()), s.low_balance_threshold);
  return true;
}

// The folder, the provider, the server and the account. 0, or the exit code (the reason printed).
int set_up_demo(const DemoKioskOptions& o, DemoSetup& s) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-demo-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "tollgate: demo kiosk: cannot make a temporary folder: %s\n", std::strerror(errno));
    return 3;
  }
  s.dir = tmpl;
  s.provider_options = demo_provider_options(o);
  try {
    s.provider = std::make_unique<jobs::FakeProvider>(s.provider_options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tollgate: demo kiosk: fake provider: %s\n", e.what());
    return 3;
  }
  s.expected_ms = scaled(s.provider_options.latency_max_ms, o.time_scale);
  s.stripe_secret = client::Client::new_request_id("whsec_") + client::Client::new_request_id("");
  write_demo_config(s.dir, *s.provider, s.expected_ms, s.stripe_secret, o.credits);
  s.server = std::make_unique<ChildServer>(self_binary(), s.dir);
  std::string error;
  if (!s.server->start(0, error)) {
    std::fprintf(stderr, "tollgate: demo kiosk: %s\n(files kept in %s)\n", error.c_str(), s.dir.c_str());
    return 3;
  }
  s.admin_options.base_url = s.server->url();
  s.admin_options.key = kAdminKey;
  s.admin_options.connect_timeout = milliseconds(1000);
  s.admin_options.request_timeout = milliseconds(15000);
  s.admin = std::make_unique<client::Client>(s.admin_options);
  if (!create_kiosk_account(s, error)) {
    std::fprintf(stderr, "tollgate: demo kiosk: setting up the account: %s\n", error.c_str());
    return 3;
  }
  if (!set_up_owner(o, s, error)) {
    std::fprintf(stderr, "tollgate: demo kiosk: setting up the owner's webhook: %s\n", error.c_str());
    return 3;
  }
  return 0;
}

void print_banner(const DemoKioskOptions& o, const DemoSetup& s) {
  std::fprintf(stderr,
               "tollgate demo kiosk: %d kiosks share one account of %lld credits; %d guests arrive at once.\n"
               "  provider: 15-25 s generations / %g = %lld-%lld ms; refusals 4%%, lost answers 8%%, late answers 8%%, "
               "dropped connections 4%% (seed %llu)\n"
               "  server: tollgate serve on %s, SQLite in %s%s\n"
               "  owner: told by webhook when fewer than %lld credits are left and when none are (a receiver in this "
               "process, %s)\n",
               o.kiosks, static_cast<long long>(o.credits), o.guests, o.time_scale,
               static_cast<long long>(scaled(s.provider_options.latency_min_ms, o.time_scale)),
               static_cast<long long>(s.expected_ms), static_cast<unsigned long long>(o.seed), s.server->url().c_str(),
               s.dir.c_str(), o.crash ? "; it will be killed (SIGKILL) mid-run and restarted" : "",
               static_cast<long long>(s.low_balance_threshold), s.owner_receiver->url("/owner").c_str());
  const Purchase& p = s.purchase;
  std::fprintf(stderr,
               "  purchase: the owner bought the pack %s at Stripe; its signed checkout.session.completed (session %s) "
               "-> %s %lld credits; the same event delivered again -> %s; purchased %lld\n",
               kPack, p.session.c_str(), p.outcome.c_str(), static_cast<long long>(p.credits), p.replay_outcome.c_str(),
               static_cast<long long>(p.purchased_after_replay));
}

// One kiosk: serves the next waiting guest until none is left.
void run_kiosk(int kiosk_no, const std::string& url, const std::string& kiosk_key, std::vector<Guest>& guests,
               Shared& shared) {
  client::Options ko;
  ko.base_url = url;
  ko.key = kiosk_key;
  ko.connect_timeout = milliseconds(1000);
  ko.request_timeout = milliseconds(15000);  // above the long poll's 10 s
  ko.retry.attempts_max = 1;                 // the kiosk sends again itself, with the same id
  client::Client kiosk(ko);
  for (;;) {
    const int g = shared.next_guest++;
    if (g >= static_cast<int>(guests.size())) return;
    Guest& guest = guests[static_cast<std::size_t>(g)];
    try {
      serve_guest(guest, kiosk, kiosk_no, shared);
    } catch (const std::exception& e) {  // an answer of an unexpected shape
      guest.end = GuestEnd::error;
      guest.error = std::string("unexpected answer: ") + e.what();
    }
    if (guest.end == GuestEnd::image) ++shared.images;
    if (guest.end == GuestEnd::refused) ++shared.refused;
    if (guest.end == GuestEnd::failed) ++shared.failed;
    ++shared.done;
  }
}

// The progress line on stderr (redrawn on a terminal, every 2 s otherwise) until the kiosks are done.
void show_progress(client::Options options, Shared& shared, ProgressState& state, int guests, Clock::time_point arrived,
                   bool tty) {
  options.request_timeout = milliseconds(500);
  options.retry.attempts_max = 1;
  client::Client reader(options);
  auto last_line = Clock::now() - std::chrono::seconds(10);
  while (!state.kiosks_done) {
    if (!shared.server_down) {
      auto a = reader.get_account(kAccount);
      if (a.ok()) {
        const std::int64_t v = num(a.json().as_object(), "available");
        shared.credits_left = v;
        if (v < shared.min_available) shared.min_available = v;
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - arrived).count();
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", progress_line(shared, guests, seconds, state.server_state.load()).c_str());
      std::fflush(stderr);
    } else if (Clock::now() - last_line >= std::chrono::seconds(2)) {
      std::fprintf(stderr, "%s\n", progress_line(shared, guests, seconds, state.server_state.load()).c_str());
      last_line = Clock::now();
    }
    std::this_thread::sleep_for(milliseconds(tty ? 100 : 200));
  }
}

// Waits for the crash time (and something in flight), kills the server with SIGKILL and starts it
// again on the same database and port. Nothing happens when every guest was served before.
CrashReport crash_and_restart(const DemoKioskOptions& o, ChildServer& server, Shared& shared, ProgressState& state,
                              Clock::time_point arrived, bool tty) {
  CrashReport c;
  const auto crash_at = arrived + milliseconds(demo_crash_at_ms(o));
  while (Clock::now() < crash_at && shared.done.load() < o.guests) std::this_thread::sleep_for(milliseconds(5));
  // Only worth it while something is in flight.
  while (shared.in_flight.load() == 0 && shared.done.load() < o.guests && Clock::now() < shared.deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  if (shared.done.load() >= o.guests) return c;
  c.in_flight_at_crash = shared.in_flight.load();
  c.crash_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - arrived).count();
  shared.server_down = true;
  state.server_state = "KILLED (SIGKILL)";
  server.kill_now(SIGKILL);
  c.crashed = true;
  if (!tty) std::fprintf(stderr, "server killed with SIGKILL at %.1fs, %d jobs in flight\n", c.crash_ms / 1000.0, c.in_flight_at_crash);
  std::this_thread::sleep_for(milliseconds(500));
  const auto restart_began = Clock::now();
  state.server_state = "restarting";
  bool up = false;
  std::string error;
  for (int i = 0; i < 20 && !up; ++i) {
    up = server.start(server.port(), error);
    if (!up) std::this_thread::sleep_for(milliseconds(250));
  }
  c.restart_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - restart_began).count();
  if (!up) {
    c.restart_failed = true;
    state.server_state = "DOWN";
    std::fprintf(stderr, "\ntollgate: demo kiosk: the server did not start again: %s\n", error.c_str());
  } else {
    // Why the jobs that were in flight take a few seconds: the killed server's claims on them must
    // lapse first (a lease of limits::kJobLeaseMs), then an instance asks the provider how each one
    // ended. Said once, on a line of its own; the progress line (redrawn in place) stays short.
    state.server_state = "restarted, recovering jobs";
    shared.server_down = false;
    std::fprintf(stderr,
                 "%sserver restarted on the same database and port: its jobs in flight wait for their leases to "
                 "lapse (<= %lld s), then the provider is asked how each one ended\n",
                 tty ? "\r\033[K" : "", static_cast<long long>(limits::kJobLeaseMs / 1000));
  }
  return c;
}

// One completed print jammed: the owner gives its credit back — POST /v1/jobs/{id}/refund (admin)
// with reason "the print jammed", sent twice with one request_id — and reads `used` around each
// send. Nothing when no job completed.
JammedPrint refund_jammed_print(client::Client& admin, const std::vector<Guest>& guests,
                                std::vector<std::string>& failures) {
  JammedPrint j;
  const auto printed = std::find_if(guests.begin(), guests.end(), [](const Guest& g) { return g.end == GuestEnd::image; });
  if (printed == guests.end()) {
    std::fprintf(stderr, "jammed print: no job completed, so none jammed; nothing refunded\n");
    return j;
  }
  j.job = printed->id;
  std::string error;
  auto used = [&]() -> std::int64_t {
    const auto a = get_json(admin, "/v1/accounts/" + std::string(kAccount), error);
    if (!a) failures.push_back("reading the account around the refund: " + error);
    return a ? num(*a, "used") : -1;
  };
  const client::RefundRequest refund{std::nullopt, kJamReason, kJamRequestId};
  auto send = [&](std::int64_t& refunded, std::int64_t& used_after) {
    auto r = admin.refund_job(j.job, refund);
    if (r.ok() && r.json().is_object()) {
      refunded = num(r.json().as_object(), "refunded_amount");
    } else {
      failures.push_back("refunding the jammed print " + j.job + ": " + r.describe());
    }
    used_after = used();
  };
  j.used_before = used();
  send(j.refunded, j.used_after);
  send(j.refunded_after_resend, j.used_after_resend);
  std::fprintf(stderr,
               "jammed print: %s's print jammed; its credit given back (POST /v1/jobs/%s/refund, reason \"%s\", "
               "request_id %s): refunded %lld, used %lld -> %lld; sent again: refunded %lld, used %lld (%s)\n",
               j.job.c_str(), j.job.c_str(), kJamReason, kJamRequestId, static_cast<long long>(j.refunded),
               static_cast<long long>(j.used_before), static_cast<long long>(j.used_after),
               static_cast<long long>(j.refunded_after_resend), static_cast<long long>(j.used_after_resend),
               j.used_after_resend == j.used_after ? "nothing moved" : "IT MOVED AGAIN");
  return j;
}

GuestTally tally_guests(const std::vector<Guest>& guests, std::vector<std::string>& failures) {
  GuestTally t;
  for (const auto& g : guests) {
    t.images += g.end == GuestEnd::image;
    t.refused += g.end == GuestEnd::refused;
    t.failed += g.end == GuestEnd::failed;
    t.errors += g.end == GuestEnd::error;
    t.unresolved += g.end == GuestEnd::unresolved || g.end == GuestEnd::none;
    t.charged_flags += g.charged;
    t.attempts_total += g.attempts;
    t.resends += g.resends;
    if (!g.error.empty()) failures.push_back(g.id + ": " + g.error);
  }
  return t;
}

// The provider's stats once every work it started has ended (late answers may still be on their
// way), with each guest's job checked against what the provider did with its id.
jobs::FakeProviderStats compare_with_provider(jobs::FakeProvider& provider, const std::vector<Guest>& guests,
                                              std::vector<std::string>& failures) {
  const auto settle = Clock::now() + std::chrono::seconds(10);
  while (provider.stats().running > 0 && Clock::now() < settle) std::this_thread::sleep_for(milliseconds(20));
  for (const auto& g : guests) {
    const auto outcome = provider.outcome_of(g.id);
    const bool provider_completed = outcome && outcome->state == jobs::FakeOutcome::State::completed;
    if (provider_completed != (g.end == GuestEnd::image)) {
      failures.push_back(g.id + ": the provider " + (provider_completed ? "completed the work" : "did not complete it") +
                         " but the job ended " + (g.status.empty() ? "unknown" : g.status));
    }
  }
  return provider.stats();
}

void read_account_and_audit(client::Client& admin, ServerFigures& f, std::vector<std::string>& failures) {
  std::string error;
  if (auto a = get_json(admin, "/v1/accounts/" + std::string(kAccount), error)) {
    f.available = num(*a, "available");
    f.reserved = num(*a, "reserved");
    f.used = num(*a, "used");
    f.purchased = num(*a, "purchased");
  } else {
    failures.push_back("reading the account: " + error);
  }
  if (auto audit = get_json(admin, "/v1/audit", error)) {
    const auto* v = audit->if_contains("violations");
    f.audit_violations = v && v->is_array() ? static_cast<std::int64_t>(v->as_array().size()) : -1;
    f.accounts_checked = num(*audit, "accounts_checked");
  } else {
    failures.push_back("the audit: " + error);
  }
}

// Every charge is an event naming its job: counts them per job.
void read_charges(client::Client& admin, ServerFigures& f, std::vector<std::string>& failures) {
  std::map<std::string, std::int64_t> charges_per_job;
  std::int64_t after = 0;
  std::string error;
  for (bool more = true; more;) {
    auto page = get_json(admin, "/v1/accounts/" + std::string(kAccount) + "/events?after=" + std::to_string(after) + "&limit=1000", error);
    if (!page) {
      failures.push_back("reading the events: " + error);
      break;
    }
    const auto& list = page->at("events").as_array();
    for (const auto& ev : list) {
      const auto& e = ev.as_object();
      const std::string_view type = e.at("type").as_string();
      if (type.starts_with("balance_")) f.notice_events.push_back(num(e, "event_id"));
      const auto* reference = e.if_contains("reference");
      const std::string ref = reference && reference->is_string() ? std::string(reference->as_string()) : "";
      if (type == "credited") {
        ++f.credit_events;
        f.credited_amount += num(e, "amount");
        f.credit_references.push_back(ref);
      }
      if (type == "refunded") {
        ++f.refund_events;
        f.refunded_amount += num(e, "amount");
        f.refund_references.push_back(ref);
        const auto* job = e.if_contains("job_id");
        f.refund_jobs.push_back(job && job->is_string() ? std::string(job->as_string()) : "");
      }
      if (type == "committed" || type == "late_charged") {
        ++f.charge_events;
        f.charged_amount += num(e, "amount");
        const auto* job = e.if_contains("job_id");
        ++charges_per_job[job && job->is_string() ? std::string(job->as_string()) : "(no job)"];
      }
    }
    const auto* next = page->if_contains("next_after");
    const std::int64_t next_after = next && next->is_number() ? next->to_number<std::int64_t>() : after;
    more = !list.empty() && next_after != after;
    after = next_after;
  }
  f.jobs_charged = static_cast<std::int64_t>(charges_per_job.size());
  for (const auto& [job, count] : charges_per_job) f.double_charges += count > 1;
}

// The server's own list of completed jobs, counted; -1 when it could not be read.
std::int64_t count_completed_jobs(client::Client& admin, std::vector<std::string>& failures) {
  std::int64_t count = 0;
  std::string starting_after, error;
  for (int pages = 0; pages < 100; ++pages) {
    std::string target = "/v1/jobs?account_id=" + std::string(kAccount) + "&status=completed&limit=1000";
    if (!starting_after.empty()) target += "&starting_after=" + client::Client::encode_component(starting_after);
    auto page = get_json(admin, target, error);
    if (!page) {
      failures.push_back("listing the jobs: " + error);
      return -1;
    }
    const auto& list = page->at("jobs").as_array();
    count += static_cast<std::int64_t>(list.size());
    const auto* more = page->if_contains("has_more");
    if (list.empty() || !(more && more->is_bool() && more->as_bool())) break;
    starting_after = std::string(list.back().as_object().at("client_request_id").as_string());
  }
  return count;
}

// What the restarted server says it recovered (tollgate_jobs_recovered_total); -1 when unknown.
std::int64_t read_recovered(client::Client& admin) {
  auto m = admin.call("GET", "/metrics", nullptr, client::Resend::safe);
  if (!m.ok() || !m.json().is_string()) return -1;
  const std::string_view text = m.json().as_string();
  const std::string_view name = "\ntollgate_jobs_recovered_total ";
  const auto at = text.find(name);
  if (at == std::string_view::npos) return -1;
  const std::string_view rest = text.substr(at + name.size());
  return parse_int(rest.substr(0, rest.find('\n')), 0).value_or(-1);
}

ServerFigures read_server_figures(client::Client& admin, std::vector<std::string>& failures) {
  ServerFigures f;
  read_account_and_audit(admin, f, failures);
  read_charges(admin, f, failures);
  f.jobs_completed_listed = count_completed_jobs(admin, failures);
  f.recovered = read_recovered(admin);
  return f;
}

// tollgate's figures against each other, the guests' and the provider's: each mismatch a failure.
void check_figures(const DemoKioskOptions& o, const GuestTally& t, const ServerFigures& f,
                   const jobs::FakeProviderStats& p, std::vector<std::string>& failures) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  };
  const int images = t.images;
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  check(f.lost_credits() == 0, "lost credits: " + s(f.lost_credits()));
  check(f.reserved == 0, s(f.reserved) + " credits still reserved after every job ended");
  check(f.audit_violations == 0, "audit violations: " + s(f.audit_violations));
  check(f.double_charges == 0, s(f.double_charges) + " jobs charged more than once");
  check(f.used == images - f.refunded_amount, "used credits " + s(f.used) + " != images charged " + s(images) +
                                                 " - refunded " + s(f.refunded_amount));
  check(t.charged_flags == images, "jobs marked charged " + s(t.charged_flags) + " != completed " + s(images));
  check(f.charged_amount == images && f.charge_events == images && f.jobs_charged == images,
        "charge events " + s(f.charge_events) + " (" + s(f.charged_amount) + " credits, " + s(f.jobs_charged) +
            " jobs) do not match images " + s(images));
  check(f.jobs_completed_listed == images,
        "GET /v1/jobs lists " + s(f.jobs_completed_listed) + " completed jobs, the kiosks saw " + s(images));
  check(static_cast<std::int64_t>(p.completed) == images,
        "the provider completed " + std::to_string(p.completed) + " works, tollgate charged " + s(images));
  check(p.work_started == p.completed + p.failed + p.running, "provider counters disagree");
  check(images <= o.credits, "more images charged than credits bought");
}

// The purchase (credited once under stripe:{session}, its redelivery replayed) and the jammed print's
// refund (one `refunded` event, the second send moved nothing): each mismatch a failure.
void check_purchase_and_refund(const DemoKioskOptions& o, const Purchase& p, const JammedPrint& j,
                               const ServerFigures& f, std::vector<std::string>& failures) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  };
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  check(p.outcome == "credited" && p.credits == o.credits,
        "the checkout's first delivery: " + p.outcome + " " + s(p.credits) + ", not credited " + s(o.credits));
  check(p.replay_outcome == "replayed", "the checkout delivered again: " + p.replay_outcome + ", not replayed");
  check(p.purchased_after_replay == o.credits,
        "purchased " + s(p.purchased_after_replay) + " after both deliveries, not " + s(o.credits));
  check(f.purchased == o.credits, "purchased " + s(f.purchased) + " != the " + s(o.credits) + " credits bought at Stripe");
  check(f.credit_events == 1 && f.credited_amount == o.credits && f.credit_references == std::vector{p.reference},
        s(f.credit_events) + " credited events (" + s(f.credited_amount) + " credits), not one of " + s(o.credits) +
            " under " + p.reference);
  if (j.job.empty()) {
    check(f.refund_events == 0, s(f.refund_events) + " refunds, none was made");
    return;
  }
  check(j.refunded == 1 && j.refunded_after_resend == 1,
        "the jammed print's refunded_amount: " + s(j.refunded) + ", then " + s(j.refunded_after_resend) + ", not 1 and 1");
  check(j.used_after == j.used_before - 1 && j.used_after_resend == j.used_after,
        "used around the refund: " + s(j.used_before) + " -> " + s(j.used_after) + " -> " + s(j.used_after_resend));
  check(f.refund_events == 1 && f.refunded_amount == 1 && f.refund_references == std::vector<std::string>{kJamRequestId} &&
            f.refund_jobs == std::vector{j.job},
        s(f.refund_events) + " refunded events (" + s(f.refunded_amount) + " credits), not one of 1 for " + j.job +
            " under " + kJamRequestId);
}

// What the owner was told by webhook, on one line of the summary.
void print_owner_line(const DemoReport& r) {
  std::string told;
  for (const OwnerNotice& n : r.owner_notices) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s (%s) at %.1f s, %lld left", told.empty() ? "" : "; ", n.type.c_str(),
                  OwnerInbox::meaning(n.type), n.at_s, static_cast<long long>(n.available_after));
    told += buf;
  }
  std::printf("  owner told by webhook (threshold %lld; each signature verified with webhooks::verify): %s%s\n",
              static_cast<long long>(r.threshold), told.empty() ? "nothing" : told.c_str(),
              r.owner_repeats > 0 ? ("; " + std::to_string(r.owner_repeats) + " sent again after the restart, "
                                     "ignored by webhook-id").c_str() : "");
}

void print_summary(const DemoReport& r) {
  const DemoKioskOptions& o = r.options;
  const GuestTally& t = r.tally;
  const ServerFigures& f = r.figures;
  auto row = [](const char* what, const std::string& naive_v, const std::string& tollgate_v) {
    std::printf("  %-40s %18s %12s\n", what, naive_v.c_str(), tollgate_v.c_str());
  };
  auto s = [](std::int64_t v) { return std::to_string(v); };
  std::string crash_note = "; no crash";
  if (r.crash.crashed) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; server killed (SIGKILL) at %.1f s with %d jobs in flight, back %lld ms later",
                  static_cast<double>(r.crash.crash_ms) / 1000.0, r.crash.in_flight_at_crash,
                  static_cast<long long>(r.crash.restart_ms));
    crash_note = buf;
  }
  std::printf("\n%d guests, %d kiosks, one account of %lld credits bought at Stripe (credited once under %s, its "
              "redelivery %s); provider seed %llu%s\n",
              o.guests, o.kiosks, static_cast<long long>(o.credits), r.purchase.reference.c_str(),
              r.purchase.replay_outcome.c_str(), static_cast<unsigned long long>(o.seed), crash_note.c_str());
  std::printf("  %-40s %18s %12s\n", "", "textbook flow", "tollgate");
  row("guests who got an image", s(r.naive.images_delivered), s(t.images));
  row("credits charged", s(r.naive.charged), s(f.charged_amount));
  row("credits spent twice (double spends)", s(r.naive.double_spends), s(f.double_charges));
  row("works done, never paid (free generations)", s(r.naive.free_generations),
      s(static_cast<std::int64_t>(r.provider.completed) - t.images));
  row("lowest balance", s(r.naive.min_balance), s(r.min_available));
  row("credits frozen after the crash", s(r.naive.frozen_credits), s(f.reserved));
  row("credits given back (refund sent twice)", s(r.naive.refunded), s(f.refunded_amount));
  row("credits lost (purchased - a - r - u)", "-", s(f.lost_credits()));
  row("audit violations", "no audit", s(f.audit_violations));
  std::printf("  tollgate: %d failed jobs (released), %d guests turned away (sold out), %d re-sends after errors, "
              "%lld provider attempts, %lld jobs recovered after the restart; provider: %llu works, %llu completed, %llu lost answers, %llu late, %llu dropped\n",
              t.failed, t.refused, t.resends, static_cast<long long>(t.attempts_total), static_cast<long long>(f.recovered),
              static_cast<unsigned long long>(r.provider.work_started), static_cast<unsigned long long>(r.provider.completed),
              static_cast<unsigned long long>(r.provider.answers_lost), static_cast<unsigned long long>(r.provider.answers_late),
              static_cast<unsigned long long>(r.provider.never_received));
  std::printf("  double spends: credits charged beyond what the account had (kiosks passed the check on the same last "
              "credits); frozen: calls in flight at the crash whose marks nothing settles (tollgate: credits still "
              "reserved at the end)\n");
  std::printf("  textbook: reads the balance, calls, then subtracts; gives up after %lld ms; %lld calls, %lld refused; "
              "a refund adds the credit back each time it arrives (the jammed print's came twice)\n",
              static_cast<long long>(r.naive_timeout_ms), static_cast<long long>(r.naive.calls),
              static_cast<long long>(r.naive.refused));
  print_owner_line(r);
  if (r.ok()) {
    std::printf("checks: images charged == completed jobs == charge events == provider's completed works (%d); used == "
                "charged - refunded (%lld); purchased == the %lld credits bought, one credit under %s; %s; audit "
                "clean; nothing lost, nothing reserved, nothing charged twice. %.1f s\n",
                t.images, static_cast<long long>(f.used), static_cast<long long>(f.purchased),
                r.purchase.reference.c_str(),
                r.jam.job.empty() ? "no refund (no job completed)" : "one refunded event for the jammed print",
                r.total_seconds);
  } else {
    std::printf("CHECKS FAILED (server log and database kept in %s):\n", r.dir.c_str());
    for (const auto& failure : r.failures) std::printf("  - %s\n", failure.c_str());
  }
}

// The figures as one JSON object on one stdout line (--json).
void print_json_line(const DemoReport& r) {
  const DemoKioskOptions& o = r.options;
  const ServerFigures& f = r.figures;
  json::object j;
  j["credits"] = o.credits;
  j["kiosks"] = o.kiosks;
  j["guests"] = o.guests;
  j["seed"] = o.seed;
  j["crashed"] = r.crash.crashed;
  j["crash_at_ms"] = r.crash.crash_ms;
  j["in_flight_at_crash"] = r.crash.in_flight_at_crash;
  j["images_charged"] = r.tally.images;
  j["used"] = f.used;
  j["available"] = f.available;
  j["min_available_seen"] = r.min_available;
  j["reserved"] = f.reserved;
  j["purchased"] = f.purchased;
  j["jobs_failed"] = r.tally.failed;
  j["guests_refused"] = r.tally.refused;
  j["guests_unresolved"] = r.tally.unresolved;
  j["resends"] = r.tally.resends;
  j["charged"] = f.charged_amount;
  j["charge_events"] = f.charge_events;
  j["purchase_session"] = r.purchase.session;
  j["purchase_reference"] = r.purchase.reference;
  j["purchase_credits"] = r.purchase.credits;
  j["purchase_outcome"] = r.purchase.outcome;
  j["purchase_replay_outcome"] = r.purchase.replay_outcome;
  j["credit_events"] = f.credit_events;
  j["credited"] = f.credited_amount;
  j["refund_job"] = r.jam.job.empty() ? json::value(nullptr) : json::value(r.jam.job);
  j["refund_request_id"] = kJamRequestId;
  j["refunded"] = f.refunded_amount;
  j["refund_events"] = f.refund_events;
  j["refund_resend_moved"] = r.jam.job.empty() ? 0 : r.jam.used_after - r.jam.used_after_resend;
  j["jobs_recovered"] = f.recovered;
  j["provider_works_completed"] = r.provider.completed;
  j["provider_works_started"] = r.provider.work_started;
  j["provider_answers_lost"] = r.provider.answers_lost;
  j["provider_answers_late"] = r.provider.answers_late;
  j["provider_never_received"] = r.provider.never_received;
  j["audit_violations"] = f.audit_violations;
  j["accounts_checked"] = f.accounts_checked;
  j["lost_credits"] = f.lost_credits();
  j["double_charges"] = f.double_charges;
  j["naive_images"] = r.naive.images_delivered;
  j["naive_charged"] = r.naive.charged;
  j["naive_double_spends"] = r.naive.double_spends;
  j["naive_free_generations"] = r.naive.free_generations;
  j["naive_min_balance"] = r.naive.min_balance;
  j["naive_frozen_credits"] = r.naive.frozen_credits;
  j["naive_refused"] = r.naive.refused;
  j["naive_refunded"] = r.naive.refunded;
  j["elapsed_ms"] = static_cast<std::int64_t>(r.total_seconds * 1000);
  json::array notices;
  for (const OwnerNotice& n : r.owner_notices) notices.emplace_back(n.type);
  j["owner_notices"] = std::move(notices);
  j["owner_notice_events"] = r.figures.notice_events.size();
  j["owner_repeats"] = r.owner_repeats;
  j["owner_bad_signatures"] = r.owner_bad_signatures;
  j["low_balance_threshold"] = r.threshold;
  j["checks_passed"] = r.ok();
  json::array fl;
  for (const auto& failure : r.failures) fl.emplace_back(failure);
  j["failures"] = std::move(fl);
  std::printf("%s\n", json::serialize(j).c_str());
}

// Runs the kiosks (and the crash) until every guest was served; the report's crash part.
CrashReport serve_every_guest(const DemoKioskOptions& o, DemoSetup& s, std::vector<Guest>& guests, Shared& shared,
                              bool tty) {
  const auto arrived = Clock::now();
  s.owner->set_arrived(arrived, tty);
  shared.deadline = arrived + milliseconds(kDemoDeadlineMs);
  std::vector<std::thread> kiosks;
  for (int k = 0; k < o.kiosks; ++k) {
    kiosks.emplace_back([&, k] { run_kiosk(k + 1, s.server->url(), s.kiosk_key, guests, shared); });
  }
  ProgressState state;
  std::thread progress([&] { show_progress(s.admin_options, shared, state, o.guests, arrived, tty); });
  CrashReport crash;
  if (o.crash) crash = crash_and_restart(o, *s.server, shared, state, arrived, tty);
  for (auto& t : kiosks) t.join();
  if (crash.crashed && !crash.restart_failed) state.server_state = "up (restarted)";
  state.kiosks_done = true;
  progress.join();
  if (tty) {
    const double run_seconds = std::chrono::duration<double>(Clock::now() - arrived).count();
    std::fprintf(stderr, "\r\033[K%s\n", progress_line(shared, o.guests, run_seconds, state.server_state.load()).c_str());
  }
  return crash;
}

// Waits (at most kOwnerWaitMs) until the owner was told of every balance notice the account's events
// show: after a SIGKILL the restarted server delivers only once the killed one's delivery lease has
// lapsed (limits::kWebhookDeliveryLockTtlMs). Each notice never told is a failure.
constexpr std::int64_t kOwnerWaitMs = limits::kWebhookDeliveryLockTtlMs + 3 * limits::kWebhookDeliveryLockRenewMs;
void wait_for_owner(const OwnerInbox& owner, const ServerFigures& f, bool tty, std::vector<std::string>& failures) {
  auto missing = [&] {
    return std::count_if(f.notice_events.begin(), f.notice_events.end(),
                         [&](std::int64_t id) { return !owner.has_event(id); });
  };
  const auto deadline = Clock::now() + milliseconds(kOwnerWaitMs);
  bool said = false;
  while (missing() > 0 && Clock::now() < deadline) {
    if (!said) {
      std::fprintf(stderr, "%swaiting for the owner's webhooks (%lld of %zu told): after the SIGKILL the restarted "
                   "server delivers once the killed one's delivery lease lapses (<= %lld s)\n",
                   tty ? "\r\033[K" : "", static_cast<long long>(f.notice_events.size() - missing()),
                   f.notice_events.size(), static_cast<long long>(limits::kWebhookDeliveryLockTtlMs / 1000));
      said = true;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  for (std::int64_t id : f.notice_events) {
    if (!owner.has_event(id)) failures.push_back("the owner was never told of balance notice event " + std::to_string(id));
  }
  if (owner.bad_signatures() != 0) {
    failures.push_back(std::to_string(owner.bad_signatures()) + " webhook deliveries did not verify");
  }
  if (owner.notices().size() != f.notice_events.size()) {
    failures.push_back("the owner was told " + std::to_string(owner.notices().size()) + " notices, the account has " +
                       std::to_string(f.notice_events.size()));
  }
}

}  // namespace

int run_demo_kiosk(const DemoKioskOptions& o) {
  const auto started = Clock::now();
  if (o.kiosks < 1 || o.guests < 1 || o.credits < 1) {
    std::fprintf(stderr, "tollgate: demo kiosk: --kiosks, --guests and --credits must be at least 1\n");
    return 2;
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  DemoSetup s;
  if (const int code = set_up_demo(o, s); code != 0) return code;
  print_banner(o, s);

  Shared shared;
  shared.credits_left = o.credits;
  shared.min_available = o.credits;
  std::vector<Guest> guests(static_cast<std::size_t>(o.guests));
  for (int g = 0; g < o.guests; ++g) guests[static_cast<std::size_t>(g)].id = demo_guest_id(o, g);
  DemoReport r{o, s.dir, s.purchase, {}, {}, {}, {}, {}, {}, 0, 0, {}, 0};
  r.crash = serve_every_guest(o, s, guests, shared, tty);
  r.jam = refund_jammed_print(*s.admin, guests, r.failures);

  // Check tollgate's figures, then run the textbook flow on the same arrivals.
  r.tally = tally_guests(guests, r.failures);
  if (r.tally.unresolved != 0) r.failures.push_back(std::to_string(r.tally.unresolved) + " guests never learned how their job ended");
  if (r.crash.restart_failed) r.failures.push_back("the server did not come back after the crash");
  r.provider = compare_with_provider(*s.provider, guests, r.failures);
  r.figures = read_server_figures(*s.admin, r.failures);
  check_figures(o, r.tally, r.figures, r.provider, r.failures);
  check_purchase_and_refund(o, s.purchase, r.jam, r.figures, r.failures);
  wait_for_owner(*s.owner, r.figures, tty, r.failures);
  r.owner_notices = s.owner->notices();
  r.owner_repeats = s.owner->repeats();
  r.owner_bad_signatures = s.owner->bad_signatures();
  r.threshold = s.low_balance_threshold;
  r.naive_timeout_ms = scaled(kNaiveClientTimeoutMs, o.time_scale);
  r.naive = simulate_naive(o, r.naive_timeout_ms, 500);
  r.min_available = std::min(shared.min_available.load(), r.figures.available);
  r.total_seconds = std::chrono::duration<double>(Clock::now() - started).count();

  print_summary(r);
  if (o.json) print_json_line(r);
  std::fflush(stdout);

  s.server->kill_now(SIGTERM);
  s.provider->stop();
  if (r.ok() && !o.keep) {
    std::error_code ec;
    std::filesystem::remove_all(s.dir, ec);
  } else if (o.keep) {
    std::fprintf(stderr, "kept: %s (tollgate.db, tollgate.toml, server.log)\n", s.dir.c_str());
  }
  return r.ok() ? 0 : 1;
}

void add_demo_command(CLI::App& app, int& exit_code) {
  auto* demo = app.add_subcommand("demo", "end-to-end demonstrations");
  demo->require_subcommand(1);
  auto o = std::make_shared<DemoKioskOptions>();
  auto* kiosk = demo->add_subcommand(
      "kiosk",
      "N kiosks share one account bought at Stripe; the server is killed mid-run; a jammed print is refunded; tollgate "
      "against the textbook flow");
  kiosk->add_option("--kiosks", o->kiosks, "kiosks sharing the account")->default_str("8")->check(CLI::Range(1, 256));
  kiosk->add_option("--credits", o->credits, "credits bought (a Stripe checkout of a pack of that size)")->default_str("20")->check(CLI::Range(1, 100000));
  kiosk->add_option("--guests", o->guests, "guests arriving at once")->default_str("40")->check(CLI::Range(1, 5000));
  kiosk->add_option("--seed", o->seed, "the provider's seed: what happens to each guest's generation")->default_str("42");
  kiosk->add_option("--time-scale", o->time_scale, "provider time is divided by this (15-25 s become 600-1000 ms)")
      ->default_str("25")
      ->check(CLI::Range(1.0, 1000.0));
  kiosk->add_flag("--keep", o->keep, "keep the temporary folder: the database, the configuration and the server's log");
  kiosk->add_flag("--json", o->json, "last stdout line: the figures as one JSON object");
  kiosk->add_flag("--no-crash", [o](std::int64_t) { o->crash = false; }, "do not kill the server in the middle");
  kiosk->callback([o, &exit_code] { exit_code = run_demo_kiosk(*o); });
}

}  // namespace tollgate::app
