// tollgate bench: the read-first lever of lock acquisition (issue 11), measured against its absence.
//
// Issue 11 asked: answer an acquire of a lock plainly held by another owner from a read (no batch,
// no row lock, no write, no flush), since on PostgreSQL a refused INSERT … ON CONFLICT still writes
// WAL and waits for a flush. tollgate's batches do not insert blindly: a batch loads the row (FOR
// UPDATE on PostgreSQL), decides in memory and writes only what changed, so a refusal writes
// nothing of its own and shares the batch's flush. This bench measures whether the read pays anyway;
// it did not (docs/internals/benchmarks.md, "Coordination"), so Ledger::lock goes straight to the batch and the
// "read" cells below do the read here, with the batch's own rule (coord::decide_lock on the row read):
//
//   refused/read    read the key "held" (which the bench holds as another owner), refuse from the read
//   refused/batch   Ledger::run(the same acquire): the path tollgate takes
//   pairs/read      the read, then (the lock is free) Ledger::run(acquire), then Ledger::run(release):
//                   what the read costs an acquire that is granted
//   pairs/batch     Ledger::run(acquire), then Ledger::run(release)
//
// Cells run interleaved (every cell once per round, --rounds rounds) so that a drift of the machine
// touches all of them; each cell is a --seconds window after a short warm-up. On PostgreSQL each cell
// also reports the WAL it wrote per operation (pg_current_wal_lsn() before and after; other writers
// of the server — autovacuum — add noise). Verified: every refused acquire answered lock_held, every
// pair's acquire and release answered ok, each caller's key's fence equals the times it was granted,
// and the held lock still belongs to its owner with fence 1. Any failure: exit 1.
//
// Output: a table, then as the LAST line one JSON object (bench "lock").
// Options: --database URI (PostgreSQL; default: SQLite in --dir), --dir PATH (default a new folder
// under /var/tmp), --callers N (default 64), --seconds S (default 2), --rounds R (default 2),
// --quick (CI smoke: 8 callers, 0.2 s, 1 round).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_pg.h"
#include "core/clock.h"
#include "ledger/ledger.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"

namespace tg = tollgate;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string database;  // empty: SQLite
  std::string dir;
  int callers = 64;
  double seconds = 2;
  double warmup_s = 0.3;
  int rounds = 2;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "lock_bench: %s\n", why.c_str());
  std::exit(1);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--database") {
      a.database = value();
    } else if (arg == "--dir") {
      a.dir = value();
    } else if (arg == "--callers") {
      a.callers = std::atoi(value().c_str());
    } else if (arg == "--seconds") {
      a.seconds = std::atof(value().c_str());
    } else if (arg == "--rounds") {
      a.rounds = std::atoi(value().c_str());
    } else if (arg == "--quick") {
      a.callers = 8, a.seconds = 0.2, a.warmup_s = 0.05, a.rounds = 1;
    } else if (arg == "-h" || arg == "--help") {
      std::printf("usage: lock_bench [--database URI] [--dir PATH] [--callers N] [--seconds S] [--rounds R] [--quick]\n");
      std::exit(0);
    } else {
      die("unknown option " + arg + " (--help lists them)");
    }
  }
  if (a.callers < 1 || a.callers > 1024) die("--callers must be 1..1024");
  if (!(a.seconds > 0) || a.rounds < 1) die("--seconds must be > 0 and --rounds ≥ 1");
  return a;
}

tg::LockCommand acquire(const std::string& key, const std::string& owner) {
  tg::LockCommand c;
  c.op = tg::coord::LockOp::acquire;
  c.key = key;
  c.owner = owner;
  c.ttl_ms = 600'000;
  return c;
}

tg::LockCommand release(const std::string& key, const std::string& owner, std::int64_t fence) {
  tg::LockCommand c;
  c.op = tg::coord::LockOp::release;
  c.key = key;
  c.owner = owner;
  c.fence = fence;
  return c;
}

