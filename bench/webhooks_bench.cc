// tollgate bench: webhooks — how fast the deliverer sends the change feed to a local receiver while
// the ledger runs its hot workload, how soon an event reaches the receiver, and what delivering
// costs the ledger (issue 28). In-process: a store (SQLite, or PostgreSQL with --database) + Ledger
// + webhooks::DeliveryWorker (as `tollgate serve` wires it: http::webhook_body, the default limits)
// + demo::WebhookReceiver (a Beast server answering 200 at once, on its own I/O thread).
//
// A cell: a fresh database, the hot account funded, E endpoints registered (every event type, every
// account; endpoint i at the receiver's /c{cell}/e{i}), the deliverer started (in every cell, also
// with E = 0, as serve runs it), then --callers asynchronous callers loop the ledger bench's hot
// lifecycle (Ledger::submit reserve(1) → commit, a chain of callbacks; ledger_bench.cc) through a
// warm-up and a window. Each lifecycle writes two events (reserved, committed), so E endpoints are
// owed 2·E deliveries per lifecycle. Cells run interleaved: for each round, E = each of --endpoints
// (default 0,1,10, two rounds: 0,1,10,0,1,10), so the ratios compare cells of the same minute.
//
// Figures per cell:
//   lifecycles/s          completed inside the window; "ratio" is the cell's rate over the mean rate
//                         of the E = 0 cells of the run
//   deliveries/s          requests the receiver answered inside the window (all endpoints)
//   owed/s                2 · E · lifecycles/s: what keeping up would take
//   backlog               at the window's end: events after each endpoint's delivery cursor (the
//                         feed's head − cursor; the mean over endpoints)
//   drain s               after the callers stopped, until every cursor reached the head (capped by
//                         --drain-seconds; "-" when not reached)
//   latency p50/p99 ms    of the committed events whose commit was answered inside the window: from
//                         the moment the ledger's callback answered the commit (the caller learns it
//                         is durable) to the moment the receiver had read the whole request, first
//                         receipt per endpoint — both on this process's steady clock. (The event's
//                         `at` is the store's millisecond clock, taken before the durable flush: it
//                         would add the flush and lose the sub-millisecond part.) Events still
//                         undelivered when the drain ends are not in the percentiles: see "backlog".
//   dup/refused           requests for an event the endpoint had already received (at least once
//                         allows them; each is wasted work) / rounds whose record the ledger refused
//
// Checked (exit 1 when one fails): audit clean, used == every lifecycle completed, nothing reserved;
// for each endpoint, every event of the feed up to its final delivery cursor was received at least
// once (ids read back from the feed); every 32nd delivery's signature (all with --quick) verifies
// with webhooks::verify and the endpoint's secret; no answer other than 200 was recorded (the
// deliverer's stats: nothing retrying or failed); nothing sent twice, no record refused.
//
// Output: a table, then as the LAST line one JSON object.
// Options: --seconds S (window, default 3), --warmup S (0.5), --callers K (64), --endpoints LIST
// (0,1,10), --rounds N (2), --drain-seconds S (30), --receiver-threads N (1), --dir PATH (SQLite
// files; default a new folder under /var/tmp), --database URI (PostgreSQL: a fresh schema per cell),
// --keep, --quick (CI smoke: 0.3 s windows, 0.1 s warm-up, 8 callers, endpoints 0,1,3, one round).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bench_pg.h"
#include "core/clock.h"
#include "demo/webhook_receiver.h"
#include "http/json_codec.h"
#include "ledger/ledger.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"
#include "webhooks/delivery_worker.h"
#include "webhooks/signature.h"
#include "webhooks/webhook_batch.h"

namespace tg = tollgate;
using Steady = std::chrono::steady_clock;

namespace {

struct Args {
  double seconds = 3;
  double warmup = 0.5;
  int callers = 64;
  std::vector<int> endpoints{0, 1, 10};
  int rounds = 2;
  double drain_seconds = 30;
  int receiver_threads = 1;
  std::string dir;
  std::string database;
  bool keep = false;
  bool quick = false;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "webhooks_bench: %s\n", why.c_str());
  std::exit(1);
}

