// tollgate bench: durable reserve+commit lifecycles per second, in-process.
//
// Workloads (each one a "cell": one implementation × one account layout × one caller count, on a
// fresh database, a short warm-up, then a fixed wall-time window):
//
//   tollgate hot      every caller on ONE account; SqliteStore (WAL, synchronous=NORMAL and the WAL
//                     flushed by the store before any answer: as durable as FULL) + Ledger with
//                     group commit, reaper off. A caller loops: Ledger::reserve(1, unique request_id)
//                     then Ledger::commit(that hold). One lifecycle = both calls, both durable.
//   tollgate spread   the same on 10,000 accounts; each caller picks an account at random
//                     (std::mt19937_64, fixed seed per caller).
//   baseline hot      the textbook approach on the same SQLite settings (WAL, synchronous=FULL,
//                     busy_timeout, same cache_size): raw sqlite3, one connection per caller,
//                     one durable autocommit transaction per statement:
//                       UPDATE accounts SET available = available - 1, reserved = reserved + 1
//                         WHERE id = ? AND available >= 1
//                       UPDATE accounts SET reserved = reserved - 1, used = used + 1 WHERE id = ?
//                     retrying SQLITE_BUSY.
//   baseline spread   the same on 10,000 accounts, random account per lifecycle.
//
// Callers: 1, 8 and 64 threads (--callers). Each lifecycle is timed (both calls) for p50/p99.
// The table also shows the mean latency by Little's law (callers / rate) and the fewest and most
// lifecycles one caller completed: the baseline's busy handler starves callers for seconds, which
// percentiles of completed lifecycles hide.
// A lifecycle is counted for the rate when it completes inside the measurement window.
// After each cell the database is verified: tollgate — audit() clean, sum(used) equals every
// lifecycle completed (warm-up and tail included), nothing reserved; baseline — the same sums.
// A failed verification (or any refused call) makes the program exit 1.
//
// Output: a table, then as the LAST line one JSON object: bench, tollgate_lifecycles_per_s and
// baseline_lifecycles_per_s (hot account, 64 callers — or the largest caller count run), ratio,
// spread_* figures, p50_us/p99_us (tollgate hot 64), and a "cells" array with every figure.
//
// Options:
//   --seconds S        measurement window per cell (default 3)
//   --warmup S         warm-up before each window (default 0.5)
//   --callers LIST     comma-separated caller counts (default 1,8,64)
//   --workloads LIST   hot,spread (default both)
//   --impls LIST       tollgate,baseline (default both)
//   --accounts N       accounts of the spread workload (default 10000)
//   --quick            CI smoke: 0.3 s windows, 0.05 s warm-up, 1,000 spread accounts
//   --dir PATH         where the database files go (default: a new temp folder on a real disk)
//   --keep             keep the database files
//   --allow-tmpfs      run even if --dir is on tmpfs/ramfs (numbers are then not durable ones)
//   --no-wal-batching  SQLite without the WAL batching layer (to measure what it saves)
//   --database URI     run the tollgate cells on PostgreSQL instead (see below)
//   --instances N      with --database: N tollgate instances in this process (default 1)
//   --lots LIST        credit lots in play (see below): each tollgate cell runs once per value
//   --priced           every reservation by feature (quantity 1 of a feature priced at 1 credit): the
//                      batch reads the price and writes the hold's priced row (prices/price_batch.h);
//                      the same credits move, so every check below holds; compare with a run without
//
// Credit lots (--lots 1,20): by default each account is funded by one plain credit (kCreditPerAccount;
// on a ledger with credit lots that is one lot without expiry). With --lots LIST every tollgate cell
// runs once per value N of LIST, back to back (N = 1, then N = 20, for the same workload and caller
// count): each account is funded by N credits of kCreditPerAccount / N each, i.e. N live lots with
// distinct priorities (the last credit has the lowest priority: spent first) and distinct expiries
// 10 years and more ahead, alternately paid and promotional. Every lifecycle's hold then draws from
// one of them while each write on the account loads all N. Verified besides the above: the account
// still has N live lots at the end (none ran out) and the lots' used sums to the accounts' (every
// credit spent came from a lot). The table gets a lots column and a comparison of each value with the
// first (lifecycles/s and the ratio, per workload and caller count); the JSON line gets "lots" per
// cell and a "lots" object {"values": […], "compare": [{workload, callers, lifecycles_per_s: {N: …},
// ratio}], "ratio_min": 0.9, "met"} (ratio = the last value against the first; met: every ratio ≥
// 0.9, the "at most 10%"). The headline figures are those of the first value. The baseline
// cells have no lots and run once per caller count.
//
// PostgreSQL (--database postgresql://…): the tollgate cells run on PgStore (synchronous_commit=on,
// set by the store's sessions; the database's clock) instead of SQLite. Each cell gets a fresh
// schema, created by the bench on the server of URI and dropped afterwards (--keep keeps it); the
// stores reach it through the URI's `options=-csearch_path%3D<schema>` parameter. --instances N
// makes N independent instances in the process: N PgStore (each with its own writer connection)
// and N Ledger (each with its own group committer) on the same schema, as N `tollgate serve`
// processes would be; caller i uses instance i mod N. The accounts are made through instance 0.
// Verification as for SQLite: audit() clean, sum(used) equals every lifecycle completed, nothing
// reserved, no active hold. The baseline cells stay SQLite-only: the PostgreSQL baseline is pgbench
// (bench/postgres/baseline.sh; scripts/bench postgres runs both). The table adds each cell's mean
// store apply() time per batch (writer wall time, BEGIN to durable COMMIT) and the share of batches
// that held a single command; the last line is then one JSON object with bench "ledger_postgres"
// (tollgate hot/spread figures, instances, server settings, cells with batch figures).
#include <sqlite3.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"
#include "bench_pg.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using tollgate::bench::BenchSchema;
using tollgate::bench::redact_uri;

// --- options ------------------------------------------------------------------------------------
struct Options {
  double seconds = 3.0;
  double warmup = 0.5;
  std::vector<int> callers{1, 8, 64};
  bool hot = true, spread = true;
  bool tollgate = true, baseline = true;
  int accounts = 10'000;
  bool quick = false;
  std::string dir;
  bool keep = false;
  bool allow_tmpfs = false;
  bool async_callers = true;  // --caller-mode async (default) | threads
  std::string database;       // --database: a postgresql:// URI; empty = SQLite
  int instances = 1;          // --instances (PostgreSQL only)
  bool batch_wal_writes = true;  // --no-wal-batching: SQLite without the WAL batching layer
  int checkpoint_interval_ms = -1;    // --checkpoint-interval-ms (SQLite; -1: the store's default)
  int wal_autocheckpoint_pages = -1;  // --wal-autocheckpoint (SQLite; -1: the store's default)
  int page_size = 0;                  // --page-size (SQLite, tollgate and baseline; 0: the store's)
  std::vector<int> lots;              // --lots: live lots per account, one tollgate cell per value; empty: one plain credit
  bool priced = false;                // --priced: reserve by feature (a price read in every reservation's batch)
  bool postgres() const { return !database.empty(); }
};

