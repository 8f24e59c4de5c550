// tollgate bench: payments — signed Stripe payment events per second through the whole route
// (issue 29): POST /v1/payments/stripe with a Stripe-Signature, against the same ledger write made
// by an admin's POST /v1/accounts/{id}/credits, in one run against one real `tollgate serve`.
//
// The server: `tollgate serve --config FILE` (tests/support/server_process.h starts it) whose file
// holds `[payments.stripe] signing_secrets = ["whsec_…"]` (a secret made per run) and nothing else:
// the default tolerance (300 s), durability as shipped (SQLite synchronous=FULL, PostgreSQL
// synchronous_commit=on). SQLite by default (a file in --dir, on a real disk under /var/tmp);
// --database postgresql://… runs it on a fresh schema of that server (dropped afterwards).
//
// The client: --connections keep-alive HTTP/1.1 connections (default 16) driven asynchronously by
// --client-threads threads (Boost.Beast; default 1), each sending its next request as soon as the
// last one is answered. Every request is built and signed BEFORE its window starts, so the window
// measures the server: the client only writes bytes and reads answers. The accounts (--accounts,
// default 100: "spread"; 1 is the hot account — --accounts 100,1 runs both) are created first; the
// i-th request of a window goes to account i mod A.
//
// Phases, for each accounts value and each round (--rounds, default 2), one after another: payments,
// replays, credits in odd rounds; credits, payments, replays in even ones (so that neither side is
// always measured later, on a larger database); the ratios compare the means over the rounds.
//   payments   each request a new checkout.session.completed (payment_status "paid", a new session
//              id, client_reference_id the account, metadata.tollgate_credits 1–5; the shape and
//              size of Stripe's event, ~2 KB), signed "t=<now>,v1=<hex HMAC-SHA256 of "{t}.{body}">"
//              (payments::stripe_signature) → 200 outcome "credited": one credit each.
//   replays    the sessions this round credited, delivered again (each re-signed with a fresh t, as
//              Stripe signs every delivery; cycled if the window outlasts them): the signature is
//              checked and the event parsed, and the ledger answers "replayed" → nothing credited.
//   credits    the baseline: POST /v1/accounts/{id}/credits {amount 1–5, a new reference} with the
//              admin key → 201: the same durable ledger write without the signature and the event.
// Each phase has a warm-up (--warmup, its own requests) and then a window of --seconds; the window's
// requests are built between the two: 3× the fastest rate seen for the phase × --seconds + 2000.
// Should a window use them up it ends there (noted "ran out"; the rate stays right). On PostgreSQL
// the bench runs ANALYZE on its schema's tables before each window (not timed), as autovacuum does
// on a running server: without it the store's prepared statements keep the plans made on the empty
// tables, and every replay's lookup by reference scans all events (docs/internals/benchmarks.md,
// "Stale plans"); --no-analyze measures that.
//
// Figures per phase: requests answered inside the window per second; p50/p99 of their latency (the
// request's first byte written → the whole answer read, on this process's steady clock); the
// server's CPU per request (utime + stime of the server process over the window, from
// /proc/PID/stat, 10 ms ticks, over the requests answered in it). Ratios per accounts value, of the
// means over the rounds: payments/credits, replays/credits, and the server CPU per request of
// payments over that of credits. Two shared cores run the server and this client: compare the
// ratios of one run, not the absolute numbers (the CPU ratio moves least with the machine's load).
//
// Checked after the windows, not timed (exit 1 when one fails, and on any answer but the one
// expected — every answer is checked, warm-ups included): every account's purchased is the sum of
// what its sessions and baseline credits bought, available == purchased; the change feed's
// `credited` events are exactly the expected references (stripe:{session} and the baseline's),
// each once, on its account, with its amount; GET /v1/transfers/stripe:{session} is that credit
// (every 64th session; all with --quick); GET /v1/audit has no violation; /metrics counts as many
// payments applied and replayed as answered, no refused signature, no refused event; the server
// stops cleanly (SIGTERM → exit 0).
//
// Output: a table, then as the LAST line one JSON object.
// Options: --seconds S (window per phase, default 3; at most 120, signatures stay fresh),
// --warmup S (0.5), --connections N (16), --client-threads N (1), --accounts LIST (100),
// --rounds N (2), --database URI (PostgreSQL), --no-analyze, --dir PATH (SQLite folder; default a
// new one under /var/tmp), --tollgate PATH (the server binary; default the build's), --keep (the
// folder, or the schema), --quick (CI smoke: 0.25 s windows, 0.1 s warm-ups, 8 connections,
// accounts 100,1, one round).
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "bench_pg.h"
#include "payments/signature.h"
#include "store/postgres/pg_conn.h"
#include "support/server_process.h"
#include "tollgate/client.h"

namespace tg = tollgate;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace json = boost::json;
using Steady = std::chrono::steady_clock;

namespace {

struct Args {
  double seconds = 3;
  double warmup = 0.5;
  int connections = 16;
  int client_threads = 1;
  std::vector<int> accounts{100};
  int rounds = 2;
  std::string database;
  std::string dir;
  std::string tollgate;
  bool keep = false;
  bool quick = false;
  bool analyze = true;  // PostgreSQL: ANALYZE before each window
};

// What die() and an exception that escapes undo (std::exit runs no destructor of main's locals):
// the server is killed, the schema dropped, the folder removed (see Setup).
std::function<void()> g_cleanup;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "payments_bench: %s\n", why.c_str());
  if (g_cleanup) std::exchange(g_cleanup, nullptr)();
  std::exit(1);
}

