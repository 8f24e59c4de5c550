// Power loss at a random moment under a concurrent load: nothing acknowledged is lost — the
// power-loss argument of store/sqlite/sqlite_store.h, tested.
//
// Each round opens a SqliteStore on a fresh folder through testing::PowerLossVfs (support/
// power_loss_vfs.h: it remembers every write not yet synced, per file, and at the power cut writes a
// crash image in which each of them is kept, dropped or torn sector by sector), starts a Ledger over
// it (no reaper; a ManualClock that moves 1 ms per operation, so nothing expires) and opens a few
// accounts. Then it arms the cut at a seeded, random call — any xWrite/xTruncate/xSync, or in a third
// of the rounds an xSync —, picks how long a flush takes (none, or as long as a real disk's, so the
// writer overlaps it), how often the WAL is checkpointed (by the background checkpointer or inside
// commits) and whether the store batches its WAL writes (SqliteOptions::batch_wal_writes), and lets
// several threads drive the ledger — credits and debits with unique references, reservations, full and
// partial commits, releases, extensions — recording every answer that reported success. The cut
// happens under the load, wherever the writer, the syncer and the background checkpointer are; every
// write and flush after it fails, so no answer after it can claim durability it does not have.
// The round then stops the ledger, closes the store, opens a NEW store with the default VFS on the
// crash image (SQLite's WAL recovery runs) and checks:
//   - the audit is clean (balance identity, reserved == active holds, event fold == rows, life cycles);
//   - every acknowledged credit and debit is there (its event, on its account, with its amount), and
//     submitting it again is answered as a replay (created=false), never as new;
//   - every acknowledged hold exists with at least its acknowledged state: an acknowledged commit is
//     committed with that amount, an acknowledged release released, a reservation or an extension
//     exists (active no earlier than its acknowledged deadline, or settled later by a commit or a
//     release that was in flight);
//   - available + reserved + used == purchased per account, and purchased == the credits minus the
//     debits found in its event log;
//   - the recovered store takes new writes.
// Not vacuous: every round logs what the cut caught (unsynced writes, the image against the live
// files, operations in flight, events recovered against those the live store had committed), and the
// test requires, over all rounds, that images lost unsynced data, that operations were in flight, and
// that recoveries lost events the live store had committed (unacknowledged ones) — proof that a lost
// acknowledged operation would be seen. (A store that acknowledged before its flush fails it.)
// A second test checks the simulation itself on one file: synced data always kept, each unsynced
// sector old or new, and every kind of image over the seeds.
//
// Each round's seed picks the cut's call, the crash image, the checkpoint settings and the threads'
// operations (the interleaving is the scheduler's). The base seed and every round's seed are logged;
// rerun with TOLLGATE_POWER_LOSS_SEED=<base seed>. By default 48 rounds run, within a time budget of
// 30 s (a slow sanitizer build runs fewer and says so); TOLLGATE_POWER_LOSS_ROUNDS=<n> runs n rounds
// whatever they take, for a long run.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"
#include "support/backends.h"
#include "support/power_loss_vfs.h"