constexpr const char* kUsage =
    "usage: ledger_bench [options]\n"
    "  --seconds S        measurement window per cell (default 3)\n"
    "  --warmup S         warm-up before each window (default 0.5)\n"
    "  --callers LIST     comma-separated caller counts (default 1,8,64)\n"
    "  --workloads LIST   hot,spread (default both)\n"
    "  --impls LIST       tollgate,baseline (default both)\n"
    "  --accounts N       accounts of the spread workload (default 10000)\n"
    "  --quick            CI smoke: 0.3 s windows, 0.05 s warm-up, 1,000 spread accounts\n"
    "  --dir PATH         where the database files go (default: a new temp folder on a real disk)\n"
    "  --keep             keep the database files\n"
    "  --allow-tmpfs      run even if the folder is on tmpfs/ramfs (numbers are then not durable ones)\n"
    "  --page-size N      SQLite: the page size of the new database files, tollgate's and the\n"
    "                     baseline's (default: the store's)\n"
    "  --checkpoint-interval-ms N  SQLite: the background checkpointer's interval (0: checkpoints in\n"
    "                     commits only); default: the store's\n"
    "  --wal-autocheckpoint N      SQLite: WAL pages after which a commit checkpoints; default: the store's\n"
    "  --no-wal-batching  SQLite: without the WAL batching layer (two writes per WAL frame, as SQLite\n"
    "                     alone does) — to measure what the layer saves\n"
    "  --caller-mode M    tollgate callers: async (default; each caller is a chain of callbacks, as the\n"
    "                     HTTP server uses the ledger) or threads (each caller a blocking OS thread)\n"
    "  --database URI     tollgate cells on PostgreSQL (PgStore) instead of SQLite: a postgresql:// URI;\n"
    "                     each cell in a fresh schema, dropped afterwards (--keep keeps it); no baseline\n"
    "                     cells (the PostgreSQL baseline is pgbench: scripts/bench postgres)\n"
    "  --instances N      with --database: N instances (PgStore + Ledger, each with its own writer\n"
    "                     connection and group committer) on the same schema; callers round-robin (default 1)\n"
    "  --lots LIST        credit lots: each tollgate cell once per value N, every account funded by N\n"
    "                     credits (N live lots, distinct priorities and far expiries); the table and JSON\n"
    "                     compare each N with the first (e.g. --lots 1,20). Default: one plain credit\n"
    "  --priced           tollgate cells reserve by feature (a price of 1 credit per unit, quantity 1)\n";

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "ledger_bench: %s\n%s", why, kUsage);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  bool seconds_set = false, warmup_set = false, accounts_set = false, impls_set = false, instances_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    try {
      if (a == "--seconds") {
        o.seconds = std::stod(value());
        seconds_set = true;
      } else if (a == "--warmup") {
        o.warmup = std::stod(value());
        warmup_set = true;
      } else if (a == "--callers") {
        o.callers.clear();
        for (auto& c : split(value())) o.callers.push_back(std::stoi(c));
      } else if (a == "--workloads") {
        o.hot = o.spread = false;
        for (auto& w : split(value())) {
          if (w == "hot") o.hot = true;
          else if (w == "spread") o.spread = true;
          else usage(("unknown workload " + w).c_str());
        }
      } else if (a == "--impls") {
        o.tollgate = o.baseline = false;
        impls_set = true;
        for (auto& w : split(value())) {
          if (w == "tollgate") o.tollgate = true;
          else if (w == "baseline") o.baseline = true;
          else usage(("unknown implementation " + w).c_str());
        }
      } else if (a == "--accounts") {
        o.accounts = std::stoi(value());
        accounts_set = true;
      } else if (a == "--quick") {
        o.quick = true;
      } else if (a == "--dir") {
        o.dir = value();
      } else if (a == "--caller-mode") {
        const std::string m = value();
        if (m == "async") o.async_callers = true;
        else if (m == "threads") o.async_callers = false;
        else usage(("unknown caller mode " + m).c_str());
      } else if (a == "--page-size") {
        o.page_size = std::stoi(value());
      } else if (a == "--checkpoint-interval-ms") {
        o.checkpoint_interval_ms = std::stoi(value());
      } else if (a == "--wal-autocheckpoint") {
        o.wal_autocheckpoint_pages = std::stoi(value());
      } else if (a == "--no-wal-batching") {
        o.batch_wal_writes = false;
      } else if (a == "--database") {
        o.database = value();
      } else if (a == "--instances") {
        o.instances = std::stoi(value());
        instances_set = true;
      } else if (a == "--lots") {
        o.lots.clear();
        for (auto& n : split(value())) o.lots.push_back(std::stoi(n));
        if (o.lots.empty()) usage("--lots is empty");
      } else if (a == "--priced") {
        o.priced = true;
      } else if (a == "--keep") {
        o.keep = true;
      } else if (a == "--allow-tmpfs") {
        o.allow_tmpfs = true;
      } else if (a == "-h" || a == "--help") {
        std::printf("ledger_bench: durable reserve+commit lifecycles per second, tollgate vs baseline\n%s", kUsage);
        std::exit(0);
      } else {
        usage(("unknown option " + a).c_str());
      }
    } catch (const std::logic_error&) {
      usage(("bad value for " + a).c_str());
    }
  }
  if (o.quick) {
    if (!seconds_set) o.seconds = 0.3;
    if (!warmup_set) o.warmup = 0.05;
    if (!accounts_set) o.accounts = 1'000;
  }
  if (o.seconds <= 0 || o.warmup < 0) usage("--seconds must be > 0 and --warmup >= 0");
  if (o.callers.empty()) usage("--callers is empty");
  for (int c : o.callers) {
    if (c < 1 || c > 4096) usage("a caller count must be from 1 to 4096");
  }
  if (o.accounts < 1) usage("--accounts must be at least 1");
  for (int n : o.lots) {
    if (n < 1 || n > tollgate::limits::kLiveLotsPerAccountMax) usage("a lot count must be from 1 to 10000");
  }
  if (instances_set && !o.postgres()) usage("--instances needs --database");
  if (o.instances < 1 || o.instances > 64) usage("--instances must be from 1 to 64");
  if (o.postgres()) {
    if (o.database.rfind("postgresql://", 0) != 0 && o.database.rfind("postgres://", 0) != 0) {
      usage("--database must be a postgresql:// URI");
    }
    if (impls_set && o.baseline) {
      usage("the baseline cells are SQLite-only; the PostgreSQL baseline is pgbench (scripts/bench postgres)");
    }
    o.baseline = false;
  }
  if (!(o.hot || o.spread) || !(o.tollgate || o.baseline)) usage("nothing to run");
  return o;
}

// --- where the files go ------------------------------------------------------------------------
struct FsInfo {
  std::string type;
  bool memory = false;  // tmpfs / ramfs: not durable
};

FsInfo fs_info(const std::string& path) {
  struct statfs s {};
  if (statfs(path.c_str(), &s) != 0) return {"unknown", false};
  const auto magic = static_cast<unsigned long>(s.f_type);
  switch (magic) {
    case 0xEF53UL: return {"ext4", false};  // also ext2/ext3
    case 0x58465342UL: return {"xfs", false};
    case 0x9123683EUL: return {"btrfs", false};
    case 0x2FC12FC1UL: return {"zfs", false};
    case 0x794C7630UL: return {"overlayfs", false};
    case 0x6969UL: return {"nfs", false};
    case 0xF2F52010UL: return {"f2fs", false};
    case 0x01021994UL: return {"tmpfs", true};
    case 0x858458F6UL: return {"ramfs", true};
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", magic);
      return {buf, false};
    }
  }
}

// The folder for this run: --dir, or a new temp folder under the first of $TMPDIR, /var/tmp, /tmp
// and the current folder that is on a real disk.
std::string pick_dir(const Options& o, bool& created) {
  created = false;
  if (!o.dir.empty()) {
    fs::path existing = fs::absolute(o.dir);
    while (!existing.empty() && !fs::exists(existing)) existing = existing.parent_path();
    if (fs_info(existing.string()).memory && !o.allow_tmpfs) {
      std::fprintf(stderr, "ledger_bench: %s is on %s: commits would not be durable; pass another --dir\n",
                   o.dir.c_str(), fs_info(existing.string()).type.c_str());
      std::exit(2);
    }
    fs::create_directories(o.dir);
    return fs::absolute(o.dir).string();
  }
  std::vector<std::string> bases;
  if (const char* t = std::getenv("TMPDIR"); t && *t) bases.emplace_back(t);
  bases.emplace_back("/var/tmp");
  bases.emplace_back("/tmp");
  bases.push_back(fs::current_path().string());
  for (const auto& base : bases) {
    std::error_code ec;
    if (!fs::is_directory(base, ec) || fs_info(base).memory || access(base.c_str(), W_OK) != 0) continue;
    std::string templ = (fs::path(base) / "tollgate-bench-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) continue;
    created = true;
    return templ;
  }
  std::fprintf(stderr, "ledger_bench: no writable folder on a real disk; pass --dir\n");
  std::exit(2);
}

void remove_db(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ec);
}

// --- figures ------------------------------------------------------------------------------------
struct Cell {
  std::string impl;      // tollgate | baseline
  std::string workload;  // hot | spread
  int callers = 0;
  std::int64_t accounts = 0;
  int lots = 0;  // live lots per account (--lots); 0: one plain credit (and the baseline)
  double window_s = 0;
  std::int64_t measured = 0;  // lifecycles completed inside the window
  std::int64_t total = 0;     // every lifecycle completed (warm-up and tail too)
  double per_s = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
  // Closed loop: mean latency by Little's law (callers / rate). It counts the callers that starve,
  // which the percentiles of completed lifecycles under-weigh (a caller stuck for seconds adds one
  // sample; a lucky one adds thousands).
  double mean_us = 0;
  std::int64_t caller_min = 0, caller_max = 0;  // lifecycles one caller completed in the window
  // tollgate: group-commit batches and commands during the window; baseline: SQLITE_BUSY retries.
  std::uint64_t batches = 0, commands = 0, busy_retries = 0;
  // PostgreSQL only: instances, and the stores' apply() calls during the window (writer wall time
  // per batch, BEGIN to durable COMMIT, summed over instances; the largest batch).
  int instances = 1;
  std::uint64_t apply_calls = 0, apply_ns = 0, max_batch = 0, single_batches = 0;  // single: of one command
  // tollgate: the group committer's time in the window — apply() (load, decide, write, COMMIT) and
  // sync() (the flush; SQLite only: PostgreSQL's COMMIT flushes) — and the batches it answered itself.
  std::uint64_t gc_apply_ns = 0, gc_sync_ns = 0, gc_syncs = 0, gc_inline = 0;
  bool verified = false;
  std::string failure;
};

struct alignas(64) CallerStats {
  std::int64_t measured = 0;
  std::int64_t total = 0;
  std::uint64_t busy = 0;
  std::vector<std::int64_t> latency_ns;  // of measured lifecycles
  std::string failure;
};

