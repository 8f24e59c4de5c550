// The child of the crash test (tests/crash/crash_test.cc).
//
//   tollgate_crash_worker DB_PATH SEED THREADS
//
// Opens the SQLite store at DB_PATH (the parent created the account "crash" with credits), then
// THREADS threads loop forever: reserve 1, then commit or release it (chosen by SEED). After each
// acknowledged operation it writes one line to stdout and flushes it:
//   R <request_id> <hold_id>    a reservation was acknowledged
//   C <hold_id>                 a commit was acknowledged
//   L <hold_id>                 a release was acknowledged
// The parent kill -9s it mid-load and checks that every acknowledged line is in the database.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"

int main(int argc, char** argv) {
  using namespace tollgate;
  if (argc != 4) {
    std::fprintf(stderr, "usage: tollgate_crash_worker DB_PATH SEED THREADS\n");
    return 2;
  }
  const std::string path = argv[1];
  const std::uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int threads = std::atoi(argv[3]);
  SystemClock clock;
  SqliteOptions options;
  options.path = path;
  auto store = SqliteStore::open(options, clock);
  if (!store) {
    std::fprintf(stderr, "open: %s\n", store.error().detail.c_str());
    return 1;
  }
  LedgerOptions ledger_options;
  ledger_options.reaper_interval_ms = 0;
  ledger_options.id_seed = seed;
  Ledger ledger(**store, clock, ledger_options);
  std::mutex out_mu;
  auto report = [&](const std::string& line) {
    std::lock_guard lock(out_mu);
    std::fputs(line.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  };
  std::printf("READY\n");
  std::fflush(stdout);
  // Answers other than the expected ones go to stderr (the first few), so that a worker that
  // acknowledges nothing says why.
  std::atomic<int> unexpected{0};
  auto complain = [&](const char* op, const Error& e) {
    if (unexpected.fetch_add(1) < 10) std::fprintf(stderr, "crash worker: %s: %s: %s\n", op, std::string(code_name(e.code)).c_str(), e.detail.c_str());
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(t));
      for (std::uint64_t i = 0;; ++i) {
        const std::string request_id = "crash-" + std::to_string(seed) + "-" + std::to_string(t) + "-" + std::to_string(i);
        auto hold = ledger.reserve({"crash", 1, request_id, std::nullopt, "", ""});
        if (!hold) {  // insufficient credits: try again
          if (hold.code() != Code::insufficient_credits) complain("reserve", hold.error());
          continue;
        }
        report("R " + request_id + " " + hold->hold.hold_id);
        if (rng() % 3 == 0) {
          auto released = ledger.release({hold->hold.hold_id});
          if (released) {
            report("L " + hold->hold.hold_id);
          } else {
            complain("release", released.error());
          }
        } else {
          auto committed = ledger.commit({hold->hold.hold_id, std::nullopt});
          if (committed) {
            report("C " + hold->hold.hold_id);
          } else {
            complain("commit", committed.error());
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}
