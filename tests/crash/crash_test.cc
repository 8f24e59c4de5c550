// kill -9 in the middle of a load, then recovery: nothing acknowledged is lost (design.md, invariant 7).
//
// The parent makes a SQLite database with the account "crash", then, for each of several rounds on
// that same database, spawns tollgate_crash_worker (its protocol is in crash_worker.cc), reads the
// lines it acknowledges for a random 200–800 ms after READY, sends SIGKILL, drains what was already
// written to the pipe (a line written before the kill was acknowledged before the kill; a trailing
// partial line is not a whole answer and is ignored), reaps the child, reopens the database and checks:
//   - every acknowledged reservation exists, with that request_id and that hold_id;
//   - every acknowledged commit / release left its hold committed / released;
//   - the audit is clean (identity, reserved == active holds, fold == row, hold life cycles);
//   - available + reserved + used == purchased == what the parent credited.
// Round 2 opens a database that recovered from round 1's crash, and so on: recovery of recovery.
//
// The base seed is logged; rerun with TOLLGATE_CRASH_SEED=<seed>. The seed picks each round's kill
// time and the worker's commit/release choices; where the kill lands is up to the scheduler.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <string>
#include <vector>

#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"
#include "support/backends.h"

extern char** environ;

namespace tollgate {
namespace {

constexpr std::uint64_t kDefaultSeed = 7'001;
constexpr int kRounds = 3;
constexpr int kWorkerThreads = 8;
constexpr std::int64_t kPurchased = 100'000'000;  // the worker never runs out
// How long the parent waits for the worker's READY or for its pipe to close after SIGKILL before it
// gives up: a hang guard, not a performance assertion.
constexpr auto kPatience = std::chrono::seconds(60);

std::uint64_t base_seed() {
  if (const char* text = std::getenv("TOLLGATE_CRASH_SEED"); text && *text) return std::strtoull(text, nullptr, 10);
  return kDefaultSeed;
}

// A spawned worker with its stdout on a pipe. Kills and reaps the child if the test ends early.
class WorkerProcess {
 public:
  WorkerProcess(const std::string& db_path, std::uint64_t seed, int threads) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    read_fd_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC
    const std::string seed_text = std::to_string(seed);
    const std::string threads_text = std::to_string(threads);
    std::vector<char*> argv{const_cast<char*>(TOLLGATE_CRASH_WORKER), const_cast<char*>(db_path.c_str()),
                            const_cast<char*>(seed_text.c_str()), const_cast<char*>(threads_text.c_str()), nullptr};
    const int rc = posix_spawn(&pid_, TOLLGATE_CRASH_WORKER, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);  // the child holds the only write end: EOF once it is dead
    if (rc != 0) {
      close(read_fd_);
      throw std::runtime_error(std::string("posix_spawn " TOLLGATE_CRASH_WORKER ": ") + std::strerror(rc));
    }
  }

  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (read_fd_ >= 0) close(read_fd_);
  }

  enum class Read { data, timed_out, end };
  // Waits until `deadline` for the pipe to have data, and reads one chunk of it.
  Read read_some(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Read::timed_out;
      pollfd p{read_fd_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return Read::timed_out;
      if (ready < 0) return Read::end;
      char buf[64 * 1024];
      const ssize_t n = read(read_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Read::end;  // EOF (or an error: treated as the end)
      data_.append(buf, static_cast<std::size_t>(n));
      return Read::data;
    }
  }

  // Reads everything that arrives until `deadline`. Returns false if the pipe closed first.
  bool read_until(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      switch (read_some(deadline)) {
        case Read::data: continue;
        case Read::timed_out: return true;
        case Read::end: return false;
      }
    }
  }

  // Reads until the pipe closes (after the kill); false if it did not close within kPatience.
  bool drain() {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!read_until(deadline)) return true;
    }
    return false;
  }

  void kill9() { kill(pid_, SIGKILL); }

  // Waits for the child; returns its wait status.
  int reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

  bool has_line(const std::string& line) const { return data_.find(line + "\n") != std::string::npos; }
  // Every complete line read so far (a trailing partial line is left out).
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t end; (end = data_.find('\n', start)) != std::string::npos; start = end + 1) {
      out.push_back(data_.substr(start, end - start));
    }
    return out;
  }
  std::size_t partial_tail_bytes() const {
    const auto last = data_.rfind('\n');
    return last == std::string::npos ? data_.size() : data_.size() - last - 1;
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  std::string data_;
};

std::unique_ptr<SqliteStore> open_store(const std::string& path, const Clock& clock) {
  SqliteOptions options;
  options.path = path;
  auto store = SqliteStore::open(options, clock);
  if (!store) {
    ADD_FAILURE() << "open " << path << ": " << store.error().detail;
    return nullptr;
  }
  return std::move(store).value();
}