double percentile(std::vector<float>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(p * static_cast<double>(v.size()));
  return v[std::min(rank, v.size() - 1)];
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The server process's CPU time so far (all threads, user + system), in seconds; 0 if unreadable.
double process_cpu_s(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));  // from field 3 (state) on
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// --- what is sent ---------------------------------------------------------------------------------
enum class Phase { payments, replays, credits };

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::payments: return "payments";
    case Phase::replays: return "replays";
    case Phase::credits: return "credits";
  }
  return "";
}

// One credit the run expects: a payment's (reference stripe:{session}) or the baseline's.
struct Sale {
  std::string reference;
  std::string account;
  std::int64_t credits = 0;
};

// The requests of one window, ready on the wire, and what each must answer.
struct Pool {
  Phase phase = Phase::payments;
  std::vector<std::string> wire;  // whole HTTP/1.1 requests
  std::vector<Sale> sales;        // payments and credits: what wire[i] credits
  bool cycle = false;             // replays: sent round and round
};

// The server and what the requests carry.
struct Target {
  asio::ip::tcp::endpoint endpoint;
  std::string host;  // "127.0.0.1:PORT"
  std::string url;
  std::string admin_key;
  std::string secret;  // [payments.stripe] signing_secrets
  pid_t pid = -1;
};

// Stripe's checkout.session.completed as it sends it (the fields of its API version 2024-06-20 that
// a paid one-off checkout has), for `session` on `account`, buying `credits`.
std::string checkout_event(const std::string& event_id, const std::string& session, const std::string& account,
                           std::int64_t credits, std::int64_t created_s) {
  const std::string t = std::to_string(created_s);
  const std::string amount = std::to_string(credits * 100);
  return R"({"id":")" + event_id + R"(","object":"event","api_version":"2024-06-20","created":)" + t +
         R"(,"data":{"object":{"id":")" + session +
         R"(","object":"checkout.session","after_expiration":null,"allow_promotion_codes":null,"amount_subtotal":)" +
         amount + R"(,"amount_total":)" + amount +
         R"(,"automatic_tax":{"enabled":false,"liability":null,"status":null},"billing_address_collection":null,)"
         R"("cancel_url":"https://kiosk.example/cancel","client_reference_id":")" +
         account + R"(","client_secret":null,"consent":null,"consent_collection":null,"created":)" + t +
         R"(,"currency":"eur","currency_conversion":null,"custom_fields":[],"custom_text":{"after_submit":null,)"
         R"("shipping_address":null,"submit":null,"terms_of_service_acceptance":null},"customer":null,)"
         R"("customer_creation":"if_required","customer_details":{"address":{"city":null,"country":"NL","line1":null,)"
         R"("line2":null,"postal_code":null,"state":null},"email":"guest@kiosk.example","name":"A Guest","phone":null,)"
         R"("tax_exempt":"none","tax_ids":[]},"customer_email":null,"expires_at":)" +
         std::to_string(created_s + 86400) +
         R"(,"invoice":null,"invoice_creation":{"enabled":false,"invoice_data":{"account_tax_ids":null,)"
         R"("custom_fields":null,"description":null,"footer":null,"issuer":null,"metadata":{},)"
         R"("rendering_options":null}},)"
         R"("livemode":false,"locale":null,"metadata":{"tollgate_credits":")" +
         std::to_string(credits) + R"("},"mode":"payment","payment_intent":"pi_)" + session.substr(3) +
         R"(","payment_link":null,"payment_method_collection":"if_required","payment_method_options":{"card":)"
         R"({"request_three_d_secure":"automatic"}},"payment_method_types":["card"],"payment_status":"paid",)"
         R"("phone_number_collection":{"enabled":false},"recovered_from":null,"saved_payment_method_options":null,)"
         R"("setup_intent":null,"shipping_address_collection":null,"shipping_cost":null,"shipping_details":null,)"
         R"("shipping_options":[],"status":"complete","submit_type":"pay","subscription":null,)"
         R"("success_url":"https://kiosk.example/paid","total_details":{"amount_discount":0,"amount_shipping":0,)"
         R"("amount_tax":0},"ui_mode":"hosted","url":null}},"livemode":false,"pending_webhooks":1,)"
         R"("request":{"id":null,"idempotency_key":null},"type":"checkout.session.completed"})";
}

// POST /v1/payments/stripe with `body`, signed now as Stripe signs it.
std::string stripe_request(const Target& t, std::string_view body) {
  const std::int64_t now_s = unix_seconds();
  const std::string signature =
      "t=" + std::to_string(now_s) + ",v1=" + tg::payments::stripe_signature(t.secret, now_s, body);
  std::string wire = "POST /v1/payments/stripe HTTP/1.1\r\nHost: " + t.host +
                     "\r\nContent-Type: application/json; charset=utf-8\r\nStripe-Signature: " + signature +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  wire.append(body);
  return wire;
}

std::string_view body_of(std::string_view wire) { return wire.substr(wire.find("\r\n\r\n") + 4); }