enum Phase : int { kWarmup = 0, kMeasure = 1, kStop = 2 };

double percentile_us(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(p * static_cast<double>(sorted.size()));
  if (rank >= sorted.size()) rank = sorted.size() - 1;
  return static_cast<double>(sorted[rank]) / 1000.0;
}

void summarize(Cell& cell, int callers, std::vector<CallerStats>& stats, double window_s);

// Runs `callers` threads of body(index, stats, phase) through warm-up and window; fills the cell.
template <typename Body>
void drive(const Options& o, Cell& cell, int callers, Body&& body, const std::function<void()>& at_window_start,
           const std::function<void()>& at_window_end) {
  std::vector<CallerStats> stats(static_cast<std::size_t>(callers));
  std::atomic<int> phase{kWarmup};
  std::latch ready(callers + 1);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(callers));
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      CallerStats& s = stats[static_cast<std::size_t>(t)];
      s.latency_ns.reserve(1 << 16);
      ready.arrive_and_wait();
      body(t, s, phase);
    });
  }
  ready.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  at_window_start();
  const auto t0 = Clock::now();
  phase.store(kMeasure, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  phase.store(kStop, std::memory_order_release);
  const auto t1 = Clock::now();
  at_window_end();
  for (auto& th : threads) th.join();
  summarize(cell, callers, stats, std::chrono::duration<double>(t1 - t0).count());
}

void summarize(Cell& cell, int callers, std::vector<CallerStats>& stats, double window_s) {
  cell.window_s = window_s;
  std::vector<std::int64_t> all;
  cell.caller_min = stats.front().measured;
  cell.caller_max = stats.front().measured;
  for (auto& s : stats) {
    cell.caller_min = std::min(cell.caller_min, s.measured);
    cell.caller_max = std::max(cell.caller_max, s.measured);
    cell.measured += s.measured;
    cell.total += s.total;
    cell.busy_retries += s.busy;
    all.insert(all.end(), s.latency_ns.begin(), s.latency_ns.end());
    if (!s.failure.empty() && cell.failure.empty()) cell.failure = s.failure;
  }
  std::sort(all.begin(), all.end());
  cell.per_s = static_cast<double>(cell.measured) / cell.window_s;
  cell.mean_us = cell.per_s > 0 ? 1e6 * callers / cell.per_s : 0;
  cell.p50_us = percentile_us(all, 0.50);
  cell.p90_us = percentile_us(all, 0.90);
  cell.p99_us = percentile_us(all, 0.99);
  cell.max_us = all.empty() ? 0 : static_cast<double>(all.back()) / 1000.0;
}

// The same as drive(), but a caller is a chain of callbacks instead of a thread: start(index,
// stats, phase, done) begins a caller's first lifecycle and must call done() once that caller
// stopped (after its last lifecycle). No thread blocks per caller: this is how the HTTP server
// drives the ledger.
template <typename Start>
void drive_async(const Options& o, Cell& cell, int callers, Start&& start, const std::function<void()>& at_window_start,
                 const std::function<void()>& at_window_end) {
  std::vector<CallerStats> stats(static_cast<std::size_t>(callers));
  std::atomic<int> phase{kWarmup};
  std::latch stopped(callers);
  for (int t = 0; t < callers; ++t) {
    stats[static_cast<std::size_t>(t)].latency_ns.reserve(1 << 16);
    start(t, stats[static_cast<std::size_t>(t)], phase, [&stopped] { stopped.count_down(); });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  at_window_start();
  const auto t0 = Clock::now();
  phase.store(kMeasure, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  phase.store(kStop, std::memory_order_release);
  const auto t1 = Clock::now();
  at_window_end();
  stopped.wait();
  summarize(cell, callers, stats, std::chrono::duration<double>(t1 - t0).count());
}

// Books one completed lifecycle by the phase at its end.
void book(CallerStats& s, std::atomic<int>& phase, Clock::time_point start) {
  const auto end = Clock::now();
  ++s.total;
  if (phase.load(std::memory_order_acquire) == kMeasure) {
    ++s.measured;
    s.latency_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
  }
}

// Times one lifecycle and books it by the phase at its end.
template <typename F>
bool timed(CallerStats& s, std::atomic<int>& phase, F&& lifecycle) {
  const auto start = Clock::now();
  if (!lifecycle()) return false;
  book(s, phase, start);
  return true;
}

std::string account_name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "acct-%05d", i);
  return buf;
}

constexpr std::int64_t kCreditPerAccount = 1'000'000'000'000;  // far more than any run uses
constexpr std::uint64_t kSeed = 0x7011'6a7e'5eedULL;

// --- tollgate ------------------------------------------------------------------------------------
// Submits `commands` through the group committer (in chunks that fit its queue) and waits for all.
bool run_all(tollgate::Ledger& ledger, std::vector<tollgate::Command> commands, std::string& failure) {
  constexpr std::size_t kChunk = 4096;
  for (std::size_t at = 0; at < commands.size(); at += kChunk) {
    const std::size_t n = std::min(kChunk, commands.size() - at);
    std::latch done(static_cast<std::ptrdiff_t>(n));
    std::mutex mu;
    for (std::size_t i = 0; i < n; ++i) {
      ledger.submit(std::move(commands[at + i]), [&](tollgate::CommandResult r) {
        if (!r) {
          std::lock_guard lock(mu);
          if (failure.empty()) failure = "setup: " + r.error().detail;
        }
        done.count_down();
      });
    }
    done.wait();
    if (!failure.empty()) return false;
  }
  return true;
}

// The accounts of a cell: "hot", or acct-00000 … for the spread workload.
std::vector<std::string> account_ids(bool hot, std::int64_t accounts) {
  std::vector<std::string> ids;
  for (std::int64_t i = 0; i < accounts; ++i) ids.push_back(hot ? "hot" : account_name(static_cast<int>(i)));
  return ids;
}

// Creates the accounts and gives each kCreditPerAccount, through the group committer of `ledger`:
// in one plain credit (lots 0), or in `lots` credits of kCreditPerAccount / lots, each its own lot
// (--lots): distinct priorities (the last credit lowest: spent first, so the lot drawn from is not
// simply the first loaded), distinct expiries from 10 years ahead, paid and promotional in turn.
bool fund_accounts(tollgate::Ledger& ledger, const std::vector<std::string>& ids, int lots, std::string& failure) {
  std::vector<tollgate::Command> setup;
  for (const auto& id : ids) setup.emplace_back(tollgate::CreateAccountCommand{id, 0, std::nullopt});
  if (!run_all(ledger, std::move(setup), failure)) return false;
  setup.clear();
  if (lots == 0) {
    for (const auto& id : ids) setup.emplace_back(tollgate::CreditCommand{id, kCreditPerAccount, "fund-" + id});
    return run_all(ledger, std::move(setup), failure);
  }
  constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
  const std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::int64_t per_lot = kCreditPerAccount / lots;  // >= 10^8: far more than any run spends from one
  for (int i = 0; i < lots; ++i) {
    tollgate::LotTerms terms;
    terms.expires_at_ms = now_ms + 3653 * kDayMs + i * kDayMs;
    terms.priority = tollgate::limits::kLotPriorityMax - (i % (tollgate::limits::kLotPriorityMax + 1));
    terms.category = i % 2 == 0 ? tollgate::LotCategory::paid : tollgate::LotCategory::promotional;
    for (const auto& id : ids) {
      setup.emplace_back(tollgate::CreditCommand{id, per_lot, "fund-" + id + "-lot-" + std::to_string(i), terms});
    }
  }
  return run_all(ledger, std::move(setup), failure);
}

// The live lots (credits available or reserved) and the lots' used, summed over every account:
// --lots cells check that each account still has its N live lots and that every credit used came from one.
constexpr const char* kLotsCheckSql =
    "SELECT coalesce(sum(CASE WHEN available > 0 OR reserved > 0 THEN 1 ELSE 0 END),0), coalesce(sum(used),0) "
    "FROM lots";

// The failure for a --lots cell whose lots do not add up (empty: they do).
std::string lots_failure(const Cell& cell, std::int64_t live, std::int64_t lots_used, std::int64_t used) {
  if (cell.lots == 0 || (live == cell.lots * cell.accounts && lots_used == used)) return "";
  return "verify lots: " + std::to_string(live) + " live lots (expected " + std::to_string(cell.lots * cell.accounts) +
         "), the lots' used " + std::to_string(lots_used) + " (the accounts' " + std::to_string(used) + ")";
}

// The feature the --priced cells reserve (1 credit per unit, set before the window).
constexpr const char* kBenchFeature = "bench-unit";

// A lifecycle's reservation of 1 credit: by amount, or (--priced) 1 unit of kBenchFeature.
tollgate::Command reserve_command(const Options& o, const std::string& account, std::string request_id) {
  tollgate::ReserveCommand reserve{account, o.priced ? 0 : 1, std::move(request_id), std::nullopt, "", ""};
  if (!o.priced) return reserve;
  return tollgate::ReserveByFeatureCommand{std::move(reserve), kBenchFeature, 1};
}