// A hold row as stored, read straight from the file.
struct StoredHold {
  std::string request_id;
  std::string account_id;
  std::int64_t amount = 0;
  std::string status;
  std::int64_t committed_amount = 0;
};

// Every hold in the database at `path`, by hold_id, in one read-only query.
std::unordered_map<std::string, StoredHold> read_all_holds(const std::string& path) {
  std::unordered_map<std::string, StoredHold> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "open " << path << ": " << sqlite3_errmsg(db);
    sqlite3_close_v2(db);
    return out;
  }
  sqlite3_stmt* stmt = nullptr;
  const char* sql = "SELECT hold_id, request_id, account_id, amount, status, committed_amount FROM holds";
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "prepare: " << sqlite3_errmsg(db);
  } else {
    auto text = [&](int column) { return std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, column))); };
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      out.emplace(text(0), StoredHold{text(1), text(2), sqlite3_column_int64(stmt, 3), text(4), sqlite3_column_int64(stmt, 5)});
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << "reading holds: " << sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close_v2(db);
  return out;
}

struct Acknowledged {
  std::map<std::string, std::string> reserved;  // hold_id → request_id
  std::vector<std::string> committed;           // hold ids
  std::vector<std::string> released;
  std::int64_t malformed = 0;
};

Acknowledged parse(const std::vector<std::string>& lines) {
  Acknowledged ack;
  for (const std::string& line : lines) {
    if (line == "READY") continue;
    std::istringstream in(line);
    std::string kind, a, b;
    in >> kind >> a >> b;
    if (kind == "R" && !a.empty() && !b.empty()) {
      auto [it, fresh] = ack.reserved.emplace(b, a);
      if (!fresh && it->second != a) ADD_FAILURE() << "hold " << b << " acknowledged for two requests";
    } else if (kind == "C" && !a.empty()) {
      ack.committed.push_back(a);
    } else if (kind == "L" && !a.empty()) {
      ack.released.push_back(a);
    } else {
      ++ack.malformed;
      ADD_FAILURE() << "malformed line from the worker: '" << line << "'";
    }
  }
  return ack;
}