std::string credit_request(const Target& t, const Sale& s) {
  const std::string body = R"({"amount":)" + std::to_string(s.credits) + R"(,"reference":")" + s.reference + R"("})";
  return "POST /v1/accounts/" + s.account + "/credits HTTP/1.1\r\nHost: " + t.host + "\r\nAuthorization: Bearer " +
         t.admin_key + "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// --- the load: asynchronous keep-alive connections ------------------------------------------------
// What the connections of one window share.
struct Window {
  const Pool* pool = nullptr;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> ran_out{false};
  std::atomic<int> finished{0};
};

// One connection: sends a request, reads its answer, checks it, sends the next, until the window
// stops (then its last answer is read before it finishes). One operation at a time: its handlers
// never run concurrently, whichever client thread runs them.
class Connection {
 public:
  Connection(asio::io_context& io, const asio::ip::tcp::endpoint& at, Window& w) : socket_(io), w_(w) {
    boost::system::error_code ec;
    socket_.connect(at, ec);
    if (!ec) socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    if (ec) failure = "connect: " + ec.message();
  }

  void start() {
    if (!failure.empty()) return finish();
    next();
  }

  std::int64_t measured = 0, answered = 0;
  std::vector<float> latency_us;  // of the answers inside the window
  std::string failure;

 private:
  void next() {
    if (w_.stop.load(std::memory_order_acquire)) return finish();
    std::size_t i = w_.next.fetch_add(1, std::memory_order_relaxed);
    if (w_.pool->cycle) {
      i %= w_.pool->wire.size();
    } else if (i >= w_.pool->wire.size()) {
      w_.ran_out.store(true, std::memory_order_release);
      return finish();
    }
    sent_ = Steady::now();
    asio::async_write(socket_, asio::buffer(w_.pool->wire[i]), [this](boost::system::error_code ec, std::size_t) {
      if (ec) return fail("write: " + ec.message());
      answer_ = {};
      bhttp::async_read(socket_, buffer_, answer_,
                        [this](boost::system::error_code ec2, std::size_t) { on_answer(ec2); });
    });
  }

  void on_answer(boost::system::error_code ec) {
    if (ec) return fail("read: " + ec.message());
    if (!expected(answer_)) {
      return fail(phase_name(w_.pool->phase) + std::string(": answered ") + std::to_string(answer_.result_int()) + " " +
                  answer_.body().substr(0, 300));
    }
    ++answered;
    if (!w_.stop.load(std::memory_order_acquire)) {
      ++measured;
      latency_us.push_back(std::chrono::duration<float, std::micro>(Steady::now() - sent_).count());
    }
    next();
  }

  bool expected(const bhttp::response<bhttp::string_body>& r) const {
    switch (w_.pool->phase) {
      case Phase::payments:
        return r.result_int() == 200 && r.body().find(R"("outcome":"credited")") != std::string::npos;
      case Phase::replays:
        return r.result_int() == 200 && r.body().find(R"("outcome":"replayed")") != std::string::npos;
      case Phase::credits: return r.result_int() == 201;
    }
    return false;
  }

  void fail(std::string why) {
    failure = std::move(why);
    finish();
  }
  void finish() { w_.finished.fetch_add(1, std::memory_order_acq_rel); }

  asio::ip::tcp::socket socket_;
  Window& w_;
  beast::flat_buffer buffer_;
  bhttp::response<bhttp::string_body> answer_;
  Steady::time_point sent_;
};

struct WindowResult {
  double window_s = 0, per_s = 0, p50_ms = 0, p99_ms = 0, server_cpu_us = 0;
  std::int64_t measured = 0, answered = 0;
  std::size_t sent = 0;  // requests taken from a pool that does not cycle: wire[0, sent) were all answered
  bool ran_out = false;
  std::string failure;
};

// Runs the pool's requests over fresh connections for `seconds` (or until it runs out).
WindowResult run_window(const Args& a, const Target& t, const Pool& pool, double seconds) {
  asio::io_context io;
  Window w;
  w.pool = &pool;
  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < a.connections; ++i) connections.push_back(std::make_unique<Connection>(io, t.endpoint, w));
  const double cpu0 = process_cpu_s(t.pid);
  const auto t0 = Steady::now();
  for (auto& c : connections) c->start();
  std::vector<std::thread> threads;
  for (int i = 0; i < a.client_threads; ++i) threads.emplace_back([&io] { io.run(); });
  const auto until = t0 + std::chrono::duration<double>(seconds);
  while (Steady::now() < until && !w.ran_out.load() && w.finished.load() < a.connections) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  w.stop.store(true, std::memory_order_release);
  const auto t1 = Steady::now();
  const double cpu1 = process_cpu_s(t.pid);
  for (auto& thread : threads) thread.join();

  WindowResult r;
  std::vector<float> latency;
  for (const auto& c : connections) {
    r.measured += c->measured;
    r.answered += c->answered;
    latency.insert(latency.end(), c->latency_us.begin(), c->latency_us.end());
    if (!c->failure.empty() && r.failure.empty()) r.failure = c->failure;
  }
  r.window_s = std::chrono::duration<double>(t1 - t0).count();
  r.per_s = static_cast<double>(r.measured) / r.window_s;
  r.p50_ms = percentile(latency, 0.50) / 1000.0;
  r.p99_ms = percentile(latency, 0.99) / 1000.0;
  r.server_cpu_us = r.measured > 0 ? (cpu1 - cpu0) * 1e6 / static_cast<double>(r.measured) : 0;
  r.sent = pool.cycle ? 0 : std::min(w.next.load(), pool.wire.size());
  r.ran_out = w.ran_out.load();
  return r;
}