namespace tollgate {
namespace {

constexpr std::uint64_t kDefaultSeed = 20'260'101;
constexpr int kDefaultRounds = 48;
// No round starts after this long (a sanitizer build on a busy machine): the test stays well under a
// minute; the rounds that ran are logged, and the checks that the cuts were not vacuous scale with them.
constexpr auto kTimeBudget = std::chrono::seconds(30);
constexpr int kThreads = 8;
constexpr int kAccounts = 3;
constexpr std::int64_t kOpeningCredits = 1'000'000;  // per account; debits and holds never exhaust it
constexpr std::int64_t kTtlMs = 600'000;            // holds outlive the round (the clock moves 1 ms per op)
// The cut comes at a call drawn from 1..kCutCallMax after the accounts are opened, or in a third of
// the rounds at the start of a flush drawn from 1..kCutSyncMax (the moment between a commit and its
// acknowledgement): a round's load makes about a thousand xWrite/xSync calls, hundreds of them
// xSync, in its first tenths of a second.
constexpr std::uint64_t kCutCallMax = 1'000;
constexpr std::uint64_t kCutSyncMax = 100;
// If the armed call has not come by then (a very slow machine), the round cuts by hand under the load.
constexpr auto kLoadPatience = std::chrono::seconds(3);

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  if (const char* text = std::getenv(name); text && *text) return std::strtoull(text, nullptr, 10);
  return fallback;
}

std::string account_name(int i) { return "acct-" + std::to_string(i); }

// --- what the callers were told --------------------------------------------------------------------

struct Transfer {  // a credit or a debit, as submitted
  std::string account_id;
  EventType kind = EventType::credited;
  std::int64_t amount = 0;
  std::string reason;  // debits only
};

struct AcknowledgedHold {
  std::string account_id;
  std::string request_id;
  std::int64_t amount = 0;
  HoldStatus status = HoldStatus::active;  // the last acknowledged state
  std::int64_t committed_amount = 0;
  std::int64_t expires_at_ms = 0;  // the last acknowledged deadline
};

// One thread's record of a round (merged by the round after the threads end).
struct Record {
  std::map<std::string, Transfer> transfers;        // acknowledged, by reference
  std::map<std::string, Transfer> unacknowledged;   // submitted, answered with an error after the cut
  std::map<std::string, AcknowledgedHold> holds;    // acknowledged, by hold id
  std::int64_t acknowledged = 0;                    // operations answered with success
  std::int64_t refused = 0;                         // answered with a refusal (no credits): no change
  std::int64_t in_flight = 0;                       // submitted before the cut, answered with an error