// WAL position of the PostgreSQL server, in bytes (0 on SQLite).
class WalMeter {
 public:
  explicit WalMeter(const std::string& uri) {
    if (!uri.empty()) conn_ = tg::pg::Conn::connect(uri, tg::pg::ConnectOptions{});
  }
  std::int64_t bytes() {
    if (!conn_) return 0;
    return conn_->exec("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").int64(0, 0);
  }
  bool on() const { return conn_ != nullptr; }

 private:
  std::unique_ptr<tg::pg::Conn> conn_;
};

struct Cell {
  std::string name;
  std::int64_t ops = 0;          // in the windows (a pair counts once)
  double seconds = 0;            // windows added up
  std::int64_t wal_bytes = 0;    // written during the windows
  std::vector<std::int64_t> latencies_us;
  std::string failure;
};

double percentile_us(std::vector<std::int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))]);
}

enum class Mode { refused_read, refused_batch, pairs_read, pairs_batch };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::refused_read: return "refused/read";
    case Mode::refused_batch: return "refused/batch";
    case Mode::pairs_read: return "pairs/read";
    case Mode::pairs_batch: return "pairs/batch";
  }
  return "?";
}

// The read-first path: lock_held from a read when the batch's rule refuses the row as read, else the
// batch decides (a stale read can only send to the batch, or refuse what was held when read).
tg::Result<tg::coord::LockOutcome> acquire_read_first(tg::Ledger& ledger, tg::LockCommand command) {
  if (auto read = ledger.get_lock(command.key); read && read->row) {
    auto decided = tg::coord::decide_lock(read->row, command, read->now_ms);
    if (!decided && decided.code() == tg::Code::lock_held) return decided.error();
  }
  return ledger.lock(std::move(command));
}