// --- the run ----------------------------------------------------------------------------------------
// What the server must hold afterwards.
struct Book {
  std::unordered_map<std::string, Sale> by_reference;
  std::map<std::string, std::int64_t> purchased;  // by account
  std::vector<std::string> payment_references;    // in the order credited
  std::int64_t payments = 0, replays = 0, credits = 0;

  void add(const Pool& pool, std::size_t sent) {
    for (std::size_t i = 0; i < sent; ++i) {
      const Sale& s = pool.sales[i];
      by_reference.emplace(s.reference, s);
      purchased[s.account] += s.credits;
      if (pool.phase == Phase::payments) payment_references.push_back(s.reference);
    }
    (pool.phase == Phase::payments ? payments : credits) += static_cast<std::int64_t>(sent);
  }
};

struct Figure {
  int accounts = 0, round = 0;
  Phase phase = Phase::payments;
  WindowResult r;
};

struct Run {
  const Args& a;
  Target t;
  Book book;
  std::vector<Figure> figures;
  std::vector<std::string> failures;
  std::string tag;  // in every session id and reference of this run
  std::int64_t next_id = 0;
  std::size_t event_bytes = 0;
  double fastest_per_s[3] = {0, 0, 0};  // by Phase: sizes the windows' pools
  std::function<void()> analyze;        // PostgreSQL: before each window (see analyze_schema)
};

std::string account_id(int accounts, std::int64_t i) {
  return "acct-" + std::to_string(accounts) + "-" + std::to_string(i % accounts);
}

// `n` new checkout sessions on the `accounts` accounts, each signed now.
Pool payments_pool(Run& run, int accounts, std::size_t n) {
  Pool p;
  p.phase = Phase::payments;
  p.wire.reserve(n);
  p.sales.reserve(n);
  const std::int64_t created = unix_seconds();
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t i = run.next_id++;
    const std::string session = "cs_bench_" + run.tag + "_" + std::to_string(i);
    Sale s{"stripe:" + session, account_id(accounts, i), 1 + i % 5};
    const std::string body =
        checkout_event("evt_bench_" + run.tag + "_" + std::to_string(i), session, s.account, s.credits, created);
    run.event_bytes = body.size();
    p.wire.push_back(stripe_request(run.t, body));
    p.sales.push_back(std::move(s));
  }
  return p;
}

// `n` baseline credits on the `accounts` accounts, each a new reference.
Pool credits_pool(Run& run, int accounts, std::size_t n) {
  Pool p;
  p.phase = Phase::credits;
  p.wire.reserve(n);
  p.sales.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t i = run.next_id++;
    Sale s{"bench-credit-" + run.tag + "-" + std::to_string(i), account_id(accounts, i), 1 + i % 5};
    p.wire.push_back(credit_request(run.t, s));
    p.sales.push_back(std::move(s));
  }
  return p;
}

// The bodies of the sessions credited this round, each signed anew now.
Pool replays_pool(const Run& run, const std::vector<std::string>& bodies) {
  Pool p;
  p.phase = Phase::replays;
  p.cycle = true;
  p.wire.reserve(bodies.size());
  for (const std::string& body : bodies) p.wire.push_back(stripe_request(run.t, body));
  return p;
}