  void merge(Record&& other) {
    transfers.merge(other.transfers);
    unacknowledged.merge(other.unacknowledged);
    holds.merge(other.holds);
    acknowledged += other.acknowledged;
    refused += other.refused;
    in_flight += other.in_flight;
  }
};

// Runs one thread's share of the load until the power is off (or `deadline`, a hang guard): a seeded
// mix of credits, debits, reservations and, on this thread's own holds, commits (full or partial),
// releases and extensions. A hold is only ever touched by the thread that made it, so its acknowledged states
// form one sequence.
void drive(Ledger& ledger, ManualClock& clock, const testing::PowerLossVfs& vfs, std::uint64_t seed, int thread,
           std::chrono::steady_clock::time_point deadline, Record& out) {
  std::mt19937_64 rng(seed * 31 + static_cast<std::uint64_t>(thread));
  struct Own {
    std::string hold_id;
    std::int64_t amount;
  };
  std::vector<Own> active;  // this thread's holds acknowledged active
  for (int i = 0; !vfs.power_is_off() && std::chrono::steady_clock::now() < deadline; ++i) {
    clock.advance_ms(1);
    const std::string tag = "t" + std::to_string(thread) + "-" + std::to_string(i);
    const std::string account = account_name(static_cast<int>(rng() % kAccounts));
    const unsigned pick = static_cast<unsigned>(rng() % 100);
    const bool before_cut = !vfs.power_is_off();
    std::optional<Error> error;
    std::optional<Transfer> transfer;  // what a credit or debit submitted, under `tag`

    if (pick < 22) {  // a credit
      transfer = Transfer{account, EventType::credited, 1 + static_cast<std::int64_t>(rng() % 1000), ""};
      auto r = ledger.credit({account, transfer->amount, "credit-" + tag});
      if (r.ok()) out.transfers.emplace("credit-" + tag, *transfer);
      else error = r.error();
    } else if (pick < 32) {  // a debit
      transfer = Transfer{account, EventType::debited, 1 + static_cast<std::int64_t>(rng() % 50), "power-loss test"};
      auto r = ledger.debit({account, transfer->amount, "debit-" + tag, transfer->reason});
      if (r.ok()) out.transfers.emplace("debit-" + tag, *transfer);
      else error = r.error();
    } else if (pick < 60 || active.empty()) {  // a reservation
      const std::int64_t amount = 1 + static_cast<std::int64_t>(rng() % 100);
      ReserveCommand command;
      command.account_id = account;
      command.amount = amount;
      command.request_id = "req-" + tag;
      command.ttl_ms = kTtlMs;
      auto r = ledger.reserve(std::move(command));
      if (r.ok()) {
        const Hold& h = r->hold;
        out.holds[h.hold_id] = {h.account_id, h.request_id, h.amount, h.status, h.committed_amount, h.expires_at_ms};
        active.push_back({h.hold_id, h.amount});
      } else {
        error = r.error();
      }
    } else {  // settle or extend one of this thread's active holds
      const std::size_t k = rng() % active.size();
      const Own own = active[k];
      const unsigned what = static_cast<unsigned>(rng() % 10);
      Result<HoldOutcome> r = Error::make(Code::internal, "not run");
      if (what < 4) {  // commit: the whole hold, or part of it
        std::optional<std::int64_t> amount;
        if (rng() % 2 == 0) amount = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(own.amount));
        r = ledger.commit({own.hold_id, amount, LateCommitPolicy::charge});
      } else if (what < 7) {
        r = ledger.release({own.hold_id});
      } else {
        r = ledger.extend({own.hold_id, kTtlMs});
      }
      if (r.ok()) {
        const Hold& h = r->hold;
        AcknowledgedHold& ack = out.holds.at(h.hold_id);
        ack.status = h.status;
        ack.committed_amount = h.committed_amount;
        ack.expires_at_ms = h.expires_at_ms;
        if (h.status != HoldStatus::active) active.erase(active.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        error = r.error();
      }
    }

    if (!error) {
      ++out.acknowledged;
      continue;
    }
    if (error->code == Code::insufficient_credits || error->code == Code::too_many_holds) {
      ++out.refused;  // a refusal changes nothing; the load goes on
      continue;
    }
    if (vfs.power_is_off()) {  // failed because the power is off: unacknowledged, may or may not be there
      if (before_cut) ++out.in_flight;
      if (transfer) out.unacknowledged.emplace((transfer->kind == EventType::credited ? "credit-" : "debit-") + tag,
                                               *transfer);
      break;
    }
    ADD_FAILURE() << "thread " << thread << ", operation " << tag << ": " << code_name(error->code)
                  << " before the cut: " << error->detail;
    break;
  }
}

// Every event of `account_id`, oldest first.
std::vector<Event> all_events(Store& store, const std::string& account_id) {
  std::vector<Event> out;
  std::int64_t after = 0;
  for (;;) {
    auto page = store.read_events(account_id, after, limits::kEventsPageMax);
    EXPECT_TRUE(page.ok()) << account_id << ": " << page.error().detail;
    if (!page.ok() || page->events.empty()) return out;
    out.insert(out.end(), page->events.begin(), page->events.end());
    after = page->next_after;
  }
}

// What a store holds, in brief: the references of its credits and debits, and its events.
struct Contents {
  std::set<std::string> references;
  std::int64_t events = 0;
};

Contents contents_of(Store& store) {
  Contents out;
  for (int a = 0; a < kAccounts; ++a) {
    for (const Event& e : all_events(store, account_name(a))) {
      ++out.events;
      if (e.reference) out.references.insert(*e.reference);
    }
  }
  return out;
}

// Submits every command at once and waits for all the answers (so they share group commits: each
// is a flushed batch on the real disk now); returns them in order.
std::vector<CommandResult> run_all(Ledger& ledger, std::vector<Command> commands) {
  std::vector<CommandResult> out;
  out.reserve(commands.size());
  const std::size_t chunk = limits::kWriteQueueDefault / 2;
  for (std::size_t from = 0; from < commands.size(); from += chunk) {
    const std::size_t n = std::min(chunk, commands.size() - from);
    std::vector<std::optional<CommandResult>> answers(n);
    std::mutex mu;
    std::condition_variable cv;
    std::size_t left = n;
    for (std::size_t i = 0; i < n; ++i) {
      ledger.submit(std::move(commands[from + i]), [&, i](CommandResult r) {
        std::lock_guard lock(mu);
        answers[i].emplace(std::move(r));
        if (--left == 0) cv.notify_one();
      });
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return left == 0; });
    for (auto& a : answers) out.push_back(std::move(*a));
  }
  return out;
}