// One window of one cell: `callers` threads loop until the window ends.
void run_window(tg::Ledger& ledger, const Args& a, Mode mode, Cell& cell, WalMeter& wal,
                std::map<std::string, std::int64_t>& grants) {
  const int n = a.callers;
  std::atomic<int> phase{0};  // 0 warm-up, 1 measure, 2 stop
  std::vector<std::int64_t> ops(static_cast<std::size_t>(n), 0);
  std::vector<std::int64_t> granted(static_cast<std::size_t>(n), 0);
  std::vector<std::vector<std::int64_t>> lat(static_cast<std::size_t>(n));
  std::vector<std::string> failures(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      const auto i = static_cast<std::size_t>(t);
      const std::string owner = "caller-" + std::to_string(t);
      const std::string own_key = "pair-" + std::to_string(t);
      while (phase.load(std::memory_order_acquire) < 2 && failures[i].empty()) {
        const auto start = Clock::now();
        switch (mode) {
          case Mode::refused_read: {
            auto r = acquire_read_first(ledger, acquire("held", owner));
            if (r || r.code() != tg::Code::lock_held) failures[i] = "a refused acquire (read) did not answer lock_held";
            break;
          }
          case Mode::refused_batch: {
            auto r = ledger.run(acquire("held", owner));
            if (r || r.code() != tg::Code::lock_held) failures[i] = "a refused acquire (batch) did not answer lock_held";
            break;
          }
          case Mode::pairs_read:
          case Mode::pairs_batch: {
            std::int64_t fence = 0;
            if (mode == Mode::pairs_read) {
              auto r = acquire_read_first(ledger, acquire(own_key, owner));
              if (!r) { failures[i] = "acquire (read first): " + r.error().detail; break; }
              fence = r->lock.fence;
            } else {
              auto r = ledger.run(acquire(own_key, owner));
              if (!r) { failures[i] = "acquire (batch): " + r.error().detail; break; }
              fence = std::get<tg::coord::LockOutcome>(r.value()).lock.fence;
            }
            ++granted[i];
            auto r = ledger.run(release(own_key, owner, fence));
            if (!r) failures[i] = "release: " + r.error().detail;
            break;
          }
        }
        if (phase.load(std::memory_order_acquire) == 1) {
          ++ops[i];
          lat[i].push_back(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.warmup_s));
  const std::int64_t wal0 = wal.bytes();
  const auto t0 = Clock::now();
  phase.store(1, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  phase.store(2, std::memory_order_release);
  const auto t1 = Clock::now();
  const std::int64_t wal1 = wal.bytes();
  for (auto& th : threads) th.join();
  cell.seconds += std::chrono::duration<double>(t1 - t0).count();
  cell.wal_bytes += wal1 - wal0;
  for (int t = 0; t < n; ++t) {
    const auto i = static_cast<std::size_t>(t);
    cell.ops += ops[i];
    cell.latencies_us.insert(cell.latencies_us.end(), lat[i].begin(), lat[i].end());
    grants["pair-" + std::to_string(t)] += granted[i];
    if (cell.failure.empty() && !failures[i].empty()) cell.failure = failures[i];
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  tg::SystemClock clock;
  std::unique_ptr<tg::Store> store;
  std::optional<tg::bench::BenchSchema> schema;
  bool created_dir = false;
  std::string made_dir;
  std::string where;
  if (!a.database.empty()) {
    try {
      schema.emplace(a.database, "lock_bench_" + std::to_string(getpid()), false);
    } catch (const std::exception& e) {
      die(std::string("create schema: ") + e.what());
    }
    tg::PgOptions po;
    po.uri = schema->uri();
    po.readers_max = 4;
    auto opened = tg::PgStore::open(po);
    if (!opened) die("open PostgreSQL: " + opened.error().detail);
    store = std::move(opened).value();
    where = "PostgreSQL " + tg::bench::redact_uri(a.database);
  } else {
    std::string dir = a.dir;
    if (dir.empty()) {
      char tmpl[] = "/var/tmp/tollgate-lock-bench-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) die("mkdtemp under /var/tmp failed");
      dir = tmpl;
      created_dir = true;
    }
    tg::SqliteOptions so;
    so.path = dir + "/lock.db";
    auto opened = tg::SqliteStore::open(so, clock);
    if (!opened) die("open " + so.path + ": " + opened.error().detail);
    store = std::move(opened).value();
    where = "SQLite " + so.path;
    if (created_dir) made_dir = dir;  // removed at the end, after the store closed
  }

  std::vector<Cell> cells;
  std::map<std::string, std::int64_t> grants;
  {
    tg::LedgerOptions lo;
    lo.reaper_interval_ms = 0;
    lo.coord_prune_interval_ms = 0;
    tg::Ledger ledger(*store, clock, lo);
    auto held = ledger.lock(acquire("held", "holder"));
    if (!held || held->lock.fence != 1) die("the bench could not take the held lock");
    WalMeter wal(a.database.empty() ? std::string() : schema->uri());

    const Mode modes[] = {Mode::refused_read, Mode::refused_batch, Mode::pairs_read, Mode::pairs_batch};
    for (Mode m : modes) cells.push_back(Cell{mode_name(m)});
    for (int round = 0; round < a.rounds; ++round) {
      for (std::size_t c = 0; c < cells.size(); ++c) {
        run_window(ledger, a, modes[c], cells[c], wal, grants);
        if (!cells[c].failure.empty()) die(cells[c].name + ": " + cells[c].failure);
      }
    }

    // Verification.
    for (const auto& [key, n] : grants) {
      auto read = ledger.get_lock(key);
      if (!read) die("read " + key + ": " + read.error().detail);
      const std::int64_t fence = read->row ? read->row->fence : 0;
      if (fence != n) die(key + ": fence " + std::to_string(fence) + " but granted " + std::to_string(n) + " times");
      if (read->row && read->row->owner) die(key + ": still held after its last release");
    }
    auto read = ledger.get_lock("held");
    if (!read || !read->row || read->row->fence != 1 || read->row->owner != std::optional<std::string>("holder")) {
      die("the held lock changed hands");
    }
    ledger.stop();
  }
  store.reset();
  if (!made_dir.empty()) std::filesystem::remove_all(made_dir);

  std::int64_t total_grants = 0;
  for (const auto& [key, n] : grants) total_grants += n;
  std::printf("\nlock_bench — %d callers, %d round(s) of %.1f s per cell, %s\n", a.callers, a.rounds, a.seconds,
              where.c_str());
  std::printf("machine: %u CPUs shared; load average %s\n", std::thread::hardware_concurrency(),
              [] {
                static char buf[64] = "?";
                if (FILE* f = std::fopen("/proc/loadavg", "r")) {
                  if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = 0;
                  std::fclose(f);
                }
                // the three load averages only
                char* end = buf;
                for (int fields = 0; *end != 0 && fields < 3; ++end) {
                  if (*end == ' ' && ++fields == 3) break;
                }
                *end = 0;
                return buf;
              }());
  std::printf("\n%-14s %12s %9s %9s %14s\n", "cell", "ops/s", "p50 us", "p99 us", "WAL bytes/op");
  auto per_s = [](const Cell& c) { return c.seconds > 0 ? static_cast<double>(c.ops) / c.seconds : 0.0; };
  auto wal_per_op = [&](const Cell& c) {
    return (!a.database.empty() && c.ops > 0) ? static_cast<double>(c.wal_bytes) / static_cast<double>(c.ops) : 0.0;
  };
  for (const auto& c : cells) {
    std::printf("%-14s %12.0f %9.0f %9.0f %14s\n", c.name.c_str(), per_s(c), percentile_us(c.latencies_us, 0.5),
                percentile_us(c.latencies_us, 0.99),
                a.database.empty() ? "-" : std::to_string(static_cast<long long>(wal_per_op(c))).c_str());
  }
  const double refused_ratio = per_s(cells[1]) > 0 ? per_s(cells[0]) / per_s(cells[1]) : 0;
  const double pairs_ratio = per_s(cells[3]) > 0 ? per_s(cells[2]) / per_s(cells[3]) : 0;
  std::printf("\nrefused acquires, read first / decided in a batch: %.2f×\n", refused_ratio);
  std::printf("granted pairs, read first / batch only: %.2f× (what the read costs when the lock is free)\n",
              pairs_ratio);
  std::printf("verified: every refusal lock_held; %lld grants = the fences of %zu keys; the held lock unchanged\n\n",
              static_cast<long long>(total_grants), grants.size());
  std::printf(
      "{\"bench\":\"lock\",\"store\":\"%s\",\"callers\":%d,\"rounds\":%d,\"seconds\":%.2f,"
      "\"refused_read_per_s\":%.1f,\"refused_batch_per_s\":%.1f,\"refused_ratio\":%.3f,"
      "\"refused_read_p50_us\":%.0f,\"refused_batch_p50_us\":%.0f,"
      "\"refused_read_wal_bytes_per_op\":%.1f,\"refused_batch_wal_bytes_per_op\":%.1f,"
      "\"pairs_read_per_s\":%.1f,\"pairs_batch_per_s\":%.1f,\"pairs_ratio\":%.3f,\"grants\":%lld,\"ok\":true}\n",
      a.database.empty() ? "sqlite" : "postgres", a.callers, a.rounds, a.seconds, per_s(cells[0]), per_s(cells[1]),
      refused_ratio, percentile_us(cells[0].latencies_us, 0.5), percentile_us(cells[1].latencies_us, 0.5),
      wal_per_op(cells[0]), wal_per_op(cells[1]), per_s(cells[2]), per_s(cells[3]), pairs_ratio,
      static_cast<long long>(total_grants));
  return 0;
}