std::int64_t ns_of(Steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::uint64_t hash_of(std::string_view s) { return std::hash<std::string_view>{}(s); }

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(p * static_cast<double>(v.size()));
  return v[std::min(rank, v.size() - 1)];
}

// --- what the receiver saw ----------------------------------------------------------------------
struct Receipt {
  std::int64_t event_id = 0;
  std::uint64_t hold_hash = 0;  // of the committed event's hold_id; 0 for other types
  std::int64_t at_ns = 0;
};

// The receipts of the running cell, per endpoint. The receiver's hook appends (its I/O thread);
// the main thread begins and reads a cell while no delivery runs.
class Recorder {
 public:
  void begin(int cell, std::vector<std::string> secrets, bool verify_all) {
    std::lock_guard lock(mu_);
    cell_ = cell;
    secrets_ = std::move(secrets);
    receipts_.assign(secrets_.size(), {});
    verify_all_ = verify_all;
    received_ = 0;
    bad_signatures_ = 0;
    verified_ = 0;
    strays_ = 0;
  }

  void on_request(tg::demo::ReceivedWebhook&& r) {
    // /c{cell}/e{i}
    int cell = -1, endpoint = -1;
    if (std::sscanf(r.target.c_str(), "/c%d/e%d", &cell, &endpoint) != 2) return;
    std::int64_t event_id = 0;
    if (r.webhook_id.rfind("evt_", 0) == 0) event_id = std::strtoll(r.webhook_id.c_str() + 4, nullptr, 10);
    Receipt rec{event_id, 0, ns_of(r.received)};
    if (r.body.rfind("{\"type\":\"committed\"", 0) == 0) {
      constexpr std::string_view key = "\"hold_id\":\"";
      const auto at = r.body.find(key);
      if (at != std::string::npos) {
        const auto from = at + key.size();
        rec.hold_hash = hash_of(std::string_view(r.body).substr(from, r.body.find('"', from) - from));
      }
    }
    std::lock_guard lock(mu_);
    if (cell != cell_ || endpoint < 0 || static_cast<std::size_t>(endpoint) >= receipts_.size()) {
      ++strays_;
      return;
    }
    if (verify_all_ || event_id % 32 == 0) {
      ++verified_;
      const std::int64_t ts = std::strtoll(r.webhook_timestamp.c_str(), nullptr, 10);
      if (!tg::webhooks::verify(r.webhook_signature, secrets_[static_cast<std::size_t>(endpoint)], r.webhook_id, ts,
                                r.body)) {
        ++bad_signatures_;
      }
    }
    receipts_[static_cast<std::size_t>(endpoint)].push_back(rec);
    received_.fetch_add(1, std::memory_order_relaxed);
  }

  std::uint64_t received() const { return received_.load(std::memory_order_relaxed); }

  struct Totals {
    std::vector<std::vector<Receipt>> receipts;
    std::uint64_t bad_signatures = 0, verified = 0, strays = 0;
  };
  Totals take() {
    std::lock_guard lock(mu_);
    Totals t{std::move(receipts_), bad_signatures_, verified_, strays_};
    receipts_.clear();
    cell_ = -1;
    return t;
  }

 private:
  std::mutex mu_;
  int cell_ = -1;
  std::vector<std::string> secrets_;
  std::vector<std::vector<Receipt>> receipts_;
  bool verify_all_ = false;
  std::atomic<std::uint64_t> received_{0};
  std::uint64_t bad_signatures_ = 0, verified_ = 0, strays_ = 0;
};