// Figures over all rounds: what the cuts caught.
struct Totals {
  int rounds = 0;
  int forced_cuts = 0;               // the armed call did not come in time: cut by hand under the load
  int images_differing = 0;          // the crash image lost or tore unsynced data of some file
  int rounds_in_flight = 0;          // operations were in flight at the cut
  int rounds_losing_commits = 0;     // the recovered store has fewer events than the live one had
  int rounds_losing_unacknowledged = 0;  // committed, unacknowledged transfers absent after recovery
  std::int64_t acknowledged = 0;
  std::int64_t unacknowledged_lost = 0, unacknowledged_kept = 0;
};

class PowerLoss : public ::testing::Test {
 protected:
  // One round with `seed` (see the file comment); adds what it saw to `totals`.
  void run_round(int round, std::uint64_t seed, Totals& totals);
  // Opens the crash image in `dir` with the default VFS and checks it against `record`.
  void check_recovered(const testing::TempDir& dir, ManualClock& clock, const Record& record, const Contents& live,
                       Totals& totals);
};

void PowerLoss::run_round(int round, std::uint64_t seed, Totals& totals) {
  std::mt19937_64 rng(seed);
  testing::TempDir live;
  testing::TempDir image;
  ManualClock clock;
  // A name of its own per round (and process): SQLite's VFS list is global.
  testing::PowerLossVfs vfs("tollgate-power-loss-" + std::to_string(getpid()) + "-" + std::to_string(round));

  SqliteOptions options;
  options.path = live.file("ledger.db");
  options.vfs = vfs.name();
  // Checkpoints at different paces, sometimes by the writer itself (NORMAL) rather than the
  // background checkpointer (FULL), so that cuts also land inside checkpoints and WAL restarts.
  constexpr int kIntervals[] = {0, 2, 20, 100};
  constexpr int kWriterPages[] = {16, 20'000};
  options.checkpoint_interval_ms = kIntervals[rng() % std::size(kIntervals)];
  options.wal_autocheckpoint_pages = kWriterPages[rng() % std::size(kWriterPages)];
  const bool cut_at_sync = rng() % 3 == 0;
  const std::uint64_t cut_at = 1 + rng() % (cut_at_sync ? kCutSyncMax : kCutCallMax);
  // The store's WAL batching layer (one write per transaction) in most rounds; SQLite's own two writes
  // per frame in the others.
  options.batch_wal_writes = rng() % 4 != 0;
  // Flushes that take no time, or as long as a real disk's (so the writer overlaps them).
  constexpr int kSyncLatencyUs[] = {0, 100, 500, 1500};
  const int sync_latency_us = kSyncLatencyUs[rng() % std::size(kSyncLatencyUs)];
  vfs.set_sync_latency(std::chrono::microseconds(sync_latency_us));

  Record record;
  Contents live_contents;  // what the live store had committed, at the cut
  {
    auto opened = SqliteStore::open(options, clock);
    ASSERT_TRUE(opened.ok()) << opened.error().detail;
    std::unique_ptr<SqliteStore> store = std::move(opened).value();
    LedgerOptions ledger_options;
    ledger_options.reaper_interval_ms = 0;
    ledger_options.id_seed = seed;
    Ledger ledger(*store, clock, ledger_options);
    for (int a = 0; a < kAccounts; ++a) {
      const std::string id = account_name(a);
      ASSERT_TRUE(ledger.create_account({id, 0, std::nullopt}).ok());
      ASSERT_TRUE(ledger.credit({id, kOpeningCredits, "opening-" + id}).ok());
      record.transfers.emplace("opening-" + id, Transfer{id, EventType::credited, kOpeningCredits, ""});
    }

    vfs.arm(cut_at, seed, image.path(),
            cut_at_sync ? testing::PowerLossVfs::CutAt::sync_call : testing::PowerLossVfs::CutAt::any_call);
    const auto cut_deadline = std::chrono::steady_clock::now() + kLoadPatience;
    const auto load_deadline = cut_deadline + std::chrono::seconds(1);  // a hang guard: the cut stops the load
    std::vector<Record> records(kThreads);
    {
      std::vector<std::jthread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] { drive(ledger, clock, vfs, seed, t, load_deadline, records[t]); });
      }
      // The threads stop at the cut. If the armed call has not come by the patience, cut by hand
      // while they are still running, so the cut still lands under the load.
      while (!vfs.power_is_off() && std::chrono::steady_clock::now() < cut_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (vfs.cut(seed, image.path())) ++totals.forced_cuts;
    }
    for (Record& r : records) record.merge(std::move(r));
    // What the live store had committed (its readers still work: the cut only changed the image).
    live_contents = contents_of(*store);
    ledger.stop();  // its last writes fail: the power is off
  }  // the store is closed

  const auto report = vfs.report();
  ASSERT_TRUE(report.has_value());
  const std::string checkpoints =
      options.checkpoint_interval_ms == 0
          ? std::string("checkpoints inside commits")
          : "checkpoints every " + std::to_string(options.checkpoint_interval_ms) + " ms (the writer's past " +
                std::to_string(options.wal_autocheckpoint_pages) + " pages)";
  std::printf("[ power    ] round %d seed %llu, %s, WAL writes %s, flushes of %d us; %s\n", round,
              static_cast<unsigned long long>(seed), checkpoints.c_str(),
              options.batch_wal_writes ? "batched" : "per frame", sync_latency_us, report->summary().c_str());
  std::printf("[ power    ] round %d: %lld acknowledged (%zu transfers, %zu holds), %lld refused, %lld in flight at "
              "the cut\n",
              round, static_cast<long long>(record.acknowledged), record.transfers.size(), record.holds.size(),
              static_cast<long long>(record.refused), static_cast<long long>(record.in_flight));
  std::fflush(stdout);
  ++totals.rounds;
  totals.acknowledged += record.acknowledged;
  if (report->any_differs()) ++totals.images_differing;
  if (record.in_flight > 0) ++totals.rounds_in_flight;

  check_recovered(image, clock, record, live_contents, totals);
}