TEST(CrashRecovery, AcknowledgedWorkSurvivesKillNineAndRecoveryOfRecovery) {
  const std::uint64_t seed = base_seed();
  std::printf("[ crash    ] seed %llu (rerun: TOLLGATE_CRASH_SEED=%llu), %d rounds, %d worker threads\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), kRounds, kWorkerThreads);
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));

  testing::TempDir dir;
  const std::string db_path = dir.file("crash.db");
  SystemClock clock;  // the worker's clock: its holds' deadlines are real times
  {
    auto store = open_store(db_path, clock);
    ASSERT_TRUE(store);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    Ledger ledger(*store, clock, options);
    ASSERT_TRUE(ledger.create_account({"crash", 0, std::nullopt}).ok());
    auto credited = ledger.credit({"crash", kPurchased, "crash-purchase"});
    ASSERT_TRUE(credited.ok()) << credited.error().detail;
  }  // ledger stopped, store closed

  std::int64_t acknowledged_total = 0;
  for (int round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::uint64_t round_seed = seed * 100 + static_cast<std::uint64_t>(round);
    std::mt19937_64 rng(round_seed);  // the kill time, then the sample of holds checked through the store
    const auto kill_after = std::chrono::milliseconds(200 + static_cast<std::int64_t>(rng() % 601));

    WorkerProcess worker(db_path, round_seed, kWorkerThreads);
    // READY: the worker has opened (and so recovered) the database.
    const auto ready_deadline = std::chrono::steady_clock::now() + kPatience;
    while (!worker.has_line("READY")) {
      if (worker.read_some(ready_deadline) != WorkerProcess::Read::data) break;  // it died, or hangs
    }
    ASSERT_TRUE(worker.has_line("READY")) << "the worker did not start";
    ASSERT_TRUE(worker.read_until(std::chrono::steady_clock::now() + kill_after)) << "the worker ended by itself";
    worker.kill9();
    ASSERT_TRUE(worker.drain()) << "the pipe did not close after SIGKILL";
    const int status = worker.reap();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the worker ended otherwise than by our SIGKILL (wait status " << status << ")";

    const std::vector<std::string> all = worker.lines();
    const Acknowledged ack = parse(all);
    const std::size_t acknowledged = ack.reserved.size() + ack.committed.size() + ack.released.size();
    acknowledged_total += static_cast<std::int64_t>(acknowledged);
    std::printf("[ crash    ] round %d: seed %llu, killed after %lld ms: %zu reservations, %zu commits, %zu "
                "releases acknowledged (%zu bytes of a partial line ignored)\n",
                round, static_cast<unsigned long long>(round_seed), static_cast<long long>(kill_after.count()),
                ack.reserved.size(), ack.committed.size(), ack.released.size(), worker.partial_tail_bytes());
    std::fflush(stdout);
    EXPECT_GT(ack.reserved.size(), 0u) << "the worker acknowledged nothing: the round tested nothing";

    // Reopen after the crash (the store's open() runs SQLite's recovery) and look for every
    // acknowledged effect. A round acknowledges thousands of operations (far more on a disk whose
    // flush is cheap), so the check reads every hold in one query; the store's own get_hold() then
    // confirms the last acknowledged ones (written just before the kill: the likeliest to be lost)
    // and a seeded sample.
    auto store = open_store(db_path, clock);
    ASSERT_TRUE(store);
    const auto stored = read_all_holds(db_path);
    std::int64_t missing = 0;
    auto lookup = [&](const std::string& hold_id, const char* what) -> const StoredHold* {
      auto it = stored.find(hold_id);
      if (it != stored.end()) return &it->second;
      if (++missing <= 20) ADD_FAILURE() << "acknowledged " << what << " of hold " << hold_id << " is lost";
      return nullptr;
    };
    for (const auto& [hold_id, request_id] : ack.reserved) {
      const StoredHold* hold = lookup(hold_id, "reservation");
      if (!hold) continue;
      EXPECT_EQ(hold->request_id, request_id) << hold_id;
      EXPECT_EQ(hold->account_id, "crash") << hold_id;
      EXPECT_EQ(hold->amount, 1) << hold_id;
    }
    auto expect_status = [&](const std::vector<std::string>& hold_ids, HoldStatus status, std::int64_t committed) {
      for (const std::string& hold_id : hold_ids) {
        EXPECT_TRUE(ack.reserved.count(hold_id)) << hold_id << " was settled before its reservation was acknowledged";
        const StoredHold* hold = lookup(hold_id, hold_status_name(status).data());
        if (!hold) continue;
        EXPECT_EQ(hold->status, hold_status_name(status)) << hold_id << " was acknowledged " << hold_status_name(status);
        EXPECT_EQ(hold->committed_amount, committed) << hold_id;
      }
    };
    expect_status(ack.committed, HoldStatus::committed, 1);
    expect_status(ack.released, HoldStatus::released, 0);
    EXPECT_EQ(missing, 0) << "acknowledged operations lost";

    // The same through the store's reads, for the last acknowledged lines and a seeded sample.
    {
      std::vector<std::pair<std::string, std::string>> settled;  // hold_id, the line's kind
      for (auto it = all.rbegin(); it != all.rend() && settled.size() < 200; ++it) {
        std::istringstream in(*it);
        std::string kind, a, b;
        in >> kind >> a >> b;
        if (kind == "R") settled.emplace_back(b, "R");
        if (kind == "C" || kind == "L") settled.emplace_back(a, kind);
      }
      for (int i = 0; i < 200 && !all.empty(); ++i) {
        std::istringstream in(all[rng() % all.size()]);
        std::string kind, a, b;
        in >> kind >> a >> b;
        if (kind == "R") settled.emplace_back(b, "R");
        if (kind == "C" || kind == "L") settled.emplace_back(a, kind);
      }
      for (const auto& [hold_id, kind] : settled) {
        auto hold = store->get_hold(hold_id);
        ASSERT_TRUE(hold.ok()) << "acknowledged " << kind << " " << hold_id << ": " << hold.error().detail;
        auto reservation = ack.reserved.find(hold_id);
        if (reservation != ack.reserved.end()) {
          EXPECT_EQ(hold->request_id, reservation->second) << hold_id;
        }
        if (kind == "C") {
          EXPECT_EQ(hold->status, HoldStatus::committed) << hold_id;
        } else if (kind == "L") {
          EXPECT_EQ(hold->status, HoldStatus::released) << hold_id;
        }
      }
    }

    auto report = store->audit(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.error().detail;
    EXPECT_EQ(report->accounts_checked, 1);
    for (const auto& v : report->violations) ADD_FAILURE() << "audit after the crash: " << v.account_id << ": " << v.message;
    auto account = store->get_account("crash");
    ASSERT_TRUE(account.ok()) << account.error().detail;
    const Balances& b = account->balances;
    EXPECT_EQ(b.available + b.reserved + b.used, b.purchased);
    EXPECT_EQ(b.purchased, kPurchased);
    EXPECT_GE(b.available, 0);
    std::printf("[ crash    ] round %d recovered: available %lld reserved %lld used %lld purchased %lld, %lld active holds\n",
                round, static_cast<long long>(b.available), static_cast<long long>(b.reserved),
                static_cast<long long>(b.used), static_cast<long long>(b.purchased),
                static_cast<long long>(account->active_holds));
    if (::testing::Test::HasFailure()) break;  // later rounds would only repeat the finding
  }
  EXPECT_GT(acknowledged_total, 0);
}

}  // namespace
}  // namespace tollgate