// The hold a reservation made (by amount or by feature).
const tollgate::Hold& reserved_hold(const tollgate::CommandResult& r) {
  if (const auto* priced = std::get_if<tollgate::PricedHoldOutcome>(&r.value())) return priced->hold;
  return std::get<tollgate::HoldOutcome>(r.value()).hold;
}

// The measured part of a tollgate cell: `callers` callers loop reserve → commit on `ledgers`
// (caller i on ledgers[i mod N]) through warm-up and window. Fills the cell's figures and the
// group-commit counts of the window (summed over the ledgers). at_window_start / at_window_end run
// next to those snapshots.
void run_lifecycles(const Options& o, Cell& cell, const std::vector<tollgate::Ledger*>& ledgers,
                    const std::vector<std::string>& ids, bool hot, int callers,
                    const std::function<void()>& at_window_start, const std::function<void()>& at_window_end) {
  const std::size_t n = ledgers.size();
  if (o.priced) {
    auto priced = ledgers.front()->run(tollgate::SetPriceCommand{kBenchFeature, 1});
    if (!priced) {
      cell.failure = "set price: " + priced.error().detail;
      return;
    }
  }
  std::vector<tollgate::GroupCommitStats> before(n), after(n);
  auto snapshot = [&](std::vector<tollgate::GroupCommitStats>& into) {
    for (std::size_t i = 0; i < n; ++i) into[i] = ledgers[i]->write_stats();
  };
  auto body = [&](int t, CallerStats& s, std::atomic<int>& phase) {
    tollgate::Ledger& ledger = *ledgers[static_cast<std::size_t>(t) % n];
    std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(t));
    std::uniform_int_distribution<std::size_t> pick(0, ids.size() - 1);
    const std::string prefix = "req-" + std::to_string(t) + "-";
    std::int64_t seq = 0;
    while (phase.load(std::memory_order_acquire) != kStop) {
      const std::string& account = ids[hot ? 0 : pick(rng)];
      const bool ok = timed(s, phase, [&] {
        const tollgate::CommandResult held = ledger.run(reserve_command(o, account, prefix + std::to_string(seq++)));
        if (!held) {
          s.failure = "reserve: " + std::string(tollgate::code_name(held.code())) + ": " + held.error().detail;
          return false;
        }
        auto done = ledger.commit({reserved_hold(held).hold_id, std::nullopt});
        if (!done) {
          s.failure = "commit: " + std::string(tollgate::code_name(done.code())) + ": " + done.error().detail;
          return false;
        }
        return true;
      });
      if (!ok) return;
    }
  };
  // Async callers: reserve → (callback) commit → (callback) next lifecycle, no thread per caller.
  // Callbacks run on the completion thread of the caller's ledger.
  struct AsyncCaller {
    tollgate::Ledger* ledger = nullptr;
    CallerStats* stats = nullptr;
    std::atomic<int>* phase = nullptr;
    std::function<void()> done;
    std::mt19937_64 rng;
    std::uniform_int_distribution<std::size_t> pick;
    std::string prefix;
    std::int64_t seq = 0;
    Clock::time_point started;
  };
  std::vector<AsyncCaller> async_callers(static_cast<std::size_t>(callers));
  std::function<void(AsyncCaller&)> next = [&](AsyncCaller& c) {
    if (c.phase->load(std::memory_order_acquire) == kStop) return c.done();
    c.started = Clock::now();
    const std::string& account = ids[hot ? 0 : c.pick(c.rng)];
    c.ledger->submit(reserve_command(o, account, c.prefix + std::to_string(c.seq++)),
                     [&](tollgate::CommandResult held) {
                       if (!held) {
                         c.stats->failure = "reserve: " + held.error().detail;
                         return c.done();
                       }
                       auto hold_id = reserved_hold(held).hold_id;
                       c.ledger->submit(tollgate::CommitCommand{std::move(hold_id), std::nullopt},
                                        [&](tollgate::CommandResult committed) {
                                          if (!committed) {
                                            c.stats->failure = "commit: " + committed.error().detail;
                                            return c.done();
                                          }
                                          book(*c.stats, *c.phase, c.started);
                                          next(c);
                                        });
                     });
  };
  auto start = [&](int t, CallerStats& s, std::atomic<int>& phase, std::function<void()> done) {
    AsyncCaller& c = async_callers[static_cast<std::size_t>(t)];
    c.ledger = ledgers[static_cast<std::size_t>(t) % n];
    c.stats = &s;
    c.phase = &phase;
    c.done = std::move(done);
    c.rng.seed(kSeed + static_cast<std::uint64_t>(t));
    c.pick = std::uniform_int_distribution<std::size_t>(0, ids.size() - 1);
    c.prefix = "req-" + std::to_string(t) + "-";
    next(c);
  };
  auto window_start = [&] {
    snapshot(before);
    at_window_start();
  };
  auto window_end = [&] {
    snapshot(after);
    at_window_end();
  };
  if (o.async_callers) {
    drive_async(o, cell, callers, start, window_start, window_end);
  } else {
    drive(o, cell, callers, body, window_start, window_end);
  }
  for (std::size_t i = 0; i < n; ++i) {
    cell.batches += after[i].batches - before[i].batches;
    cell.commands += after[i].commands - before[i].commands;
    cell.gc_apply_ns += after[i].apply_ns - before[i].apply_ns;
    cell.gc_sync_ns += after[i].sync_ns - before[i].sync_ns;
    cell.gc_syncs += after[i].syncs - before[i].syncs;
    cell.gc_inline += after[i].answered_inline - before[i].answered_inline;
  }
}

// audit() clean over every account of the cell; else the failure is set.
bool audit_clean(tollgate::Ledger& ledger, Cell& cell) {
  auto audit = ledger.audit(std::nullopt);
  if (!audit) {
    cell.failure = "audit: " + audit.error().detail;
    return false;
  }
  if (!audit->violations.empty()) {
    cell.failure = "audit: " + std::to_string(audit->violations.size()) + " violations, first: " +
                   audit->violations.front().account_id + ": " + audit->violations.front().message;
    return false;
  }
  if (audit->accounts_checked != cell.accounts) {
    cell.failure = "audit checked " + std::to_string(audit->accounts_checked) + " accounts";
    return false;
  }
  return true;
}