void PowerLoss::check_recovered(const testing::TempDir& dir, ManualClock& clock, const Record& record,
                                const Contents& live, Totals& totals) {
  SqliteOptions options;  // the default VFS: what a restarted tollgate would open
  options.path = dir.file("ledger.db");
  auto opened = SqliteStore::open(options, clock);
  ASSERT_TRUE(opened.ok()) << "opening the crash image: " << opened.error().detail;
  std::unique_ptr<SqliteStore> store = std::move(opened).value();

  auto audit = store->audit(std::nullopt);
  ASSERT_TRUE(audit.ok()) << audit.error().detail;
  EXPECT_EQ(audit->accounts_checked, kAccounts);
  for (const auto& v : audit->violations) {
    ADD_FAILURE() << "audit after the power cut: " << v.account_id << ": " << v.message;
  }

  // Every credit and debit found, and each account's balances against them.
  std::map<std::string, Event> found;  // by reference
  std::int64_t events = 0;
  for (int a = 0; a < kAccounts; ++a) {
    const std::string id = account_name(a);
    std::int64_t purchased = 0;
    for (const Event& e : all_events(*store, id)) {
      ++events;
      if (e.type == EventType::credited) purchased += e.amount;
      if (e.type == EventType::debited) purchased -= e.amount;
      if (e.reference) found.emplace(*e.reference, e);
    }
    auto account = store->get_account(id);
    ASSERT_TRUE(account.ok()) << id << ": " << account.error().detail;
    const Balances& b = account->balances;
    EXPECT_EQ(b.available + b.reserved + b.used, b.purchased) << id << " " << b;
    EXPECT_EQ(b.purchased, purchased) << id << ": purchased against the credits minus the debits in its events";
  }

  int lost = 0;
  for (const auto& [reference, t] : record.transfers) {
    auto it = found.find(reference);
    if (it == found.end()) {
      if (++lost <= 20) ADD_FAILURE() << "acknowledged " << event_type_name(t.kind) << " " << reference << " is lost";
      continue;
    }
    EXPECT_EQ(it->second.account_id, t.account_id) << reference;
    EXPECT_EQ(it->second.type, t.kind) << reference;
    EXPECT_EQ(it->second.amount, t.amount) << reference;
  }
  EXPECT_EQ(lost, 0) << "acknowledged credits and debits lost";

  int holds_lost = 0;
  for (const auto& [hold_id, ack] : record.holds) {
    auto hold = store->get_hold(hold_id);
    if (!hold.ok()) {
      if (++holds_lost <= 20) {
        ADD_FAILURE() << "acknowledged hold " << hold_id << " (" << hold_status_name(ack.status)
                      << ") is lost: " << hold.error().detail;
      }
      continue;
    }
    EXPECT_EQ(hold->account_id, ack.account_id) << hold_id;
    EXPECT_EQ(hold->request_id, ack.request_id) << hold_id;
    EXPECT_EQ(hold->amount, ack.amount) << hold_id;
    switch (ack.status) {
      case HoldStatus::committed:
        EXPECT_EQ(hold->status, HoldStatus::committed) << hold_id << " was acknowledged committed";
        EXPECT_EQ(hold->committed_amount, ack.committed_amount) << hold_id;
        break;
      case HoldStatus::released:
        EXPECT_EQ(hold->status, HoldStatus::released) << hold_id << " was acknowledged released";
        break;
      case HoldStatus::active:  // settled later by an unacknowledged commit or release, or still active
        EXPECT_NE(hold->status, HoldStatus::expired) << hold_id;
        if (hold->status == HoldStatus::active) {
          EXPECT_GE(hold->expires_at_ms, ack.expires_at_ms) << hold_id << ": an acknowledged extension is lost";
        }
        break;
      case HoldStatus::expired:
        ADD_FAILURE() << hold_id << ": nothing in this test expires a hold";
        break;
    }
  }
  EXPECT_EQ(holds_lost, 0) << "acknowledged holds lost";

  // Committed by the live store but not acknowledged (the flush after them was cut): the image may
  // have them or not. Those it lost show that the cut really took committed data away.
  EXPECT_LE(events, live.events) << "the recovered store has events the live one never committed";
  if (events < live.events) ++totals.rounds_losing_commits;
  std::printf("[ power    ] recovered %lld of the %lld events the live store had committed\n",
              static_cast<long long>(events), static_cast<long long>(live.events));
  int unacknowledged_lost = 0;
  for (const auto& [reference, t] : record.unacknowledged) {
    if (!live.references.count(reference)) continue;  // never committed: proves nothing
    if (found.count(reference)) {
      ++totals.unacknowledged_kept;
    } else {
      ++totals.unacknowledged_lost;
      ++unacknowledged_lost;
    }
  }
  if (unacknowledged_lost > 0) ++totals.rounds_losing_unacknowledged;

  // Submitted again, every acknowledged credit and debit is a replay of what is there, never new.
  LedgerOptions ledger_options;
  ledger_options.reaper_interval_ms = 0;
  Ledger ledger(*store, clock, ledger_options);
  std::vector<Command> again;
  std::vector<std::string> references;
  for (const auto& [reference, t] : record.transfers) {
    if (t.kind == EventType::credited) again.emplace_back(CreditCommand{t.account_id, t.amount, reference});
    else again.emplace_back(DebitCommand{t.account_id, t.amount, reference, t.reason});
    references.push_back(reference);
  }
  const std::vector<CommandResult> answers = run_all(ledger, std::move(again));
  int created_again = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i].ok()) {
      ADD_FAILURE() << "submitting " << references[i] << " again: " << code_name(answers[i].code()) << ": "
                    << answers[i].error().detail;
      continue;
    }
    const auto& outcome = std::get<TransferOutcome>(answers[i].value());
    if (outcome.created && ++created_again <= 20) {
      ADD_FAILURE() << "submitting acknowledged " << references[i] << " again created it: it was lost";
    }
  }
  // The recovered store takes new writes.
  auto fresh = ledger.credit({account_name(0), 1, "after-the-cut"});
  ASSERT_TRUE(fresh.ok()) << fresh.error().detail;
  EXPECT_TRUE(fresh->created);
}