// When the ledger answered each commit, by its hold's id (hashed).
class AnswerBook {
 public:
  void put(std::uint64_t hold_hash, std::int64_t at_ns) {
    std::lock_guard lock(mu_);
    at_.emplace(hold_hash, at_ns);
  }
  std::optional<std::int64_t> get(std::uint64_t hold_hash) const {
    auto it = at_.find(hold_hash);  // read after the callers stopped
    return it == at_.end() ? std::nullopt : std::optional(it->second);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::uint64_t, std::int64_t> at_;
};

// --- a cell ---------------------------------------------------------------------------------------
struct Cell {
  int round = 0, endpoints = 0;
  double window_s = 0;
  std::int64_t measured = 0, total = 0;
  double lifecycles_per_s = 0, deliveries_per_s = 0, owed_per_s = 0;
  double backlog_mean = 0;
  std::int64_t backlog_max = 0;
  double drain_s = -1;  // -1: not drained within --drain-seconds
  double p50_ms = 0, p99_ms = 0;
  std::size_t latency_samples = 0;
  std::uint64_t duplicates = 0, verified = 0;
  std::uint64_t rounds = 0, records_refused = 0;  // the deliverer's, over the whole cell
  std::string failure;
};

struct Caller {
  tg::Ledger* ledger = nullptr;
  AnswerBook* answers = nullptr;
  std::atomic<int>* phase = nullptr;
  std::latch* stopped = nullptr;
  std::string prefix;
  std::int64_t seq = 0, measured = 0, total = 0;
  std::string failure;
};

enum Phase : int { kWarmup = 0, kMeasure = 1, kStop = 2 };

// One lifecycle after another: reserve → (callback) commit → (callback) the next, as ledger_bench's
// asynchronous callers do; each commit's answer time booked by its hold id.
void next_lifecycle(Caller& c) {
  if (c.phase->load(std::memory_order_acquire) == kStop) return c.stopped->count_down();
  c.ledger->submit(tg::ReserveCommand{"hot", 1, c.prefix + std::to_string(c.seq++), std::nullopt, "", ""},
                   [&c](tg::CommandResult held) {
                     if (!held) {
                       c.failure = "reserve: " + held.error().detail;
                       return c.stopped->count_down();
                     }
                     auto hold_id = std::get<tg::HoldOutcome>(held.value()).hold.hold_id;
                     c.ledger->submit(tg::CommitCommand{std::move(hold_id), std::nullopt}, [&c](tg::CommandResult done) {
                       if (!done) {
                         c.failure = "commit: " + done.error().detail;
                         return c.stopped->count_down();
                       }
                       const auto now = Steady::now();
                       c.answers->put(hash_of(std::get<tg::HoldOutcome>(done.value()).hold.hold_id), ns_of(now));
                       ++c.total;
                       if (c.phase->load(std::memory_order_acquire) == kMeasure) ++c.measured;
                       next_lifecycle(c);
                     });
                   });
}

struct Backlog {
  std::int64_t head = 0;
  std::vector<std::int64_t> cursors;  // in the order of `ids`
};

// The feed's head and the cursors of the endpoints `ids` (the list's order is not theirs: endpoints
// made in the same millisecond are listed by their random ids).
Backlog read_backlog(tg::Ledger& ledger, const std::vector<std::string>& ids) {
  Backlog b;
  auto head = ledger.last_event_id();
  if (!head) die("last_event_id: " + head.error().detail);
  b.head = *head;
  tg::PageRequest page;
  page.limit = tg::limits::kWebhookEndpointsMax;
  auto listed = ledger.list_webhook_endpoints(page);
  if (!listed) die("list endpoints: " + listed.error().detail);
  for (const std::string& id : ids) {
    const auto it = std::find_if(listed->items.begin(), listed->items.end(),
                                 [&](const tg::webhooks::Endpoint& e) { return e.endpoint_id == id; });
    if (it == listed->items.end()) die("endpoint " + id + " is not listed");
    b.cursors.push_back(it->delivery_cursor);
  }
  return b;
}

// The feed's event ids in (after, to].
std::vector<std::int64_t> feed_ids(tg::Ledger& ledger, std::int64_t after, std::int64_t to) {
  std::vector<std::int64_t> ids;
  while (after < to) {
    auto page = ledger.read_feed(after, 1000);
    if (!page) die("read_feed: " + page.error().detail);
    if (page->events.empty()) break;
    for (const auto& e : page->events) {
      if (e.event_id <= to) ids.push_back(e.event_id);
    }
    after = page->next_after;
  }
  return ids;
}

std::unique_ptr<tg::Store> open_store(const Args& a, const tg::Clock& clock, int cell_no,
                                      std::optional<tg::bench::BenchSchema>& schema) {
  if (!a.database.empty()) {
    try {
      schema.emplace(a.database, "webhooks_bench_" + std::to_string(getpid()) + "_" + std::to_string(cell_no), a.keep);
    } catch (const std::exception& e) {
      die(std::string("create schema: ") + e.what());
    }
    tg::PgOptions po;
    po.uri = schema->uri();
    auto opened = tg::PgStore::open(po);
    if (!opened) die("open PostgreSQL: " + opened.error().detail);
    return std::move(opened).value();
  }
  tg::SqliteOptions so;
  so.path = a.dir + "/webhooks-" + std::to_string(cell_no) + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(so.path + std::string(suffix));
  auto opened = tg::SqliteStore::open(so, clock);
  if (!opened) die("open " + so.path + ": " + opened.error().detail);
  return std::move(opened).value();
}

// The checks of a cell after its drain; the first failure, or "".
std::string verify_cell(tg::Ledger& ledger, const Cell& cell, const std::vector<std::int64_t>& cursor0,
                        const Backlog& final_state, const Recorder::Totals& seen, const tg::webhooks::DeliveryStats& ds) {
  auto audit = ledger.audit(std::nullopt);
  if (!audit) return "audit: " + audit.error().detail;
  if (!audit->violations.empty()) return "audit: " + audit->violations.front().message;
  auto account = ledger.get_account("hot");
  if (!account) return "read account: " + account.error().detail;
  if (account->balances.used != cell.total || account->balances.reserved != 0) {
    return "used " + std::to_string(account->balances.used) + " != lifecycles " + std::to_string(cell.total) +
           " (reserved " + std::to_string(account->balances.reserved) + ")";
  }
  if (seen.bad_signatures != 0) return std::to_string(seen.bad_signatures) + " signatures did not verify";
  if (seen.strays != 0) return std::to_string(seen.strays) + " requests for another cell or endpoint";
  if (ds.retrying != 0 || ds.failed != 0) return "attempts retrying or failed: the receiver answers 200 to all";
  // One deliverer, no restart, every answer 200: nothing is sent twice and no record is refused
  // (a refresh that put back an older cursor did both: commit ca5699b).
  if (cell.duplicates != 0 || ds.records_refused != 0) {
    return std::to_string(cell.duplicates) + " events sent twice, " + std::to_string(ds.records_refused) +
           " records refused";
  }
  for (std::size_t i = 0; i < cursor0.size(); ++i) {
    std::unordered_set<std::int64_t> got;
    for (const Receipt& r : seen.receipts[i]) got.insert(r.event_id);
    for (std::int64_t id : feed_ids(ledger, cursor0[i], final_state.cursors[i])) {
      if (!got.count(id)) return "endpoint " + std::to_string(i) + " never received event " + std::to_string(id);
    }
  }
  return "";
}

Cell run_cell(const Args& a, tg::demo::WebhookReceiver& receiver, Recorder& recorder, int cell_no, int round,
              int endpoints) {
  Cell cell;
  cell.round = round;
  cell.endpoints = endpoints;
  tg::SystemClock clock;
  std::optional<tg::bench::BenchSchema> schema;
  auto store = open_store(a, clock, cell_no, schema);
  tg::LedgerOptions lo;
  lo.reaper_interval_ms = 0;
  tg::Ledger ledger(*store, clock, lo);
  if (!ledger.run(tg::CreateAccountCommand{"hot", 0, std::nullopt})) die("create account");
  if (!ledger.run(tg::CreditCommand{"hot", std::int64_t{1} << 40, "fund"})) die("credit");
  std::vector<std::string> secrets, ids;
  std::vector<std::int64_t> cursor0;
  for (int i = 0; i < endpoints; ++i) {
    tg::webhooks::CreateEndpointCommand c;
    c.url = receiver.url("/c" + std::to_string(cell_no) + "/e" + std::to_string(i));
    auto made = ledger.run(tg::Command(std::move(c)));
    if (!made) die("create endpoint: " + made.error().detail);
    const auto& e = std::get<tg::webhooks::EndpointOutcome>(made.value()).endpoint;
    secrets.push_back(e.secret);
    ids.push_back(e.endpoint_id);
    cursor0.push_back(e.delivery_cursor);
  }
  recorder.begin(cell_no, secrets, a.quick);

  tg::webhooks::DeliveryWorkerOptions wo;
  wo.owner = "webhooks-bench";
  wo.body = tg::http::webhook_body;
  tg::webhooks::DeliveryWorker worker(ledger, clock, wo);
  worker.start();
  if (endpoints > 0) {
    const auto deadline = Steady::now() + std::chrono::seconds(10);
    while (!worker.stats().delivering) {
      if (Steady::now() > deadline) die("the deliverer did not take the delivery lock within 10 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  AnswerBook answers;
  std::atomic<int> phase{kWarmup};
  std::latch stopped(a.callers);
  std::vector<Caller> callers(static_cast<std::size_t>(a.callers));
  for (int t = 0; t < a.callers; ++t) {
    Caller& c = callers[static_cast<std::size_t>(t)];
    c = Caller{&ledger, &answers, &phase, &stopped, "req-" + std::to_string(t) + "-"};
    next_lifecycle(c);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.warmup));
  const std::uint64_t received0 = recorder.received();
  const auto t0 = Steady::now();
  phase.store(kMeasure, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  phase.store(kStop, std::memory_order_release);
  const auto t1 = Steady::now();
  const std::uint64_t received1 = recorder.received();
  stopped.wait();
  const Backlog at_end = read_backlog(ledger, ids);

  cell.window_s = std::chrono::duration<double>(t1 - t0).count();
  for (const Caller& c : callers) {
    cell.measured += c.measured;
    cell.total += c.total;
    if (!c.failure.empty() && cell.failure.empty()) cell.failure = c.failure;
  }
  cell.lifecycles_per_s = static_cast<double>(cell.measured) / cell.window_s;
  cell.deliveries_per_s = static_cast<double>(received1 - received0) / cell.window_s;
  cell.owed_per_s = 2.0 * endpoints * cell.lifecycles_per_s;
  for (std::int64_t cursor : at_end.cursors) {
    cell.backlog_mean += static_cast<double>(at_end.head - cursor);
    cell.backlog_max = std::max(cell.backlog_max, at_end.head - cursor);
  }
  if (!at_end.cursors.empty()) cell.backlog_mean /= static_cast<double>(at_end.cursors.size());

  // Drain: until every cursor is at the head (nothing is written any more).
  const auto drain_began = Steady::now();
  Backlog state = at_end;
  for (;;) {
    const bool drained = std::all_of(state.cursors.begin(), state.cursors.end(),
                                     [&](std::int64_t c) { return c >= state.head; });
    if (drained) {
      cell.drain_s = std::chrono::duration<double>(Steady::now() - drain_began).count();
      break;
    }
    if (Steady::now() - drain_began > std::chrono::duration<double>(a.drain_seconds)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    state = read_backlog(ledger, ids);
  }
  worker.stop();
  const auto ds = worker.stats();
  const Backlog final_state = read_backlog(ledger, ids);
  Recorder::Totals seen = recorder.take();
  cell.verified = seen.verified;
  cell.rounds = ds.rounds;
  cell.records_refused = ds.records_refused;

  // Latency: first receipt per endpoint and event, of commits answered inside the window.
  std::vector<double> ms;
  const std::int64_t w0 = ns_of(t0), w1 = ns_of(t1);
  for (auto& receipts : seen.receipts) {
    std::unordered_map<std::int64_t, const Receipt*> first;
    for (const Receipt& r : receipts) {
      auto [it, fresh] = first.emplace(r.event_id, &r);
      if (!fresh) {
        ++cell.duplicates;
        if (r.at_ns < it->second->at_ns) it->second = &r;
      }
    }
    for (const auto& [id, r] : first) {
      if (r->hold_hash == 0) continue;
      const auto answered = answers.get(r->hold_hash);
      if (!answered || *answered < w0 || *answered > w1) continue;
      ms.push_back(static_cast<double>(r->at_ns - *answered) / 1e6);
    }
  }
  cell.latency_samples = ms.size();
  cell.p50_ms = percentile(ms, 0.50);
  cell.p99_ms = percentile(ms, 0.99);

  if (cell.failure.empty()) cell.failure = verify_cell(ledger, cell, cursor0, final_state, seen, ds);
  ledger.stop();
  store.reset();
  if (a.database.empty() && !a.keep) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(a.dir + "/webhooks-" + std::to_string(cell_no) + ".db" + suffix);
    }
  }
  return cell;
}

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

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--seconds") a.seconds = std::stod(next());
    else if (arg == "--warmup") a.warmup = std::stod(next());
    else if (arg == "--callers") a.callers = std::stoi(next());
    else if (arg == "--endpoints") a.endpoints = parse_list(next());
    else if (arg == "--rounds") a.rounds = std::stoi(next());
    else if (arg == "--drain-seconds") a.drain_seconds = std::stod(next());
    else if (arg == "--receiver-threads") a.receiver_threads = std::stoi(next());
    else if (arg == "--dir") a.dir = next();
    else if (arg == "--database") a.database = next();
    else if (arg == "--keep") a.keep = true;
    else if (arg == "-h" || arg == "--help") {
      std::printf(
          "usage: webhooks_bench [--seconds S] [--warmup S] [--callers K] [--endpoints 0,1,10] [--rounds N]\n"
          "                      [--drain-seconds S] [--receiver-threads N] [--dir PATH] [--database URI] [--keep]\n"
          "                      [--quick]\n"
          "what each figure means and what is checked: the top of bench/webhooks_bench.cc\n");
      std::exit(0);
    }
    else if (arg == "--quick") {
      a.quick = true;
      a.seconds = 0.3;
      a.warmup = 0.1;
      a.callers = 8;
      a.endpoints = {0, 1, 3};
      a.rounds = 1;
    } else {
      die("unknown option " + arg + " (see the top of bench/webhooks_bench.cc)");
    }
  }
  if (a.callers < 1 || a.rounds < 1 || a.seconds <= 0 || a.endpoints.empty()) die("bad options");
  for (int e : a.endpoints) {
    if (e < 0 || e > tg::limits::kWebhookEndpointsMax) die("endpoints must be 0 to 100");
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  bool made_dir = false;
  if (a.database.empty() && a.dir.empty()) {
    char tmpl[] = "/var/tmp/tollgate-webhooks-bench.XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp");
    a.dir = tmpl;
    made_dir = true;
  }
  Recorder recorder;
  tg::demo::WebhookReceiverOptions ro;
  ro.threads = a.receiver_threads;
  ro.on_request = [&recorder](tg::demo::ReceivedWebhook&& r) { recorder.on_request(std::move(r)); };
  tg::demo::WebhookReceiver receiver(ro);

  std::vector<Cell> cells;
  int cell_no = 0;
  for (int round = 1; round <= a.rounds; ++round) {
    for (int e : a.endpoints) {
      cells.push_back(run_cell(a, receiver, recorder, cell_no++, round, e));
      const Cell& c = cells.back();
      std::fprintf(stderr, "round %d, %d endpoints: %.0f lifecycles/s, %.0f deliveries/s%s\n", round, e,
                   c.lifecycles_per_s, c.deliveries_per_s, c.failure.empty() ? "" : (" FAILED: " + c.failure).c_str());
    }
  }
  receiver.stop();
  if (made_dir && !a.keep) std::filesystem::remove_all(a.dir);

  // The mean rate of each endpoint count; ratios to the E = 0 mean.
  auto mean_rate = [&](int e) {
    double sum = 0;
    int n = 0;
    for (const Cell& c : cells) {
      if (c.endpoints == e) sum += c.lifecycles_per_s, ++n;
    }
    return n ? sum / n : 0.0;
  };
  const double base = mean_rate(0);
  std::printf("webhooks bench: %s, %d async callers on one hot account, %.1f s windows, %d round(s)\n",
              a.database.empty() ? "SQLite" : ("PostgreSQL " + tg::bench::redact_uri(a.database)).c_str(), a.callers,
              a.seconds, a.rounds);
  std::printf("latency: the commit's answer to the caller -> the receiver has read the request (steady clock)\n");
  std::printf("%5s %9s %13s %6s %13s %11s %9s %8s %8s %8s %9s %11s %s\n", "round", "endpoints", "lifecycles/s",
              "ratio", "deliveries/s", "owed/s", "backlog", "drain s", "p50 ms", "p99 ms", "samples", "dup/refused",
              "checks");
  bool ok = true;
  std::string json_cells;
  for (const Cell& c : cells) {
    ok = ok && c.failure.empty();
    char drain[32];
    if (c.drain_s >= 0) std::snprintf(drain, sizeof drain, "%.2f", c.drain_s);
    else std::snprintf(drain, sizeof drain, "-");
    char dup[48];
    std::snprintf(dup, sizeof dup, "%llu/%llu", static_cast<unsigned long long>(c.duplicates),
                  static_cast<unsigned long long>(c.records_refused));
    std::printf("%5d %9d %13.0f %6.2f %13.0f %11.0f %9.0f %8s %8.1f %8.1f %9zu %11s %s\n", c.round, c.endpoints,
                c.lifecycles_per_s, base > 0 ? c.lifecycles_per_s / base : 0, c.deliveries_per_s, c.owed_per_s,
                c.backlog_mean, drain, c.p50_ms, c.p99_ms, c.latency_samples, dup,
                c.failure.empty() ? "ok" : ("FAILED: " + c.failure).c_str());
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"round\":%d,\"endpoints\":%d,\"rounds\":%llu,\"records_refused\":%llu,\"lifecycles_per_s\":%.1f,\"ratio\":%.3f,\"deliveries_per_s\":%.1f,"
                  "\"owed_per_s\":%.1f,\"backlog_mean\":%.1f,\"backlog_max\":%lld,\"drain_s\":%.3f,\"p50_ms\":%.3f,"
                  "\"p99_ms\":%.3f,\"latency_samples\":%zu,\"duplicates\":%llu,\"signatures_verified\":%llu,\"ok\":%s}",
                  json_cells.empty() ? "" : ",", c.round, c.endpoints, static_cast<unsigned long long>(c.rounds),
                  static_cast<unsigned long long>(c.records_refused), c.lifecycles_per_s,
                  base > 0 ? c.lifecycles_per_s / base : 0, c.deliveries_per_s, c.owed_per_s, c.backlog_mean,
                  static_cast<long long>(c.backlog_max), c.drain_s, c.p50_ms, c.p99_ms, c.latency_samples,
                  static_cast<unsigned long long>(c.duplicates), static_cast<unsigned long long>(c.verified),
                  c.failure.empty() ? "true" : "false");
    json_cells += buf;
  }
  std::string summary;
  for (int e : a.endpoints) {
    if (summary.find("\"" + std::to_string(e) + "\"") != std::string::npos) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s\"%d\":%.3f", summary.empty() ? "" : ",", e, base > 0 ? mean_rate(e) / base : 0);
    summary += buf;
  }
  std::printf("mean ratio to 0 endpoints: {%s}\n", summary.c_str());
  std::printf("{\"bench\":\"webhooks\",\"store\":\"%s\",\"callers\":%d,\"seconds\":%.2f,\"rounds\":%d,"
              "\"ratio_by_endpoints\":{%s},\"ok\":%s,\"cells\":[%s]}\n",
              a.database.empty() ? "sqlite" : "postgres", a.callers, a.seconds, a.rounds, summary.c_str(),
              ok ? "true" : "false", json_cells.c_str());
  return ok ? 0 : 1;
}