Cell run_tollgate(const Options& o, const std::string& dir, bool hot, int callers, int lots) {
  Cell cell;
  cell.impl = o.async_callers ? "tollgate" : "tollgate-threads";
  cell.workload = hot ? "hot" : "spread";
  cell.callers = callers;
  cell.accounts = hot ? 1 : o.accounts;
  cell.lots = lots;
  const std::string path = dir + "/tollgate-" + cell.workload + "-" + std::to_string(callers) +
                           (lots ? "-lots" + std::to_string(lots) : std::string()) + ".db";
  remove_db(path);

  tollgate::SystemClock clock;
  tollgate::SqliteOptions so;
  so.path = path;
  so.batch_wal_writes = o.batch_wal_writes;
  if (o.checkpoint_interval_ms >= 0) so.checkpoint_interval_ms = o.checkpoint_interval_ms;
  if (o.page_size > 0) so.page_size_bytes = o.page_size;
  if (o.wal_autocheckpoint_pages >= 0) so.wal_autocheckpoint_pages = o.wal_autocheckpoint_pages;
  auto opened = tollgate::SqliteStore::open(so, clock);
  if (!opened) {
    cell.failure = "open: " + opened.error().detail;
    return cell;
  }
  std::unique_ptr<tollgate::SqliteStore> store = std::move(opened.value());
  {
    tollgate::LedgerOptions lo;
    lo.reaper_interval_ms = 0;
    lo.id_seed = kSeed;
    tollgate::Ledger ledger(*store, clock, lo);

    const std::vector<std::string> ids = account_ids(hot, cell.accounts);
    if (!fund_accounts(ledger, ids, lots, cell.failure)) return cell;
    run_lifecycles(o, cell, {&ledger}, ids, hot, callers, [] {}, [] {});
    if (!cell.failure.empty()) return cell;

    // Verify: audit clean, every completed lifecycle is in `used`, nothing left reserved.
    if (!audit_clean(ledger, cell)) return cell;
    ledger.stop();
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    cell.failure = "verify: open failed";
    sqlite3_close(db);
    return cell;
  }
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT coalesce(sum(used),0), coalesce(sum(reserved),0), coalesce(sum(active_holds),0), "
                     "count(*) FROM accounts",
                     -1, &q, nullptr);
  if (q && sqlite3_step(q) == SQLITE_ROW) {
    const std::int64_t used = sqlite3_column_int64(q, 0), reserved = sqlite3_column_int64(q, 1),
                       active = sqlite3_column_int64(q, 2);
    if (used != cell.total || reserved != 0 || active != 0) {
      cell.failure = "verify: used " + std::to_string(used) + " (lifecycles " + std::to_string(cell.total) +
                     "), reserved " + std::to_string(reserved) + ", active holds " + std::to_string(active);
    } else if (cell.lots > 0) {
      sqlite3_stmt* l = nullptr;
      sqlite3_prepare_v2(db, kLotsCheckSql, -1, &l, nullptr);
      if (l && sqlite3_step(l) == SQLITE_ROW) {
        cell.failure = lots_failure(cell, sqlite3_column_int64(l, 0), sqlite3_column_int64(l, 1), used);
        cell.verified = cell.failure.empty();
      } else {
        cell.failure = std::string("verify lots: ") + sqlite3_errmsg(db);
      }
      sqlite3_finalize(l);
    } else {
      cell.verified = true;
    }
  } else {
    cell.failure = std::string("verify: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  store.reset();
  if (!o.keep) remove_db(path);
  return cell;
}

// --- tollgate on PostgreSQL ------------------------------------------------------------------------
// A store that times the batches its ledger's writer applies (wall time of apply(): BEGIN, every
// command's statements, the durable COMMIT) and forwards everything else.
class TimedStore final : public tollgate::Store {
 public:
  explicit TimedStore(std::unique_ptr<tollgate::Store> inner) : inner_(std::move(inner)) {}

  tollgate::Status apply(std::span<const tollgate::Command> commands,
                         std::vector<tollgate::CommandResult>& results) override {
    const auto t0 = Clock::now();
    tollgate::Status status = inner_->apply(commands, results);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    // One writer thread per store: plain read-modify-write of the atomics is enough.
    calls_.fetch_add(1, std::memory_order_relaxed);
    if (commands.size() == 1) singles_.fetch_add(1, std::memory_order_relaxed);
    ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    if (commands.size() > max_batch_.load(std::memory_order_relaxed)) {
      max_batch_.store(commands.size(), std::memory_order_relaxed);
    }
    return status;
  }
  tollgate::Status sync() override { return inner_->sync(); }
  tollgate::Result<tollgate::Account> get_account(std::string_view id) override { return inner_->get_account(id); }
  tollgate::Result<tollgate::Hold> get_hold(std::string_view id) override { return inner_->get_hold(id); }
  tollgate::ListReads& lists() override { return inner_->lists(); }
  tollgate::jobs::JobReads& jobs() override { return inner_->jobs(); }
  tollgate::coord::CoordReads& coord() override { return inner_->coord(); }
  tollgate::webhooks::WebhookReads& webhooks() override { return inner_->webhooks(); }
  tollgate::payments::PaymentReads& payments() override { return inner_->payments(); }
  tollgate::prices::PriceReads& prices() override { return inner_->prices(); }
  tollgate::Result<tollgate::EventPage> read_events(std::string_view id, std::int64_t after,
                                                    std::int64_t limit) override {
    return inner_->read_events(id, after, limit);
  }
  tollgate::Result<tollgate::EventPage> read_feed(std::int64_t after, std::int64_t limit) override {
    return inner_->read_feed(after, limit);
  }
  tollgate::Result<std::int64_t> last_event_id() override { return inner_->last_event_id(); }
  tollgate::Result<tollgate::AuditReport> audit(std::optional<std::string_view> id) override {
    return inner_->audit(id);
  }
  tollgate::Result<tollgate::AuditPage> audit_range(std::string_view after, std::int64_t limit) override {
    return inner_->audit_range(after, limit);
  }
  tollgate::Result<tollgate::LedgerStats> stats() override { return inner_->stats(); }
  tollgate::Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit) override {
    return inner_->list_account_ids(after, limit);
  }
  tollgate::Result<tollgate::KeyLookup> find_key(std::string_view h) override {
    return inner_->find_key(h);
  }
  tollgate::Result<bool> has_admin_key() override { return inner_->has_admin_key(); }
  tollgate::Status ping() override { return inner_->ping(); }
  std::int64_t now_ms() override { return inner_->now_ms(); }

  struct Totals {
    std::uint64_t calls = 0, ns = 0, singles = 0;
  };
  Totals totals() const { return {calls_.load(), ns_.load(), singles_.load()}; }
  void reset_max_batch() { max_batch_.store(0); }
  std::uint64_t max_batch() const { return max_batch_.load(); }

 private:
  std::unique_ptr<tollgate::Store> inner_;
  std::atomic<std::uint64_t> calls_{0}, ns_{0}, singles_{0}, max_batch_{0};
};

Cell run_tollgate_pg(const Options& o, bool hot, int callers, int lots, int cell_no) {
  Cell cell;
  cell.impl = o.async_callers ? "tollgate" : "tollgate-threads";
  cell.workload = hot ? "hot" : "spread";
  cell.callers = callers;
  cell.accounts = hot ? 1 : o.accounts;
  cell.lots = lots;
  cell.instances = o.instances;

  // Declared first: dropped after the stores closed their connections.
  std::optional<BenchSchema> schema;
  try {
    schema.emplace(o.database, "ledger_bench_" + std::to_string(getpid()) + "_" + std::to_string(cell_no), o.keep);
  } catch (const std::exception& e) {
    cell.failure = std::string("create schema: ") + e.what();
    return cell;
  }
  tollgate::SystemClock clock;  // the reaper's (off); the stores decide with the database's clock
  std::vector<std::unique_ptr<TimedStore>> stores;
  for (int i = 0; i < o.instances; ++i) {
    tollgate::PgOptions po;
    po.uri = schema->uri();
    po.readers_max = 2;  // the audit; the bench reads nothing else
    auto opened = tollgate::PgStore::open(po);
    if (!opened) {
      cell.failure = "open instance " + std::to_string(i) + ": " + opened.error().detail;
      return cell;
    }
    stores.push_back(std::make_unique<TimedStore>(std::move(opened.value())));
  }
  {
    std::vector<std::unique_ptr<tollgate::Ledger>> ledgers;
    std::vector<tollgate::Ledger*> ledger_ptrs;
    for (int i = 0; i < o.instances; ++i) {
      tollgate::LedgerOptions lo;
      lo.reaper_interval_ms = 0;
      lo.id_seed = kSeed + static_cast<std::uint64_t>(i);
      ledgers.push_back(std::make_unique<tollgate::Ledger>(*stores[static_cast<std::size_t>(i)], clock, lo));
      ledger_ptrs.push_back(ledgers.back().get());
    }
    const std::vector<std::string> ids = account_ids(hot, cell.accounts);
    if (!fund_accounts(*ledgers.front(), ids, lots, cell.failure)) return cell;

    std::vector<TimedStore::Totals> before(stores.size()), after(stores.size());
    run_lifecycles(
        o, cell, ledger_ptrs, ids, hot, callers,
        [&] {
          for (std::size_t i = 0; i < stores.size(); ++i) {
            before[i] = stores[i]->totals();
            stores[i]->reset_max_batch();
          }
        },
        [&] {
          for (std::size_t i = 0; i < stores.size(); ++i) {
            after[i] = stores[i]->totals();
            cell.max_batch = std::max<std::uint64_t>(cell.max_batch, stores[i]->max_batch());
          }
        });
    for (std::size_t i = 0; i < stores.size(); ++i) {
      cell.apply_calls += after[i].calls - before[i].calls;
      cell.apply_ns += after[i].ns - before[i].ns;
      cell.single_batches += after[i].singles - before[i].singles;
    }
    if (!cell.failure.empty()) return cell;

    // Verify: audit clean, every completed lifecycle is in `used`, nothing left reserved or held.
    if (!audit_clean(*ledgers.front(), cell)) return cell;
    for (auto& ledger : ledgers) ledger->stop();
  }
  try {
    auto conn = tollgate::pg::Conn::connect(schema->uri(), tollgate::pg::ConnectOptions{});
    auto sums = conn->exec(
        "SELECT coalesce(sum(used),0), coalesce(sum(reserved),0), coalesce(sum(active_holds),0), count(*) "
        "FROM accounts");
    const std::int64_t used = sums.int64(0, 0), reserved = sums.int64(0, 1), active = sums.int64(0, 2),
                       accounts = sums.int64(0, 3);
    const std::int64_t active_rows = conn->exec("SELECT count(*) FROM holds WHERE status = 'active'").int64(0, 0);
    if (used != cell.total || reserved != 0 || active != 0 || active_rows != 0 || accounts != cell.accounts) {
      cell.failure = "verify: used " + std::to_string(used) + " (lifecycles " + std::to_string(cell.total) +
                     "), reserved " + std::to_string(reserved) + ", active holds " + std::to_string(active) + " (" +
                     std::to_string(active_rows) + " hold rows), accounts " + std::to_string(accounts);
    } else if (cell.lots > 0) {
      auto l = conn->exec(kLotsCheckSql);
      cell.failure = lots_failure(cell, l.int64(0, 0), l.int64(0, 1), used);
      cell.verified = cell.failure.empty();
    } else {
      cell.verified = true;
    }
  } catch (const std::exception& e) {
    cell.failure = std::string("verify: ") + e.what();
  }
  stores.clear();
  return cell;
}

// What the bench prints about the server: version, fsync, and synchronous_commit as the store's
// sessions see it (pg::Conn sets it on, as PgStore's connections do).
struct ServerInfo {
  std::string version, synchronous_commit, fsync;
};