TEST_F(PowerLoss, EveryAcknowledgedOperationSurvivesAPowerCutAtARandomMoment) {
  const std::uint64_t seed = env_u64("TOLLGATE_POWER_LOSS_SEED", kDefaultSeed);
  const int rounds = static_cast<int>(env_u64("TOLLGATE_POWER_LOSS_ROUNDS", kDefaultRounds));
  std::printf("[ power    ] base seed %llu (rerun: TOLLGATE_POWER_LOSS_SEED=%llu), %d rounds, %d threads\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), rounds, kThreads);
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));

  Totals totals;
  const auto budget_end = std::chrono::steady_clock::now() + kTimeBudget;
  for (int round = 1; round <= rounds; ++round) {
    if (std::chrono::steady_clock::now() > budget_end && !std::getenv("TOLLGATE_POWER_LOSS_ROUNDS")) {
      std::printf("[ power    ] time budget spent: stopping after %d of %d rounds\n", round - 1, rounds);
      break;
    }
    const std::uint64_t round_seed = seed * 1000 + static_cast<std::uint64_t>(round);
    SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(round_seed));
    run_round(round, round_seed, totals);
    if (HasFailure()) break;  // later rounds would only repeat the finding
  }
  std::printf("[ power    ] %d rounds: %lld operations acknowledged; images that lost unsynced data: %d; rounds "
              "with operations in flight at the cut: %d; rounds whose recovery lost committed events: %d; committed "
              "but unacknowledged transfers lost: %lld (in %d rounds), kept: %lld; cuts forced after the "
              "patience: %d\n",
              totals.rounds, static_cast<long long>(totals.acknowledged), totals.images_differing,
              totals.rounds_in_flight, totals.rounds_losing_commits, static_cast<long long>(totals.unacknowledged_lost),
              totals.rounds_losing_unacknowledged, static_cast<long long>(totals.unacknowledged_kept),
              totals.forced_cuts);
  if (HasFailure()) return;
  // Not vacuous: the cuts came under the load and took away data that a store acknowledging too early
  // would have acknowledged. (Over 48 rounds, typically: 3/4 of the images lost unsynced data, every
  // round had operations in flight, 40-55% of the recoveries lost committed events.)
  EXPECT_GT(totals.acknowledged, 0);
  EXPECT_GE(totals.images_differing, totals.rounds / 4) << "too few cuts lost unsynced data";
  EXPECT_GE(totals.rounds_in_flight, totals.rounds / 4) << "too few cuts landed with operations in flight";
  EXPECT_GE(totals.rounds_losing_commits, totals.rounds / 8)
      << "too few cuts lost operations the live store had committed: a lost acknowledged one might not be seen either";
}