std::size_t warmup_size(const Args& a) { return static_cast<std::size_t>(std::max(500.0, 40'000 * a.warmup)); }

// Room for 3× the fastest rate seen for this phase (a warm-up starts cold and may be much slower).
std::size_t window_size(const Args& a, double per_s) {
  return static_cast<std::size_t>(std::min(4e6, 3 * per_s * a.seconds + 2000));
}

// A warm-up and then a window of `phase`; the window's figure is kept. `make(n)` builds a pool of n
// requests (replays: its size is fixed and it cycles). Returns the two pools and what each sent.
struct PhaseRun {
  Pool warm, window;
  std::size_t warm_sent = 0, window_sent = 0;
  std::int64_t answered = 0;  // warm-up and window, inside the window or after it
  bool ok = true;
};
template <typename Make>
PhaseRun run_phase(Run& run, int accounts, int round, Phase phase, Make make) {
  PhaseRun p;
  p.warm = make(warmup_size(run.a));
  const WindowResult warm = run_window(run.a, run.t, p.warm, run.a.warmup);
  p.warm_sent = warm.sent;
  p.answered = warm.answered;
  if (!warm.failure.empty()) {
    run.failures.push_back(std::string(phase_name(phase)) + " warm-up: " + warm.failure);
    p.ok = false;
    return p;
  }
  double& fastest = run.fastest_per_s[static_cast<int>(phase)];
  fastest = std::max(fastest, warm.per_s);
  p.window = make(window_size(run.a, fastest));
  if (run.analyze) run.analyze();
  const WindowResult r = run_window(run.a, run.t, p.window, run.a.seconds);
  p.window_sent = r.sent;
  p.answered += r.answered;
  fastest = std::max(fastest, r.per_s);
  if (!r.failure.empty()) {
    run.failures.push_back(std::string(phase_name(phase)) + ": " + r.failure);
    p.ok = false;
  }
  run.figures.push_back(Figure{accounts, round, phase, r});
  std::fprintf(stderr, "accounts %d, round %d, %s: %.0f/s, p50 %.2f ms, p99 %.2f ms%s\n", accounts, round,
               phase_name(phase), r.per_s, r.p50_ms, r.p99_ms, r.failure.empty() ? "" : " FAILED");
  return p;
}

// The baseline: credits on `accounts` accounts; false when a window failed.
bool run_credits(Run& run, int accounts, int round) {
  PhaseRun credit =
      run_phase(run, accounts, round, Phase::credits, [&](std::size_t n) { return credits_pool(run, accounts, n); });
  run.book.add(credit.warm, credit.warm_sent);
  run.book.add(credit.window, credit.window_sent);
  return credit.ok;
}

// Payments on `accounts` accounts, then the same sessions again (replays); false when a window failed.
bool run_payments(Run& run, int accounts, int round) {
  PhaseRun pay =
      run_phase(run, accounts, round, Phase::payments, [&](std::size_t n) { return payments_pool(run, accounts, n); });
  run.book.add(pay.warm, pay.warm_sent);
  run.book.add(pay.window, pay.window_sent);
  if (!pay.ok) return false;
  std::vector<std::string> bodies;
  bodies.reserve(pay.warm_sent + pay.window_sent);
  for (std::size_t i = 0; i < pay.warm_sent; ++i) bodies.emplace_back(body_of(pay.warm.wire[i]));
  for (std::size_t i = 0; i < pay.window_sent; ++i) bodies.emplace_back(body_of(pay.window.wire[i]));
  if (bodies.empty()) return false;
  pay = {};
  PhaseRun replay =
      run_phase(run, accounts, round, Phase::replays, [&](std::size_t) { return replays_pool(run, bodies); });
  run.book.replays += replay.answered;
  return replay.ok;
}

// One round: payments, replays, credits — in even rounds credits first, so that neither side is
// always measured later (on a larger database, in a later minute).
bool run_round(Run& run, int accounts, int round) {
  if (round % 2 == 0) return run_credits(run, accounts, round) && run_payments(run, accounts, round);
  return run_payments(run, accounts, round) && run_credits(run, accounts, round);
}

// --- the checks (not timed) -------------------------------------------------------------------------
std::int64_t int_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_int64() ? v->get_int64() : -1;
}

std::string string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

// Every account holds what it bought, all of it available; the first failure, or "".
std::string check_accounts(const Book& book, tg::client::Client& admin) {
  for (const auto& [account, bought] : book.purchased) {
    auto r = admin.get_account(account);
    if (!r.ok() || !r.json().is_object()) return "GET /v1/accounts/" + account + ": " + r.describe();
    const json::object& o = r.json().get_object();
    if (int_at(o, "purchased") != bought || int_at(o, "available") != bought) {
      return "account " + account + ": purchased " + std::to_string(int_at(o, "purchased")) + ", available " +
             std::to_string(int_at(o, "available")) + "; bought " + std::to_string(bought);
    }
  }
  return "";
}

// The change feed's `credited` events are the expected references, each once, as expected.
std::string check_feed(const Book& book, tg::client::Client& admin) {
  std::unordered_map<std::string, int> seen;
  std::int64_t after = 0;
  for (;;) {
    auto r = admin.feed(after, 1000);
    if (!r.ok() || !r.json().is_object()) return "GET /v1/events: " + r.describe();
    const json::object& page = r.json().get_object();
    const json::value* events = page.if_contains("events");
    if (events == nullptr || !events->is_array()) return "GET /v1/events: no events array";
    if (events->get_array().empty()) break;
    for (const json::value& e : events->get_array()) {
      const json::object& event = e.as_object();
      if (string_at(event, "type") != "credited") continue;
      const std::string reference = string_at(event, "reference");
      const auto it = book.by_reference.find(reference);
      if (it == book.by_reference.end()) return "a credit nobody asked for: " + reference;
      if (++seen[reference] > 1) return reference + " credited twice";
      if (string_at(event, "account_id") != it->second.account || int_at(event, "amount") != it->second.credits) {
        return reference + " credited " + std::to_string(int_at(event, "amount")) + " to " +
               string_at(event, "account_id") + ", not " + std::to_string(it->second.credits) + " to " +
               it->second.account;
      }
    }
    after = int_at(page, "next_after");
  }
  if (seen.size() != book.by_reference.size()) {
    for (const auto& [reference, sale] : book.by_reference) {
      if (!seen.count(reference)) {
        return std::to_string(book.by_reference.size() - seen.size()) + " answered credits not in the feed, e.g. " +
               reference;
      }
    }
  }
  return "";
}

// GET /v1/transfers/stripe:{session}: every `every`-th session's credit.
std::string check_transfers(const Book& book, tg::client::Client& admin, std::size_t every) {
  for (std::size_t i = 0; i < book.payment_references.size(); i += every) {
    const std::string& reference = book.payment_references[i];
    const auto expected = book.by_reference.find(reference);
    if (expected == book.by_reference.end()) return reference + " was answered credited but is not in the book";
    const Sale& sale = expected->second;
    auto r = admin.get_transfer(reference);
    if (!r.ok() || !r.json().is_object()) return "GET /v1/transfers/" + reference + ": " + r.describe();
    const json::object& o = r.json().get_object();
    if (string_at(o, "kind") != "credit" || string_at(o, "account_id") != sale.account ||
        int_at(o, "amount") != sale.credits) {
      return "GET /v1/transfers/" + reference + " answered " + json::serialize(o);
    }
  }
  return "";
}

// One series' value in a /metrics text (0 when absent).
double series_value(const std::string& text, const std::string& series) {
  std::size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::atof(text.c_str() + at + series.size() + 1);
    at += series.size();
  }
  return 0;
}

// The server's own counters agree with the answers.
std::string check_metrics(const Book& book, tg::client::Client& admin) {
  auto r = admin.call("GET", "/metrics", nullptr);
  if (!r.ok() || !r.json().is_string()) return "GET /metrics: " + r.describe();
  const std::string text(r.json().get_string());
  const std::string events = "tollgate_payment_events_total";
  const struct {
    std::string series;
    std::int64_t expected;
  } expected[] = {
      {events + R"({type="payment",outcome="applied"})", book.payments},
      {events + R"({type="payment",outcome="replayed"})", book.replays},
      {events + R"({type="any",outcome="refused"})", 0},
      {R"(tollgate_payment_signature_failures_total{provider="stripe"})", 0},
  };
  for (const auto& e : expected) {
    const double got = series_value(text, e.series);
    if (got != static_cast<double>(e.expected)) {
      return e.series + " is " + std::to_string(got) + ", answered " + std::to_string(e.expected);
    }
  }
  return "";
}

std::string check_audit(tg::client::Client& admin) {
  auto r = admin.audit();
  if (!r.ok() || !r.json().is_object()) return "GET /v1/audit: " + r.describe();
  const json::value* v = r.json().get_object().if_contains("violations");
  if (v == nullptr || !v->is_array() || !v->get_array().empty()) return "audit: " + json::serialize(r.json());
  return "";
}

void check_run(Run& run, tg::client::Client& admin) {
  const std::size_t every = run.a.quick ? 1 : 64;
  for (const std::string& failure :
       {check_accounts(run.book, admin), check_feed(run.book, admin), check_transfers(run.book, admin, every),
        check_metrics(run.book, admin), check_audit(admin)}) {
    if (!failure.empty()) run.failures.push_back(failure);
  }
}

// --- output -------------------------------------------------------------------------------------------
// The mean figures of one phase over the rounds of one accounts value.
struct Mean {
  double per_s = 0, p50_ms = 0, p99_ms = 0, server_cpu_us = 0;
};
Mean mean_of(const Run& run, int accounts, Phase phase) {
  Mean m;
  int n = 0;
  for (const Figure& f : run.figures) {
    if (f.accounts != accounts || f.phase != phase) continue;
    m.per_s += f.r.per_s;
    m.p50_ms += f.r.p50_ms;
    m.p99_ms += f.r.p99_ms;
    m.server_cpu_us += f.r.server_cpu_us;
    ++n;
  }
  if (n > 0) m = Mean{m.per_s / n, m.p50_ms / n, m.p99_ms / n, m.server_cpu_us / n};
  return m;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

void print_table(const Run& run, const std::string& store, const std::string& load_before,
                 const std::string& load_after) {
  const Args& a = run.a;
  std::printf(
      "payments bench: tollgate serve on %s, %d keep-alive connections, %d client thread(s), %g s windows "
      "(%g s warm-ups), %d round(s); event body %zu bytes; load %s before, %s after\n",
      store.c_str(), a.connections, a.client_threads, a.seconds, a.warmup, a.rounds, run.event_bytes,
      load_before.c_str(), load_after.c_str());
  std::printf("%8s %5s %-9s %11s %8s %8s %10s %14s %s\n", "accounts", "round", "phase", "requests/s", "p50 ms",
              "p99 ms", "answered", "server µs/req", "note");
  for (const Figure& f : run.figures) {
    std::printf("%8d %5d %-9s %11.0f %8.2f %8.2f %10lld %14.1f %s\n", f.accounts, f.round, phase_name(f.phase),
                f.r.per_s, f.r.p50_ms, f.r.p99_ms, static_cast<long long>(f.r.measured), f.r.server_cpu_us,
                f.r.ran_out ? "ran out of pre-built requests: window ended early" : "");
  }
  for (int accounts : a.accounts) {
    const Mean pay = mean_of(run, accounts, Phase::payments), replay = mean_of(run, accounts, Phase::replays),
               credit = mean_of(run, accounts, Phase::credits);
    std::printf(
        "accounts %d: payments / credits %.2f, replays / credits %.2f, replays / payments %.2f; "
        "server CPU per request payments / credits %.2f\n",
        accounts, ratio(pay.per_s, credit.per_s), ratio(replay.per_s, credit.per_s), ratio(replay.per_s, pay.per_s),
        ratio(pay.server_cpu_us, credit.server_cpu_us));
  }
  std::printf("checks: %s\n", run.failures.empty() ? "ok" : ("FAILED: " + run.failures.front()).c_str());
}

std::string json_of(const Mean& m) {
  char buf[160];
  std::snprintf(buf, sizeof buf, R"({"per_s":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"server_cpu_us":%.1f})", m.per_s,
                m.p50_ms, m.p99_ms, m.server_cpu_us);
  return buf;
}

void print_json(const Run& run, const std::string& store) {
  const Args& a = run.a;
  std::string by_accounts;
  for (int accounts : a.accounts) {
    const Mean pay = mean_of(run, accounts, Phase::payments), replay = mean_of(run, accounts, Phase::replays),
               credit = mean_of(run, accounts, Phase::credits);
    char ratios[200];
    std::snprintf(ratios, sizeof ratios,
                  R"("payments_to_credits":%.3f,"replays_to_credits":%.3f,"server_cpu_payments_to_credits":%.3f)",
                  ratio(pay.per_s, credit.per_s), ratio(replay.per_s, credit.per_s),
                  ratio(pay.server_cpu_us, credit.server_cpu_us));
    by_accounts += (by_accounts.empty() ? "" : ",") + std::string("\"") + std::to_string(accounts) +
                   R"(":{"payments":)" + json_of(pay) + R"(,"replays":)" + json_of(replay) + R"(,"credits":)" +
                   json_of(credit) + "," + ratios + "}";
  }
  const int first = a.accounts.front();
  const Mean pay = mean_of(run, first, Phase::payments), replay = mean_of(run, first, Phase::replays),
             credit = mean_of(run, first, Phase::credits);
  std::printf(R"({"bench":"payments","store":"%s","connections":%d,"client_threads":%d,"seconds":%.2f,"rounds":%d,)"
              R"("accounts":%d,"event_bytes":%zu,"credited_per_s":%.1f,"replays_per_s":%.1f,"credits_per_s":%.1f,)"
              R"("payments_to_credits":%.3f,"replays_to_credits":%.3f,"server_cpu_payments_to_credits":%.3f,)"
              R"("payments_p50_ms":%.3f,"payments_p99_ms":%.3f,)"
              R"("payments_credited":%lld,"replays_answered":%lld,"baseline_credits":%lld,"by_accounts":{%s},"ok":%s})"
              "\n",
              store.c_str(), a.connections, a.client_threads, a.seconds, a.rounds, first, run.event_bytes, pay.per_s,
              replay.per_s, credit.per_s, ratio(pay.per_s, credit.per_s), ratio(replay.per_s, credit.per_s),
              ratio(pay.server_cpu_us, credit.server_cpu_us), pay.p50_ms, pay.p99_ms,
              static_cast<long long>(run.book.payments), static_cast<long long>(run.book.replays),
              static_cast<long long>(run.book.credits), by_accounts.c_str(), run.failures.empty() ? "true" : "false");
}

// --- options --------------------------------------------------------------------------------------------
std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const auto comma = s.find(',', at);
    out.push_back(std::stoi(s.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

void usage() {
  std::printf(
      "usage: payments_bench [--seconds S] [--warmup S] [--connections N] [--client-threads N] [--accounts 100,1]\n"
      "                      [--rounds N] [--database URI] [--no-analyze] [--dir PATH] [--tollgate PATH] [--keep]\n"
      "                      [--quick]\n"
      "what each figure means and what is checked: the top of bench/payments_bench.cc\n");
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--seconds")
      a.seconds = std::stod(next());
    else if (arg == "--warmup")
      a.warmup = std::stod(next());
    else if (arg == "--connections")
      a.connections = std::stoi(next());
    else if (arg == "--client-threads")
      a.client_threads = std::stoi(next());
    else if (arg == "--accounts")
      a.accounts = parse_list(next());
    else if (arg == "--rounds")
      a.rounds = std::stoi(next());
    else if (arg == "--database")
      a.database = next();
    else if (arg == "--dir")
      a.dir = next();
    else if (arg == "--tollgate")
      a.tollgate = next();
    else if (arg == "--keep")
      a.keep = true;
    else if (arg == "--no-analyze")
      a.analyze = false;
    else if (arg == "--quick") {
      a.quick = true;
      a.seconds = 0.25;
      a.warmup = 0.1;
      a.connections = 8;
      a.accounts = {100, 1};
      a.rounds = 1;
    } else if (arg == "-h" || arg == "--help") {
      usage();
      std::exit(0);
    } else {
      die("unknown option " + arg + " (see the top of bench/payments_bench.cc)");
    }
  }
  // Signatures are made before their windows and must stay within the server's 300-s tolerance.
  if (a.seconds <= 0 || a.seconds > 120 || a.warmup <= 0 || a.warmup > 10) die("--seconds: 0-120, --warmup: 0-10");
  if (a.connections < 1 || a.connections > 1000 || a.client_threads < 1 || a.client_threads > 16 || a.rounds < 1) {
    die("--connections: 1-1000, --client-threads: 1-16, --rounds: at least 1");
  }
  for (int n : a.accounts) {
    if (n < 1 || n > 100'000) die("--accounts: each 1-100000");
  }
  return a;
}

// PostgreSQL: ANALYZE the tables of the schema `uri` reaches (only its own), as autovacuum does on a
// running server. Without it the store's prepared statements keep the plans made on the empty
// tables: GET-by-reference of a replay then hash-joins a sequential scan of all events
// (benchmarks.md, "Stale plans"). --no-analyze shows that.
void analyze_schema(const std::string& uri) {
  auto conn = tg::pg::Conn::connect(uri, tg::pg::ConnectOptions{});
  const tg::pg::Rows tables =
      conn->exec("SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables WHERE schemaname = current_schema()");
  conn->exec("ANALYZE " + tables.text(0, 0));
}

// --- the server ---------------------------------------------------------------------------------------------
// `tollgate serve --config DIR/tollgate.toml` on `database`, the payment route configured.
std::unique_ptr<tg::testing::ServerProcess> start_server(const Args& a, const std::string& database,
                                                         const std::string& secret) {
  const std::string config = a.dir + "/tollgate.toml";
  {
    std::ofstream toml(config);
    toml << "# payments_bench: only the payment route is configured; everything else is the default\n"
         << "[payments.stripe]\n"
         << "signing_secrets = [\"" << secret << "\"]\n";
    if (!toml.flush()) die("cannot write " + config);
  }
  tg::testing::ServerOptions so;
  so.binary = a.tollgate;
  so.database = database;
  so.admin_key = tg::client::Client::new_request_id("bench-admin-");
  so.extra_args = {"--config", config};
  try {
    return std::make_unique<tg::testing::ServerProcess>(so);
  } catch (const std::exception& e) {
    die(std::string("tollgate serve: ") + e.what());
  }
}

// The requests' target: the server's address, port, admin key and pid.
void aim_at(Target& t, const tg::testing::ServerProcess& server) {
  t.endpoint = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port());
  t.host = "127.0.0.1:" + std::to_string(server.port());
  t.url = server.url();
  t.admin_key = server.admin_key();
  t.pid = server.pid();
}

void create_accounts(const Args& a, tg::client::Client& admin) {
  for (int accounts : a.accounts) {
    for (int i = 0; i < accounts; ++i) {
      auto r = admin.create_account({account_id(accounts, i), std::nullopt, std::nullopt});
      if (!r.ok()) die("create account " + account_id(accounts, i) + ": " + r.describe());
    }
  }
}

}  // namespace

// Where the server runs and what it leaves: the folder (the configuration, the SQLite file), the
// PostgreSQL schema, the server process. cleanup() undoes them (once), whichever way the run ends.
struct Setup {
  Args& a;
  bool made_dir = false;
  std::optional<tg::bench::BenchSchema> schema;
  std::string database, store = "SQLite";
  std::unique_ptr<tg::testing::ServerProcess> server;

  explicit Setup(Args& args) : a(args) {
    if (a.dir.empty()) {
      char tmpl[] = "/var/tmp/tollgate-payments-bench.XXXXXX";
      if (!mkdtemp(tmpl)) die("mkdtemp");
      a.dir = tmpl;
      made_dir = true;
    }
    g_cleanup = [this] { cleanup(); };
    database = "sqlite:" + a.dir + "/payments.db";
    if (a.database.empty()) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(a.dir + "/payments.db" + suffix);
      return;
    }
    try {
      schema.emplace(a.database, "payments_bench_" + std::to_string(getpid()), a.keep);
    } catch (const std::exception& e) {
      die(std::string("create schema: ") + e.what());
    }
    database = schema->uri();
    store = "PostgreSQL " + tg::bench::redact_uri(a.database);
  }

  void cleanup() {
    g_cleanup = nullptr;
    if (server && server->running()) server->stop(SIGKILL);
    server.reset();
    schema.reset();
    if (made_dir && !a.keep) std::filesystem::remove_all(a.dir);
    if (a.keep) std::fprintf(stderr, "payments_bench: kept %s\n", a.dir.c_str());
  }
};

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  Setup setup(a);
  std::set_terminate([] {
    if (g_cleanup) std::exchange(g_cleanup, nullptr)();
    std::abort();
  });
  Run run{a, {}, {}, {}, {}, tg::client::Client::new_request_id("").substr(0, 8), 0, 0};
  run.t.secret = tg::client::Client::new_request_id("whsec_bench_");
  setup.server = start_server(a, setup.database, run.t.secret);
  tg::testing::ServerProcess& server = *setup.server;
  aim_at(run.t, server);
  tg::client::Options co;
  co.base_url = run.t.url;
  co.key = run.t.admin_key;
  co.request_timeout = std::chrono::seconds(60);
  tg::client::Client admin(co);
  create_accounts(a, admin);
  if (setup.schema && a.analyze) {
    run.analyze = [&run, uri = setup.schema->uri()] {
      try {
        analyze_schema(uri);
      } catch (const std::exception& e) {
        run.failures.push_back(std::string("ANALYZE: ") + e.what());
      }
    };
  }

  const std::string load_before = load_average();
  bool windows_ok = true;
  for (std::size_t i = 0; i < a.accounts.size() && windows_ok; ++i) {
    for (int round = 1; round <= a.rounds && windows_ok; ++round) windows_ok = run_round(run, a.accounts[i], round);
  }
  const std::string load_after = load_average();
  if (windows_ok) check_run(run, admin);  // after a failed window the book is not exact
  if (const int code = server.stop(SIGTERM); code != 0) {
    run.failures.push_back("tollgate serve exited with " + std::to_string(code) + " on SIGTERM");
  }
  if (!run.failures.empty()) {
    const std::string log = server.log();
    std::fprintf(stderr, "payments_bench: FAILED: %s\nthe end of the server's log:\n%s\n", run.failures.front().c_str(),
                 log.substr(log.size() > 4000 ? log.size() - 4000 : 0).c_str());
  }
  setup.cleanup();

  print_table(run, setup.store, load_before, load_after);
  print_json(run, a.database.empty() ? "sqlite" : "postgres");
  return run.failures.empty() ? 0 : 1;
}