ServerInfo server_info(const std::string& uri) {
  ServerInfo info;
  auto conn = tollgate::pg::Conn::connect(uri, tollgate::pg::ConnectOptions{});
  info.version = conn->exec("SHOW server_version").text(0, 0);
  info.synchronous_commit = conn->exec("SHOW synchronous_commit").text(0, 0);
  info.fsync = conn->exec("SHOW fsync").text(0, 0);
  return info;
}

// --- baseline -----------------------------------------------------------------------------------
struct RawDb {
  sqlite3* db = nullptr;
  ~RawDb() {
    if (db) sqlite3_close_v2(db);
  }
};

bool exec(sqlite3* db, const char* sql, std::string& failure) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    failure = std::string(sql) + ": " + (err ? err : sqlite3_errmsg(db));
    sqlite3_free(err);
    return false;
  }
  return true;
}

// The textbook durable settings (WAL, synchronous=FULL: each COMMIT flushes), tollgate's busy
// time-out, cache size and (for a new file) page size.
bool open_raw(const std::string& path, RawDb& raw, std::string& failure, int page_size) {
  tollgate::SqliteOptions defaults;
  if (sqlite3_open_v2(path.c_str(), &raw.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    failure = "open " + path + ": " + sqlite3_errmsg(raw.db);
    return false;
  }
  sqlite3_busy_timeout(raw.db, defaults.busy_timeout_ms);
  const std::string cache = "PRAGMA cache_size=-" + std::to_string(defaults.cache_size_kib);
  const int page = page_size > 0 ? page_size : defaults.page_size_bytes;
  if (page > 0 && !exec(raw.db, ("PRAGMA page_size=" + std::to_string(page)).c_str(), failure)) return false;
  return exec(raw.db, "PRAGMA journal_mode=WAL", failure) && exec(raw.db, "PRAGMA synchronous=FULL", failure) &&
         exec(raw.db, "PRAGMA temp_store=MEMORY", failure) && exec(raw.db, cache.c_str(), failure);
}

// Steps an autocommit statement to completion, retrying SQLITE_BUSY; returns sqlite3_changes or -1.
int step_retrying(sqlite3* db, sqlite3_stmt* stmt, std::uint64_t& busy, std::string& failure) {
  for (;;) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
      sqlite3_reset(stmt);
      return sqlite3_changes(db);
    }
    sqlite3_reset(stmt);
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
      ++busy;
      continue;
    }
    failure = std::string("step: ") + sqlite3_errmsg(db);
    return -1;
  }
}

Cell run_baseline(const Options& o, const std::string& dir, bool hot, int callers) {
  Cell cell;
  cell.impl = "baseline";
  cell.workload = hot ? "hot" : "spread";
  cell.callers = callers;
  cell.accounts = hot ? 1 : o.accounts;
  const std::string path = dir + "/baseline-" + cell.workload + "-" + std::to_string(callers) + ".db";
  remove_db(path);
  {
    RawDb setup;
    if (!open_raw(path, setup, cell.failure, o.page_size)) return cell;
    if (!exec(setup.db,
              "CREATE TABLE accounts (id INTEGER PRIMARY KEY, available INTEGER NOT NULL, "
              "reserved INTEGER NOT NULL, used INTEGER NOT NULL)",
              cell.failure) ||
        !exec(setup.db, "BEGIN", cell.failure))
      return cell;
    sqlite3_stmt* ins = nullptr;
    sqlite3_prepare_v2(setup.db, "INSERT INTO accounts VALUES (?, ?, 0, 0)", -1, &ins, nullptr);
    for (std::int64_t i = 0; i < cell.accounts; ++i) {
      sqlite3_bind_int64(ins, 1, i);
      sqlite3_bind_int64(ins, 2, kCreditPerAccount);
      sqlite3_step(ins);
      sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    if (!exec(setup.db, "COMMIT", cell.failure)) return cell;
  }
  // One connection per caller, opened before the clock starts.
  std::vector<RawDb> conns(static_cast<std::size_t>(callers));
  for (auto& c : conns) {
    if (!open_raw(path, c, cell.failure, o.page_size)) return cell;
  }
  auto body = [&](int t, CallerStats& s, std::atomic<int>& phase) {
    sqlite3* db = conns[static_cast<std::size_t>(t)].db;
    sqlite3_stmt* reserve = nullptr;
    sqlite3_stmt* commit = nullptr;
    sqlite3_prepare_v3(db,
                       "UPDATE accounts SET available = available - 1, reserved = reserved + 1 "
                       "WHERE id = ? AND available >= 1",
                       -1, SQLITE_PREPARE_PERSISTENT, &reserve, nullptr);
    sqlite3_prepare_v3(db, "UPDATE accounts SET reserved = reserved - 1, used = used + 1 WHERE id = ?", -1,
                       SQLITE_PREPARE_PERSISTENT, &commit, nullptr);
    std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(t));
    std::uniform_int_distribution<std::int64_t> pick(0, cell.accounts - 1);
    while (phase.load(std::memory_order_acquire) != kStop) {
      const std::int64_t id = hot ? 0 : pick(rng);
      const bool ok = timed(s, phase, [&] {
        sqlite3_bind_int64(reserve, 1, id);
        const int held = step_retrying(db, reserve, s.busy, s.failure);
        if (held != 1) {
          if (held == 0) s.failure = "baseline reserve refused: no credits";
          return false;
        }
        sqlite3_bind_int64(commit, 1, id);
        if (step_retrying(db, commit, s.busy, s.failure) != 1) {
          if (s.failure.empty()) s.failure = "baseline commit changed no row";
          return false;
        }
        return true;
      });
      if (!ok) break;
    }
    sqlite3_finalize(reserve);
    sqlite3_finalize(commit);
  };
  drive(o, cell, callers, body, [] {}, [] {});
  conns.clear();
  if (!cell.failure.empty()) return cell;

  RawDb check;
  if (!open_raw(path, check, cell.failure, o.page_size)) return cell;
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(check.db,
                     "SELECT coalesce(sum(used),0), coalesce(sum(reserved),0), "
                     "coalesce(sum(available + reserved + used),0), count(*) FROM accounts",
                     -1, &q, nullptr);
  if (q && sqlite3_step(q) == SQLITE_ROW) {
    const std::int64_t used = sqlite3_column_int64(q, 0), reserved = sqlite3_column_int64(q, 1),
                       sum = sqlite3_column_int64(q, 2);
    if (used != cell.total || reserved != 0 || sum != kCreditPerAccount * cell.accounts) {
      cell.failure = "verify: used " + std::to_string(used) + " (lifecycles " + std::to_string(cell.total) +
                     "), reserved " + std::to_string(reserved);
    } else {
      cell.verified = true;
    }
  } else {
    cell.failure = std::string("verify: ") + sqlite3_errmsg(check.db);
  }
  sqlite3_finalize(q);
  sqlite3_close_v2(check.db);
  check.db = nullptr;
  if (!o.keep) remove_db(path);
  return cell;
}