// The simulation itself, on one file written through two handles: what was synced before the cut is
// in every image; each unsynced write is in it whole, not at all, or sector by sector (each 512-byte
// sector old or new, never anything else); a dropped extension leaves the file shorter; and after the
// cut nothing can be written or synced.
TEST_F(PowerLoss, TheCrashImageKeepsSyncedDataAndEachUnsyncedSectorOldOrNew) {
  // A file opened through the VFS by hand, closed when it goes.
  struct Handle {
    Handle(sqlite3_vfs* vfs, const std::string& path) : file(static_cast<std::size_t>(vfs->szOsFile)) {
      int out = 0;
      const int rc = vfs->xOpen(vfs, path.c_str(), raw(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                                             SQLITE_OPEN_MAIN_DB, &out);
      EXPECT_EQ(rc, SQLITE_OK) << path;
    }
    ~Handle() {
      if (raw()->pMethods != nullptr) raw()->pMethods->xClose(raw());
    }
    sqlite3_file* raw() { return reinterpret_cast<sqlite3_file*>(file.data()); }
    int write(char byte, std::int64_t offset, int n) {
      const std::string data(static_cast<std::size_t>(n), byte);
      return raw()->pMethods->xWrite(raw(), data.data(), n, offset);
    }
    int sync() { return raw()->pMethods->xSync(raw(), SQLITE_SYNC_NORMAL); }
    std::vector<std::max_align_t> file;
  };
  // The unsynced writes below: [1000, 3000) overwritten with 'B', [4096, 6000) appended with 'C'.
  constexpr std::int64_t kSynced = 4096, kOverFrom = 1000, kOverTo = 3000, kEnd = 6000;
  std::set<std::string> kinds;  // which images the seeds gave: "old", "new", "mixed"
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    testing::TempDir live, image;
    testing::PowerLossVfs vfs("tollgate-power-loss-unit-" + std::to_string(getpid()) + "-" + std::to_string(seed));
    sqlite3_vfs* v = sqlite3_vfs_find(vfs.name().c_str());
    ASSERT_NE(v, nullptr);
    const std::string path = live.file("f");
    {
      Handle writer(v, path), flusher(v, path);
      ASSERT_EQ(writer.write('A', 0, kSynced), SQLITE_OK);
      ASSERT_EQ(flusher.sync(), SQLITE_OK);  // another handle on the same path: the writer's data is durable
      ASSERT_EQ(writer.write('B', kOverFrom, kOverTo - kOverFrom), SQLITE_OK);
      ASSERT_EQ(writer.write('C', kSynced, kEnd - kSynced), SQLITE_OK);
      ASSERT_TRUE(vfs.cut(seed, image.path()));
      EXPECT_TRUE(vfs.power_is_off());
      EXPECT_EQ(writer.write('D', 0, 10), SQLITE_IOERR_WRITE);
      EXPECT_EQ(flusher.sync(), SQLITE_IOERR_FSYNC);
      EXPECT_EQ(writer.raw()->pMethods->xTruncate(writer.raw(), 0), SQLITE_IOERR_TRUNCATE);
    }
    std::ifstream in(image.file("f"), std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(static_cast<std::int64_t>(got.size()), kSynced) << "synced bytes were lost";
    ASSERT_LE(static_cast<std::int64_t>(got.size()), kEnd);
    EXPECT_EQ(got.substr(0, kOverFrom), std::string(kOverFrom, 'A'));
    EXPECT_EQ(got.substr(kOverTo, kSynced - kOverTo), std::string(kSynced - kOverTo, 'A'));
    bool any_old = false, any_new = false;
    // Each sector piece of a write: all old or all new.
    auto check_pieces = [&](std::int64_t from, std::int64_t to, char old_byte, char new_byte) {
      for (std::int64_t at = from; at < to && at < static_cast<std::int64_t>(got.size());) {
        const std::int64_t end = std::min(to, (at / 512 + 1) * 512);
        const std::string piece = got.substr(static_cast<std::size_t>(at), static_cast<std::size_t>(end - at));
        const bool is_old = piece == std::string(piece.size(), old_byte);
        const bool is_new = piece == std::string(piece.size(), new_byte);
        EXPECT_TRUE(is_old || is_new) << "bytes " << at << ".." << end << " are neither old nor new";
        any_old = any_old || is_old;
        any_new = any_new || is_new;
        at = end;
      }
    };
    check_pieces(kOverFrom, kOverTo, 'A', 'B');
    check_pieces(kSynced, kEnd, '\0', 'C');  // appended: a sector that did not make it reads as zeros
    // A torn extension ends after a sector that made it.
    if (static_cast<std::int64_t>(got.size()) > kSynced) {
      EXPECT_EQ(got.back(), 'C');
    }
    if (static_cast<std::int64_t>(got.size()) < kEnd) any_old = true;
    kinds.insert(any_old && any_new ? "mixed" : any_new ? "new" : "old");
    const auto report = vfs.report();
    ASSERT_TRUE(report.has_value());
    ASSERT_EQ(report->files.size(), 1u);
    EXPECT_EQ(report->files[0].unsynced, 2);
    EXPECT_EQ(report->files[0].synced_size, kSynced);
    EXPECT_EQ(report->files[0].live_size, kEnd);
    const std::string live_content = std::string(kOverFrom, 'A') + std::string(kOverTo - kOverFrom, 'B') +
                                     std::string(kSynced - kOverTo, 'A') + std::string(kEnd - kSynced, 'C');
    EXPECT_EQ(report->files[0].differs, got != live_content);
  }
  // Over the seeds, every kind of image: everything lost, everything kept, torn in between.
  EXPECT_EQ(kinds, (std::set<std::string>{"mixed", "new", "old"}));
}

}  // namespace
}  // namespace tollgate