// --- report -------------------------------------------------------------------------------------
std::string num(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const Cell* find(const std::vector<Cell>& cells, const std::string& impl, const std::string& workload, int callers) {
  for (const auto& c : cells) {
    if (c.impl == impl && c.workload == workload && c.callers == callers) return &c;
  }
  return nullptr;
}

std::string rate_or_null(const Cell* c) { return c ? num(c->per_s) : "null"; }

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  bool created = false;
  std::string dir;
  FsInfo fsi;
  ServerInfo server;
  if (o.postgres()) {
    try {
      server = server_info(o.database);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ledger_bench: cannot reach %s: %s\n", redact_uri(o.database).c_str(), e.what());
      return 2;
    }
    std::printf("tollgate ledger bench: PostgreSQL %s (synchronous_commit=%s, fsync=%s), %d instance%s, %u cpus, "
                "%.2f s per cell after %.2f s warm-up%s\n",
                server.version.c_str(), server.synchronous_commit.c_str(), server.fsync.c_str(), o.instances,
                o.instances == 1 ? "" : "s", std::thread::hardware_concurrency(), o.seconds, o.warmup,
                o.quick ? " (quick)" : "");
    std::printf("database: %s (a fresh schema per cell)\n", redact_uri(o.database).c_str());
    if (server.synchronous_commit != "on" || server.fsync != "on") {
      std::fprintf(stderr, "ledger_bench: WARNING: synchronous_commit=%s fsync=%s: commits are not durable\n",
                   server.synchronous_commit.c_str(), server.fsync.c_str());
    }
  } else {
    dir = pick_dir(o, created);
    fsi = fs_info(dir);
    std::printf("tollgate ledger bench: sqlite %s, %u cpus, %.2f s per cell after %.2f s warm-up%s\n",
                sqlite3_libversion(), std::thread::hardware_concurrency(), o.seconds, o.warmup,
                o.quick ? " (quick)" : "");
    std::printf("database folder: %s (filesystem: %s)\n", dir.c_str(), fsi.type.c_str());
    if (fsi.memory) {
      std::fprintf(stderr, "ledger_bench: %s is on %s: commits would not be durable%s\n", dir.c_str(),
                   fsi.type.c_str(), o.allow_tmpfs ? " (--allow-tmpfs: going on)" : "; pass another --dir");
      if (!o.allow_tmpfs) return 2;
    }
  }
  std::fflush(stdout);

  std::vector<Cell> cells;
  bool all_ok = true;
  int cell_no = 0;
  for (const bool hot : {true, false}) {
    if (hot ? !o.hot : !o.spread) continue;
    for (const bool is_tollgate : {true, false}) {
      if (is_tollgate ? !o.tollgate : !o.baseline) continue;
      for (int callers : o.callers) {
        // --lots: the tollgate cells of one caller count once per value, back to back.
        const std::vector<int> lot_counts = is_tollgate && !o.lots.empty() ? o.lots : std::vector<int>{0};
        for (const int lots : lot_counts) {
          Cell c = !is_tollgate   ? run_baseline(o, dir, hot, callers)
                   : o.postgres() ? run_tollgate_pg(o, hot, callers, lots, cell_no++)
                                  : run_tollgate(o, dir, hot, callers, lots);
          const std::string lots_note = lots ? "  " + std::to_string(lots) + " lots" : std::string();
          std::fprintf(stderr, "  %-8s %-6s %3d callers%s: %10.1f lifecycles/s  p50 %8.1f us  p99 %8.1f us%s%s\n",
                       c.impl.c_str(), c.workload.c_str(), c.callers, lots_note.c_str(), c.per_s, c.p50_us, c.p99_us,
                       c.verified ? "" : "  FAILED: ", c.verified ? "" : c.failure.c_str());
          if (!c.verified) all_ok = false;
          cells.push_back(std::move(c));
        }
      }
    }
  }
  if (created && !o.keep) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // The table (with --lots, a lots column after the callers).
  const bool with_lots = !o.lots.empty();
  auto lots_col = [&](const Cell* c) -> std::string {
    if (!with_lots) return "";
    char buf[16];
    if (c == nullptr) {
      std::snprintf(buf, sizeof buf, " %5s", "lots");
    } else if (c->lots > 0) {
      std::snprintf(buf, sizeof buf, " %5d", c->lots);
    } else {
      std::snprintf(buf, sizeof buf, " %5s", "-");
    }
    return buf;
  };
  if (o.postgres()) {
    std::printf("\n%-18s %9s %7s%s %14s %10s %10s %10s %10s %15s %9s %9s %9s %9s %s\n", "workload", "instances",
                "callers", lots_col(nullptr).c_str(), "lifecycles/s", "p50 us", "p99 us", "max us", "mean us",
                "per caller", "avg batch", "max batch", "batches/1", "batch ms", "verified");
  } else {
    std::printf("\n%-18s %7s%s %14s %10s %10s %10s %10s %15s %9s %9s %9s %9s %s\n", "workload", "callers",
                lots_col(nullptr).c_str(), "lifecycles/s", "p50 us", "p99 us", "max us", "mean us", "per caller", "avg batch", "apply us",
                "sync us", "inline", "verified");
  }
  for (const auto& c : cells) {
    const std::string extra = c.impl != "baseline"
                                  ? (c.batches ? num(static_cast<double>(c.commands) / c.batches) : "-")
                                  : "-";
    const std::string spread_per_caller = std::to_string(c.caller_min) + "-" + std::to_string(c.caller_max);
    if (o.postgres()) {
      const std::string batch_ms = c.apply_calls ? num(static_cast<double>(c.apply_ns) / c.apply_calls / 1e6, 2) : "-";
      const std::string singles =
          c.apply_calls ? num(100.0 * static_cast<double>(c.single_batches) / c.apply_calls, 0) + "%" : "-";
      std::printf("%-18s %9d %7d%s %14s %10s %10s %10s %10s %15s %9s %9s %9s %9s %s\n",
                  (c.impl + " " + c.workload).c_str(), c.instances, c.callers, lots_col(&c).c_str(), num(c.per_s).c_str(),
                  num(c.p50_us).c_str(), num(c.p99_us).c_str(), num(c.max_us).c_str(), num(c.mean_us).c_str(),
                  spread_per_caller.c_str(), extra.c_str(), std::to_string(c.max_batch).c_str(), singles.c_str(),
                  batch_ms.c_str(), c.verified ? "ok" : ("FAILED: " + c.failure).c_str());
    } else {
      const bool tg = c.impl != "baseline" && c.batches > 0;
      const std::string apply_us = tg ? num(static_cast<double>(c.gc_apply_ns) / c.batches / 1e3) : "-";
      const std::string sync_us = tg && c.gc_syncs ? num(static_cast<double>(c.gc_sync_ns) / c.gc_syncs / 1e3) : "-";
      const std::string inline_share = tg ? num(100.0 * static_cast<double>(c.gc_inline) / c.batches, 0) + "%" : "-";
      std::printf("%-18s %7d%s %14s %10s %10s %10s %10s %15s %9s %9s %9s %9s %s\n", (c.impl + " " + c.workload).c_str(),
                  c.callers, lots_col(&c).c_str(), num(c.per_s).c_str(), num(c.p50_us).c_str(), num(c.p99_us).c_str(), num(c.max_us).c_str(),
                  num(c.mean_us).c_str(), spread_per_caller.c_str(), extra.c_str(), apply_us.c_str(), sync_us.c_str(),
                  inline_share.c_str(), c.verified ? "ok" : ("FAILED: " + c.failure).c_str());
    }
  }

  // The headline: hot account, 64 callers (or the largest caller count run).
  const int headline = o.callers.end() != std::find(o.callers.begin(), o.callers.end(), 64)
                           ? 64
                           : *std::max_element(o.callers.begin(), o.callers.end());
  const Cell* th = find(cells, o.async_callers ? "tollgate" : "tollgate-threads", "hot", headline);
  const Cell* bh = find(cells, "baseline", "hot", headline);
  const Cell* ts = find(cells, o.async_callers ? "tollgate" : "tollgate-threads", "spread", headline);
  const Cell* bs = find(cells, "baseline", "spread", headline);
  const bool have_ratio = th && bh && bh->per_s > 0;
  const double ratio = have_ratio ? th->per_s / bh->per_s : 0;
  // A lone caller (issue 8): the hot account, one caller, against the baseline's one caller.
  const Cell* t1 = find(cells, o.async_callers ? "tollgate" : "tollgate-threads", "hot", 1);
  const Cell* b1 = find(cells, "baseline", "hot", 1);
  const bool have_one = t1 && b1 && b1->per_s > 0;
  const double one_ratio = have_one ? t1->per_s / b1->per_s : 0;
  // Targets of issue 8: hot, 64 callers: >= 25,000 lifecycles/s and >= 8x the baseline; one caller:
  // >= 1.0x the baseline with a p50 no worse than its.
  const bool many_met = have_ratio && ratio >= 8.0 && th->per_s >= 25'000.0;
  const bool one_met = have_one && one_ratio >= 1.0 && t1->p50_us <= b1->p50_us;
  const bool targets_met = many_met && one_met;
  std::printf("(mean us = callers / rate, Little's law; per caller = fewest-most lifecycles one caller "
              "completed in the window)\n");
  if (!o.postgres()) {
    std::printf("(apply us = the writer's mean time in apply() per batch: load, decide, write, COMMIT; sync us = "
                "mean time of one WAL flush; inline = share of the batches the writer flushed and answered "
                "itself)\n");
  }
  if (o.postgres()) {
    std::printf("(avg/max batch = commands per group-commit transaction; batches/1 = share of the batches that held "
                "one command; batch ms = mean wall time of one batch's apply(), BEGIN to durable COMMIT)\n");
    std::printf("\n%d callers, %d instance%s: hot %s lifecycles/s, spread %s lifecycles/s (the pgbench baseline and "
                "the ratios: scripts/bench postgres)\n",
                headline, o.instances, o.instances == 1 ? "" : "s", rate_or_null(th).c_str(), rate_or_null(ts).c_str());
  } else {
    std::printf("\nhot account, %d callers: tollgate %s/s, baseline %s/s, ratio %s (targets: >= 8x and >= 25000/s: %s)\n",
                headline, rate_or_null(th).c_str(), rate_or_null(bh).c_str(), have_ratio ? num(ratio, 2).c_str() : "-",
                many_met ? "met" : "NOT met");
    std::printf("hot account, 1 caller: tollgate %s/s (p50 %s us), baseline %s/s (p50 %s us), ratio %s (targets: >= "
                "1.0x, p50 no worse: %s)\n",
                rate_or_null(t1).c_str(), t1 ? num(t1->p50_us).c_str() : "-", rate_or_null(b1).c_str(),
                b1 ? num(b1->p50_us).c_str() : "-", have_one ? num(one_ratio, 2).c_str() : "-",
                one_met ? "met" : "NOT met");
  }

  // --lots: per workload and caller count, each value's rate beside the first's, and the ratio of the
  // last value to the first (the aim: 20 lots within 10% of 1 lot: ratio >= 0.9).
  constexpr double kLotsRatioMin = 0.9;
  std::string lots_json;
  bool lots_met = true;
  if (with_lots) {
    const std::string impl = o.async_callers ? "tollgate" : "tollgate-threads";
    std::printf("\ncredit lots: lifecycles/s with each account's live lots (same run, cells back to back)\n");
    std::printf("%-10s %7s", "workload", "callers");
    for (int n : o.lots) std::printf(" %12s", (std::to_string(n) + " lots").c_str());
    std::printf(" %10s\n", o.lots.size() > 1 ? (std::to_string(o.lots.back()) + "/" + std::to_string(o.lots.front())).c_str()
                                              : "ratio");
    lots_json = ",\"lots\":{\"values\":[";
    for (std::size_t i = 0; i < o.lots.size(); ++i) lots_json += (i ? "," : "") + std::to_string(o.lots[i]);
    lots_json += "],\"compare\":[";
    bool first_row = true;
    for (const char* workload : {"hot", "spread"}) {
      for (int callers : o.callers) {
        std::vector<const Cell*> row;
        for (int n : o.lots) {
          const Cell* found = nullptr;
          for (const auto& c : cells) {
            if (c.impl == impl && c.workload == workload && c.callers == callers && c.lots == n) found = &c;
          }
          row.push_back(found);
        }
        if (row.front() == nullptr) continue;
        const Cell* first = row.front();
        const Cell* last = row.back();
        const bool have = first && last && first->per_s > 0;
        const double r = have ? last->per_s / first->per_s : 0;
        if (!have || r < kLotsRatioMin) lots_met = false;
        std::printf("%-10s %7d", workload, callers);
        for (const Cell* c : row) std::printf(" %12s", rate_or_null(c).c_str());
        std::printf(" %10s\n", have ? num(r, 3).c_str() : "-");
        lots_json += std::string(first_row ? "" : ",") + "{\"workload\":" + json_string(workload) +
                     ",\"callers\":" + std::to_string(callers) + ",\"lifecycles_per_s\":{";
        for (std::size_t i = 0; i < row.size(); ++i) {
          lots_json += (i ? ",\"" : "\"") + std::to_string(o.lots[i]) + "\":" + rate_or_null(row[i]);
        }
        lots_json += "},\"ratio\":" + (have ? num(r, 3) : std::string("null")) + "}";
        first_row = false;
      }
    }
    lots_json += "],\"ratio_min\":" + num(kLotsRatioMin, 2) + ",\"met\":" + (lots_met ? "true" : "false") + "}";
    std::printf("(ratio = the last lot count's rate over the first's; aim: >= %.2f: %s)\n", kLotsRatioMin,
                lots_met ? "met" : "NOT met");
  }

  auto avg_batch = [](const Cell* c) {
    return c && c->batches ? num(static_cast<double>(c->commands) / c->batches, 2) : std::string("null");
  };
  std::string json;
  if (o.postgres()) {
    json = "{\"bench\":\"ledger_postgres\",\"backend\":\"postgres\"";
    json += std::string(",\"priced\":") + (o.priced ? "true" : "false");
    json += ",\"instances\":" + std::to_string(o.instances);
    json += ",\"tollgate_lifecycles_per_s\":" + rate_or_null(th);
    json += ",\"p50_us\":" + (th ? num(th->p50_us) : std::string("null"));
    json += ",\"p99_us\":" + (th ? num(th->p99_us) : std::string("null"));
    json += ",\"avg_batch\":" + avg_batch(th);
    json += ",\"spread_tollgate_lifecycles_per_s\":" + rate_or_null(ts);
    json += ",\"spread_p50_us\":" + (ts ? num(ts->p50_us) : std::string("null"));
    json += ",\"spread_p99_us\":" + (ts ? num(ts->p99_us) : std::string("null"));
    json += ",\"spread_avg_batch\":" + avg_batch(ts);
    json += ",\"callers\":" + std::to_string(headline);
    json += ",\"verified\":" + std::string(all_ok ? "true" : "false");
    json += ",\"seconds\":" + num(o.seconds, 2) + ",\"warmup\":" + num(o.warmup, 2) +
            ",\"quick\":" + (o.quick ? "true" : "false");
    json += std::string(",\"caller_mode\":") + (o.async_callers ? "\"async\"" : "\"threads\"");
    json += ",\"server_version\":" + json_string(server.version);
    json += ",\"synchronous_commit\":" + json_string(server.synchronous_commit);
    json += ",\"fsync\":" + json_string(server.fsync);
  } else {
    json = "{\"bench\":\"ledger\"";
    json += std::string(",\"priced\":") + (o.priced ? "true" : "false");
    json += ",\"tollgate_lifecycles_per_s\":" + rate_or_null(th);
    json += ",\"baseline_lifecycles_per_s\":" + rate_or_null(bh);
    json += ",\"ratio\":" + (have_ratio ? num(ratio, 2) : std::string("null"));
    json += ",\"spread_tollgate_lifecycles_per_s\":" + rate_or_null(ts);
    json += ",\"spread_baseline_lifecycles_per_s\":" + rate_or_null(bs);
    json += ",\"spread_ratio\":" + (ts && bs && bs->per_s > 0 ? num(ts->per_s / bs->per_s, 2) : std::string("null"));
    json += ",\"p50_us\":" + (th ? num(th->p50_us) : std::string("null"));
    json += ",\"p99_us\":" + (th ? num(th->p99_us) : std::string("null"));
    json += ",\"callers\":" + std::to_string(headline);
    json += ",\"one_caller_ratio\":" + (have_one ? num(one_ratio, 2) : std::string("null"));
    json += ",\"one_caller_p50_us\":" + (t1 ? num(t1->p50_us) : std::string("null"));
    json += ",\"one_caller_baseline_p50_us\":" + (b1 ? num(b1->p50_us) : std::string("null"));
    json += ",\"targets\":{\"ratio_min\":8,\"tollgate_lifecycles_per_s_min\":25000,\"one_caller_ratio_min\":1.0}";
    json += std::string(",\"targets_met\":") + (targets_met ? "true" : "false");
    json += ",\"verified\":" + std::string(all_ok ? "true" : "false");
    json += ",\"seconds\":" + num(o.seconds, 2) + ",\"quick\":" + (o.quick ? "true" : "false");
    json += std::string(",\"caller_mode\":") + (o.async_callers ? "\"async\"" : "\"threads\"");
    json += ",\"fs_type\":" + json_string(fsi.type);
    json += ",\"sqlite_version\":" + json_string(sqlite3_libversion());
  }
  json += lots_json;
  json += ",\"cells\":[";
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    if (i) json += ",";
    json += "{\"impl\":" + json_string(c.impl) + ",\"workload\":" + json_string(c.workload) +
            ",\"callers\":" + std::to_string(c.callers) + ",\"accounts\":" + std::to_string(c.accounts) +
            (with_lots ? ",\"lots\":" + std::to_string(c.lots) : std::string()) + ",\"lifecycles_per_s\":" + num(c.per_s) + ",\"p50_us\":" + num(c.p50_us) +
            ",\"p90_us\":" + num(c.p90_us) + ",\"p99_us\":" + num(c.p99_us) + ",\"max_us\":" + num(c.max_us) +
            ",\"mean_us\":" + num(c.mean_us) + ",\"caller_min_lifecycles\":" + std::to_string(c.caller_min) +
            ",\"caller_max_lifecycles\":" + std::to_string(c.caller_max) +
            ",\"lifecycles_measured\":" + std::to_string(c.measured) +
            ",\"lifecycles_total\":" + std::to_string(c.total) + ",\"window_s\":" + num(c.window_s, 3);
    if (c.impl != "baseline") {
      json += ",\"batches\":" + std::to_string(c.batches) + ",\"commands\":" + std::to_string(c.commands) +
              ",\"avg_batch\":" + (c.batches ? num(static_cast<double>(c.commands) / c.batches, 2) : "null") +
              ",\"apply_us_per_batch\":" +
              (c.batches ? num(static_cast<double>(c.gc_apply_ns) / c.batches / 1e3) : std::string("null")) +
              ",\"syncs\":" + std::to_string(c.gc_syncs) + ",\"sync_us_mean\":" +
              (c.gc_syncs ? num(static_cast<double>(c.gc_sync_ns) / c.gc_syncs / 1e3) : std::string("null")) +
              ",\"answered_inline\":" + std::to_string(c.gc_inline);
    } else {
      json += ",\"busy_retries\":" + std::to_string(c.busy_retries);
    }
    if (o.postgres()) {
      json += ",\"instances\":" + std::to_string(c.instances) + ",\"max_batch\":" + std::to_string(c.max_batch) +
              ",\"single_command_batches\":" + std::to_string(c.single_batches) +
              ",\"batch_ms_mean\":" +
              (c.apply_calls ? num(static_cast<double>(c.apply_ns) / c.apply_calls / 1e6, 3) : std::string("null"));
    }
    json += std::string(",\"verified\":") + (c.verified ? "true" : "false");
    if (!c.failure.empty()) json += ",\"failure\":" + json_string(c.failure);
    json += "}";
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  return all_ok ? 0 : 1;
}
