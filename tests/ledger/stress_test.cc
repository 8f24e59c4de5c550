// Random stress: 16 threads mix every ledger operation over 4 accounts while a clock thread moves a
// ManualClock forward, then the whole history is checked against the invariants of design.md.
//
// The seed is logged; rerun a failure with TOLLGATE_STRESS_SEED=<seed>. Each thread draws its
// operations from its own generator (seed + thread index), so the operations are the same on every
// run with that seed; only their interleaving is left to the scheduler. TOLLGATE_STRESS_OPS sets the
// operations per thread (default: a size that runs in a few seconds, smaller under ThreadSanitizer).
//
// While the threads run, every answer is checked on the spot (its code is one the operation may give,
// a replay names the same hold / event as the original, a reservation's deadline is its TTL, …) and
// the readers check every snapshot they see (identity, bounds, a per-account audit). Afterwards:
//   - audit of every account clean (invariants 1–5, fold == row), before and after a final reap;
//   - per account: reserved == Σ amount of active holds, used == Σ committed_amount of committed and
//     late-charged holds, active_holds == their count, purchased == initial + Σ credits − Σ debits;
//   - every hold's stored state agrees with its events (one end event, one late settlement at most);
//   - every request_id maps to at most one hold; every reference to at most one transfer;
//   - the holds in the event log are exactly the holds some answer created.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "support/sanitizers.h"
#include "ledger/ledger.h"
#include "support/backends.h"

namespace tollgate {
namespace {

// Under a sanitizer every operation costs several times as much (ASan on PostgreSQL: 51–102 s a run
// on a slow CI machine, against 17–19 s here); 800 operations a thread still end in thousands of
// batches, and the full 1,500 run in the plain build on SQLite. On PostgreSQL a run is bound by the
// server's durable flush per batch, not by CPU (5 s of CPU in a 41-s run here): 100–220 s a run in
// CI whenever another build writes to the same disk, so it runs 800 there too — still thousands of
// contended batches on four accounts. TOLLGATE_STRESS_OPS sets any size (long runs on demand).
#if defined(TOLLGATE_TSAN) || defined(TOLLGATE_ASAN)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

constexpr int kWorkers = 16;
constexpr std::uint64_t kDefaultSeed = 20260101;
constexpr std::int64_t kDefaultOpsPerThread = kSanitizer ? 800 : 1500;
constexpr std::int64_t kDefaultOpsPerThreadOnPostgres = 800;
constexpr std::int64_t kInitialCredits = 40;

struct AccountSpec {
  std::string id;
  std::int64_t overdraft_limit = 0;
  std::optional<std::int64_t> max_active_holds;
};

// Four accounts covering the settings: plain, a hold cap, an overdraft, both.
const std::array<AccountSpec, 4> kAccounts{{
    {"stress-plain", 0, std::nullopt},
    {"stress-capped", 0, 4},
    {"stress-overdraft", 10, std::nullopt},
    {"stress-both", 3, 16},
}};

std::optional<std::uint64_t> env_u64(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (*end != '\0') return std::nullopt;
  return v;
}

// Violations found on any thread; reported by the test's main thread at the end.
class Problems {
 public:
  void add(std::string message) {
    std::lock_guard lock(mu_);
    ++count_;
    if (messages_.size() < 40) messages_.push_back(std::move(message));
  }
  std::int64_t count() const {
    std::lock_guard lock(mu_);
    return count_;
  }
  std::string report() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& m : messages_) out += "  " + m + "\n";
    if (count_ > static_cast<std::int64_t>(messages_.size())) {
      out += "  … and " + std::to_string(count_ - static_cast<std::int64_t>(messages_.size())) + " more\n";
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::int64_t count_ = 0;
  std::vector<std::string> messages_;
};

// Counts what happened, by operation and answer, to show what the run exercised.
class Tally {
 public:
  void add(const std::string& op, const std::string& outcome) {
    std::lock_guard lock(mu_);
    ++counts_[op + " " + outcome];
  }
  std::int64_t get(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = counts_.find(key);
    return it == counts_.end() ? 0 : it->second;
  }
  std::string report() const {
    std::lock_guard lock(mu_);
    std::ostringstream out;
    for (const auto& [key, n] : counts_) out << "  " << key << ": " << n << "\n";
    return out.str();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::int64_t> counts_;
};

// What the answers said, shared by all threads: the source of replays and of the final checks.
class Journal {
 public:
  struct Request {
    std::string request_id;
    std::string account_id;
    std::int64_t amount = 0;
    std::optional<std::string> hold_id;  // set by the first answer that named a hold
    int created_answers = 0;             // answers with created=true: at most one, ever
  };
  struct Transfer {
    std::string reference;
    std::string account_id;
    bool is_credit = true;
    std::int64_t amount = 0;
    std::string reason;
    std::optional<std::int64_t> event_id;
    int created_answers = 0;
  };
  struct HoldRecord {
    std::string hold_id;
    std::string account_id;
    std::string request_id;
    std::int64_t amount = 0;
  };

  explicit Journal(Problems& problems) : problems_(problems) {}

  // Records a reservation's answer (new or replay). Checks that one request_id only ever names one
  // hold and is created once.
  void note_reserve(const std::string& request_id, const std::string& account_id, std::int64_t amount,
                    const Result<HoldOutcome>& answer) {
    std::lock_guard lock(mu_);
    auto [it, inserted] = requests_.try_emplace(request_id);
    Request& r = it->second;
    if (inserted) {
      r = Request{request_id, account_id, amount, std::nullopt, 0};
      request_order_.push_back(request_id);
    }
    if (!answer.ok()) return;
    const Hold& hold = answer->hold;
    if (answer->created) ++r.created_answers;
    if (r.created_answers > 1) problems_.add("request " + request_id + " created a hold twice");
    if (r.hold_id && *r.hold_id != hold.hold_id) {
      problems_.add("request " + request_id + " named hold " + *r.hold_id + " and then " + hold.hold_id);
    }
    if (!r.hold_id) {
      r.hold_id = hold.hold_id;
      auto [h, fresh] = hold_index_.try_emplace(hold.hold_id, holds_.size());
      if (!fresh) {
        problems_.add("hold " + hold.hold_id + " was named by request " + holds_[h->second].request_id +
                      " and by request " + request_id);
      } else {
        holds_.push_back(HoldRecord{hold.hold_id, hold.account_id, hold.request_id, hold.amount});
      }
    }
    if (hold.request_id != request_id || hold.account_id != r.account_id || hold.amount != r.amount) {
      problems_.add("reservation " + request_id + " answered a hold of another request/account/amount");
    }
  }

  // Records a credit's or debit's answer. One reference: one event, created once.
  void note_transfer(const std::string& reference, const std::string& account_id, bool is_credit, std::int64_t amount,
                     const std::string& reason, const Result<TransferOutcome>& answer) {
    std::lock_guard lock(mu_);
    auto [it, inserted] = transfers_.try_emplace(reference);
    Transfer& t = it->second;
    if (inserted) {
      t = Transfer{reference, account_id, is_credit, amount, reason, std::nullopt, 0};
      reference_order_.push_back(reference);
    }
    if (!answer.ok()) return;
    if (answer->created) ++t.created_answers;
    if (t.created_answers > 1) problems_.add("reference " + reference + " moved credits twice");
    if (t.event_id && *t.event_id != answer->event.event_id) {
      problems_.add("reference " + reference + " answered event " + std::to_string(*t.event_id) + " and then " +
                    std::to_string(answer->event.event_id));
    }
    t.event_id = answer->event.event_id;
    const EventType kind = is_credit ? EventType::credited : EventType::debited;
    if (answer->event.type != kind || answer->event.amount != amount || answer->event.account_id != account_id ||
        answer->event.reference != std::optional<std::string>(reference)) {
      problems_.add("transfer " + reference + " answered an event of another transfer");
    }
  }

  std::optional<Request> pick_request(std::mt19937_64& rng) {
    std::lock_guard lock(mu_);
    if (request_order_.empty()) return std::nullopt;
    return requests_.at(request_order_[rng() % request_order_.size()]);
  }
  std::optional<Transfer> pick_transfer(std::mt19937_64& rng) {
    std::lock_guard lock(mu_);
    if (reference_order_.empty()) return std::nullopt;
    return transfers_.at(reference_order_[rng() % reference_order_.size()]);
  }
  std::optional<HoldRecord> pick_hold(std::mt19937_64& rng) {
    std::lock_guard lock(mu_);
    if (holds_.empty()) return std::nullopt;
    return holds_[rng() % holds_.size()];
  }
  std::optional<HoldRecord> hold(const std::string& hold_id) {
    std::lock_guard lock(mu_);
    auto it = hold_index_.find(hold_id);
    if (it == hold_index_.end()) return std::nullopt;
    return holds_[it->second];
  }

  // For the final checks, after every thread has stopped.
  std::vector<HoldRecord> holds() {
    std::lock_guard lock(mu_);
    return holds_;
  }
  std::vector<Transfer> transfers() {
    std::lock_guard lock(mu_);
    std::vector<Transfer> out;
    for (const auto& [_, t] : transfers_) out.push_back(t);
    return out;
  }
  std::vector<Request> requests() {
    std::lock_guard lock(mu_);
    std::vector<Request> out;
    for (const auto& [_, r] : requests_) out.push_back(r);
    return out;
  }

 private:
  Problems& problems_;
  std::mutex mu_;
  std::unordered_map<std::string, Request> requests_;
  std::vector<std::string> request_order_;
  std::unordered_map<std::string, Transfer> transfers_;
  std::vector<std::string> reference_order_;
  std::vector<HoldRecord> holds_;
  std::unordered_map<std::string, std::size_t> hold_index_;
};

// One worker thread's operations.
class Worker {
 public:
  Worker(int index, std::uint64_t seed, Ledger& ledger, ManualClock& clock, LateCommitPolicy policy, Journal& journal,
         Problems& problems, Tally& tally, std::atomic<std::int64_t>& ops_done)
      : index_(index),
        rng_(seed * 1'000'003 + static_cast<std::uint64_t>(index)),
        ledger_(ledger),
        clock_(clock),
        policy_(policy),
        journal_(journal),
        problems_(problems),
        tally_(tally),
        ops_done_(ops_done) {}

  void run(std::int64_t ops) {
    for (op_ = 0; op_ < ops; ++op_) {
      one_operation();
      ops_done_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

 private:
  // Runs a write, retrying the same command (same ids) while the queue answers `overloaded`, as a
  // client is told to: after a short pause, for up to about a minute.
  template <typename F>
  auto write(F&& call) -> decltype(call()) {
    for (int attempt = 0;; ++attempt) {
      auto answer = call();
      if (answer.code() != Code::overloaded || attempt >= 300'000) return answer;
      tally_.add("write", "overloaded (retried)");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  void problem(const std::string& what) {
    problems_.add("thread " + std::to_string(index_) + " op " + std::to_string(op_) + ": " + what);
  }

  template <typename T>
  void unexpected(const std::string& op, const Result<T>& answer) {
    problem(op + " answered " + std::string(code_name(answer.code())) + ": " +
            (answer.ok() ? std::string() : answer.error().detail));
  }

  const AccountSpec& some_account() { return kAccounts[rng_() % kAccounts.size()]; }
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {  // inclusive
    return lo + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  std::optional<std::int64_t> some_ttl() {
    // Short ones expire within a few operations, long ones outlive the run; 0: the default (5 min).
    static constexpr std::array<std::int64_t, 10> kTtls{1, 5, 20, 100, 500, 2'000, 10'000, 60'000, 0, 0};
    const std::int64_t ttl = kTtls[rng_() % kTtls.size()];
    if (ttl == 0) return std::nullopt;  // the server's default
    return ttl;
  }
  std::string fresh_id(const char* kind) {
    return std::string("st-") + kind + "-" + std::to_string(index_) + "-" + std::to_string(op_);
  }
  // A hold to act on: mostly one this thread made recently, else any known hold (contention).
  std::optional<Journal::HoldRecord> some_hold() {
    if (!mine_.empty() && rng_() % 2 == 0) {
      const std::size_t recent = std::min<std::size_t>(mine_.size(), 8);
      return journal_.hold(mine_[mine_.size() - 1 - rng_() % recent]);
    }
    return journal_.pick_hold(rng_);
  }

  void one_operation() {
    // Weights out of 100.
    const std::uint64_t roll = rng_() % 100;
    if (roll < 3) return create_account();
    if (roll < 10) return credit();
    if (roll < 16) return debit();
    if (roll < 36) return reserve();
    if (roll < 42) return replay_reserve();
    if (roll < 45) return replay_transfer();
    if (roll < 60) return commit();
    if (roll < 68) return release();
    if (roll < 73) return extend();
    if (roll < 76) return reap();
    if (roll < 86) return read_account();
    if (roll < 91) return read_hold();
    if (roll < 94) return read_holds();
    if (roll < 97) return read_events();
    return audit_one();
  }

  void create_account() {
    const AccountSpec& spec = some_account();
    if (rng_() % 4 == 0) {  // other settings: a conflict, never a change
      auto answer = write([&] { return ledger_.create_account({spec.id, spec.overdraft_limit + 1, spec.max_active_holds}); });
      tally_.add("create_account(other settings)", std::string(code_name(answer.code())));
      if (answer.code() != Code::conflict) unexpected("create_account(other settings)", answer);
      return;
    }
    auto answer = write([&] { return ledger_.create_account({spec.id, spec.overdraft_limit, spec.max_active_holds}); });
    tally_.add("create_account(replay)", std::string(code_name(answer.code())));
    if (!answer.ok() || answer->created) return unexpected("create_account(replay)", answer);
    check_view(answer->account);
  }

  void credit() {
    const AccountSpec& spec = some_account();
    const std::int64_t amount = uniform(1, 10);
    const std::string reference = fresh_id("credit");
    auto answer = write([&] { return ledger_.credit({spec.id, amount, reference}); });
    tally_.add("credit", std::string(code_name(answer.code())));
    journal_.note_transfer(reference, spec.id, true, amount, "", answer);
    if (!answer.ok() || !answer->created) return unexpected("credit", answer);
    check_view(answer->account);
  }

  void debit() {
    const AccountSpec& spec = some_account();
    const std::int64_t amount = uniform(1, 10);
    const std::string reference = fresh_id("debit");
    const std::string reason = "stress " + std::to_string(index_);
    auto answer = write([&] { return ledger_.debit({spec.id, amount, reference, reason}); });
    tally_.add("debit", std::string(code_name(answer.code())));
    journal_.note_transfer(reference, spec.id, false, amount, reason, answer);
    if (answer.code() == Code::insufficient_credits) return;
    if (!answer.ok() || !answer->created) return unexpected("debit", answer);
    check_view(answer->account);
  }

  void reserve() {
    const AccountSpec& spec = some_account();
    const std::int64_t amount = uniform(1, 8);
    const std::string request_id = fresh_id("req");
    const auto ttl = some_ttl();
    const std::int64_t before = clock_.now_ms();
    auto answer = write([&] { return ledger_.reserve({spec.id, amount, request_id, ttl, "", ""}); });
    const std::int64_t after = clock_.now_ms();
    tally_.add(std::string("reserve ttl=") + (ttl ? std::to_string(*ttl) : "default"), std::string(code_name(answer.code())));
    journal_.note_reserve(request_id, spec.id, amount, answer);
    if (answer.code() == Code::insufficient_credits || answer.code() == Code::too_many_holds) return;
    if (!answer.ok() || !answer->created) return unexpected("reserve", answer);
    const Hold& hold = answer->hold;
    mine_.push_back(hold.hold_id);
    if (hold.status != HoldStatus::active || hold.committed_amount != 0) problem("a new hold is not active: " + hold.hold_id);
    if (hold.created_at_ms < before || hold.created_at_ms > after) problem("hold created outside its call's time");
    const std::int64_t expected_ttl = ttl.value_or(ledger_.options().hold_ttl_ms_default);
    if (hold.expires_at_ms - hold.created_at_ms != expected_ttl) problem("hold deadline is not its TTL: " + hold.hold_id);
  }

  void replay_reserve() {
    auto original = journal_.pick_request(rng_);
    if (!original) return reserve();
    const auto ttl = some_ttl();  // drawn once: a retry after `overloaded` draws nothing more
    if (original->hold_id && rng_() % 5 == 0) {  // the same request_id with another amount
      auto answer = write([&] {
        return ledger_.reserve({original->account_id, original->amount + 1, original->request_id, ttl, "", ""});
      });
      tally_.add("reserve(mismatched replay)", std::string(code_name(answer.code())));
      if (answer.code() != Code::idempotency_mismatch) unexpected("reserve(mismatched replay)", answer);
      return;
    }
    auto answer = write([&] {
      return ledger_.reserve({original->account_id, original->amount, original->request_id, ttl, "", ""});
    });
    tally_.add(original->hold_id ? "reserve(replay of a hold)" : "reserve(retry of a refusal)",
               std::string(code_name(answer.code())));
    journal_.note_reserve(original->request_id, original->account_id, original->amount, answer);
    if (original->hold_id) {
      // The hold exists: the answer is that hold, whatever state it is in now.
      if (!answer.ok() || answer->created) return unexpected("reserve(replay)", answer);
      if (answer->hold.hold_id != *original->hold_id) problem("replay of " + original->request_id + " named another hold");
      return;
    }
    // It was refused before; now it may make the hold, or be refused again.
    if (answer.code() == Code::insufficient_credits || answer.code() == Code::too_many_holds) return;
    if (!answer.ok()) return unexpected("reserve(retry)", answer);
    if (answer->created) mine_.push_back(answer->hold.hold_id);
  }

  void replay_transfer() {
    auto original = journal_.pick_transfer(rng_);
    if (!original) return credit();
    const bool mismatch = original->event_id && rng_() % 5 == 0;
    const std::int64_t amount = mismatch ? original->amount + 1 : original->amount;
    auto answer = original->is_credit
                      ? write([&] { return ledger_.credit({original->account_id, amount, original->reference}); })
                      : write([&] {
                          return ledger_.debit({original->account_id, amount, original->reference, original->reason});
                        });
    const std::string op = std::string(original->is_credit ? "credit" : "debit") +
                           (mismatch ? "(mismatched replay)" : original->event_id ? "(replay)" : "(retry of a refusal)");
    tally_.add(op, std::string(code_name(answer.code())));
    if (mismatch) {
      if (answer.code() != Code::idempotency_mismatch) unexpected(op, answer);
      return;
    }
    journal_.note_transfer(original->reference, original->account_id, original->is_credit, original->amount,
                           original->reason, answer);
    if (original->event_id) {
      if (!answer.ok() || answer->created) return unexpected(op, answer);
      if (answer->event.event_id != *original->event_id) problem(op + " of " + original->reference + " named another event");
      return;
    }
    if (answer.code() == Code::insufficient_credits) return;
    if (!answer.ok()) unexpected(op, answer);
  }

  void commit() {
    auto target = some_hold();
    if (!target) return reserve();
    std::optional<std::int64_t> amount;
    const bool partial = rng_() % 2 == 0;
    if (partial) amount = uniform(1, target->amount + 1);  // one more than the hold: invalid
    auto answer = write([&] { return ledger_.commit({target->hold_id, amount}); });
    tally_.add(partial ? "commit(partial)" : "commit(full)", std::string(code_name(answer.code())) +
                                                                 (answer.ok() ? (answer->created ? " created" : " replay") : ""));
    const std::int64_t wanted = amount.value_or(target->amount);
    if (wanted > target->amount) {
      if (answer.code() != Code::invalid_request) unexpected("commit(more than held)", answer);
      return;
    }
    switch (answer.code()) {
      case Code::ok:
        break;
      case Code::hold_committed:  // committed / late-charged with another amount
      case Code::hold_released:
        return;
      case Code::hold_expired:
        if (policy_ != LateCommitPolicy::reject) unexpected("commit", answer);
        return;
      default:
        return unexpected("commit", answer);
    }
    const Hold& hold = answer->hold;
    if (hold.hold_id != target->hold_id) return problem("commit answered another hold");
    switch (hold.status) {
      case HoldStatus::committed:
        if (hold.committed_amount != wanted) problem("committed " + std::to_string(hold.committed_amount) + ", asked " + std::to_string(wanted));
        break;
      case HoldStatus::expired:
        if (hold.late_outcome == LateOutcome::charged) {
          if (policy_ != LateCommitPolicy::charge) problem("late-charged under another policy");
          if (hold.committed_amount != wanted) problem("late-charged " + std::to_string(hold.committed_amount) + ", asked " + std::to_string(wanted));
        } else if (hold.late_outcome == LateOutcome::forgiven) {
          if (policy_ == LateCommitPolicy::reject) problem("late-forgiven under the reject policy");
          if (hold.committed_amount != 0) problem("a forgiven hold has a committed amount");
        } else {
          problem("a commit answered an expired hold without a late outcome");
        }
        break;
      default:
        problem("a commit answered a hold in state " + std::string(hold_status_name(hold.status)));
    }
  }

  void release() {
    auto target = some_hold();
    if (!target) return reserve();
    auto answer = write([&] { return ledger_.release({target->hold_id}); });
    tally_.add("release", std::string(code_name(answer.code())) + (answer.ok() ? (answer->created ? " created" : " replay") : ""));
    if (answer.code() == Code::hold_committed) return;
    if (!answer.ok()) return unexpected("release", answer);
    const Hold& hold = answer->hold;
    const bool released = hold.status == HoldStatus::released;
    const bool expired_uncharged = hold.status == HoldStatus::expired && hold.late_outcome != LateOutcome::charged;
    if (!released && !expired_uncharged) problem("release answered a hold in state " + std::string(hold_status_name(hold.status)));
    if (answer->created && !released) problem("a release that changed something did not release");
  }

  void extend() {
    auto target = some_hold();
    if (!target) return reserve();
    const std::int64_t ttl = some_ttl().value_or(1000);
    const std::int64_t before = clock_.now_ms();
    auto answer = write([&] { return ledger_.extend({target->hold_id, ttl}); });
    const std::int64_t after = clock_.now_ms();
    tally_.add("extend", std::string(code_name(answer.code())));
    if (answer.code() == Code::hold_committed || answer.code() == Code::hold_released ||
        answer.code() == Code::hold_expired) {
      return;
    }
    if (!answer.ok()) return unexpected("extend", answer);
    if (answer->hold.status != HoldStatus::active) problem("extend answered a hold that is not active");
    if (answer->hold.expires_at_ms < before + ttl || answer->hold.expires_at_ms > after + ttl) {
      problem("extend set a deadline outside now + ttl");
    }
  }

  void reap() {
    auto answer = write([&] { return ledger_.reap_once(); });
    tally_.add("reap_once", std::string(code_name(answer.code())));
    if (!answer.ok()) return unexpected("reap_once", answer);
    if (*answer < 0) problem("reap_once expired a negative number of holds");
  }

  // The invariants every snapshot of an account satisfies (1 and 3, and the hold cap).
  void check_view(const Account& a) {
    const Balances& b = a.balances;
    if (b.available + b.reserved + b.used != b.purchased) problem(a.account_id + ": identity broken in a read");
    if (b.available < -a.overdraft_limit) problem(a.account_id + ": available below -overdraft_limit");
    if (b.reserved < 0 || b.used < 0 || a.active_holds < 0) problem(a.account_id + ": negative balance in a read");
    if (a.max_active_holds && a.active_holds > *a.max_active_holds) problem(a.account_id + ": more active holds than allowed");
    if ((a.active_holds == 0) != (b.reserved == 0)) problem(a.account_id + ": active holds and reserved disagree");
  }

  void read_account() {
    const AccountSpec& spec = some_account();
    auto answer = ledger_.get_account(spec.id);
    tally_.add("get_account", std::string(code_name(answer.code())));
    if (!answer.ok()) return unexpected("get_account", answer);
    check_view(*answer);
  }

  void read_hold() {
    auto target = journal_.pick_hold(rng_);
    if (!target) return read_account();
    auto answer = ledger_.get_hold(target->hold_id);
    tally_.add("get_hold", std::string(code_name(answer.code())));
    if (!answer.ok()) return unexpected("get_hold", answer);
    if (answer->request_id != target->request_id || answer->account_id != target->account_id ||
        answer->amount != target->amount) {
      problem("get_hold " + target->hold_id + " does not match what its reservation answered");
    }
    if (answer->committed_amount > answer->amount) problem("hold committed more than it held");
    if ((answer->status == HoldStatus::active) != !answer->closed_at_ms.has_value()) {
      problem("hold " + target->hold_id + ": closed_at set iff not active, broken");
    }
  }

  void read_holds() {
    const AccountSpec& spec = some_account();
    static constexpr std::array<std::optional<HoldStatus>, 5> kFilters{
        std::nullopt, HoldStatus::active, HoldStatus::committed, HoldStatus::released, HoldStatus::expired};
    const auto status = kFilters[rng_() % kFilters.size()];
    auto answer = ledger_.list_holds({spec.id, status}, {50});
    tally_.add("list_holds", std::string(code_name(answer.code())));
    if (!answer.ok()) return unexpected("list_holds", answer);
    for (const Hold& h : answer->items) {
      if (h.account_id != spec.id) problem("list_holds returned another account's hold");
      if (status && h.status != *status) problem("list_holds returned a hold of another status");
    }
  }

  void read_events() {
    const AccountSpec& spec = some_account();
    auto answer = ledger_.read_events(spec.id, 0, 200);
    tally_.add("read_events", std::string(code_name(answer.code())));
    if (!answer.ok()) return unexpected("read_events", answer);
    std::int64_t last = 0;
    for (const Event& e : answer->events) {
      if (e.event_id <= last) problem("read_events: event ids do not increase");
      last = e.event_id;
      if (e.account_id != spec.id) problem("read_events returned another account's event");
      if (e.available_after < -spec.overdraft_limit || e.reserved_after < 0 || e.used_after < 0) {
        problem("event " + std::to_string(e.event_id) + " recorded balances out of bounds");
      }
    }
  }

  void audit_one() {
    const AccountSpec& spec = some_account();
    auto answer = ledger_.audit(spec.id);
    tally_.add("audit(one account)", std::string(code_name(answer.code())));
    if (!answer.ok()) return unexpected("audit", answer);
    for (const auto& v : answer->violations) problem("audit during the run: " + v.account_id + ": " + v.message);
  }

  const int index_;
  std::mt19937_64 rng_;
  Ledger& ledger_;
  ManualClock& clock_;
  const LateCommitPolicy policy_;
  Journal& journal_;
  Problems& problems_;
  Tally& tally_;
  std::atomic<std::int64_t>& ops_done_;
  std::vector<std::string> mine_;  // holds this thread created
  std::int64_t op_ = 0;
};

std::vector<Event> all_events(Ledger& ledger, const std::string& account_id) {
  std::vector<Event> out;
  std::int64_t after = 0;
  for (;;) {
    auto page = ledger.read_events(account_id, after, limits::kEventsPageMax);
    EXPECT_TRUE(page.ok()) << page.error().detail;
    if (!page.ok() || page->events.empty()) return out;
    out.insert(out.end(), page->events.begin(), page->events.end());
    after = page->next_after;
  }
}

void expect_audit_clean(Ledger& ledger, const char* when) {
  auto report = ledger.audit(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().detail;
  EXPECT_EQ(report->accounts_checked, static_cast<std::int64_t>(kAccounts.size())) << when;
  for (const auto& v : report->violations) ADD_FAILURE() << "audit " << when << ": " << v.account_id << ": " << v.message;
}

struct StressParam {
  testing::StoreBackend backend;
  LateCommitPolicy policy = LateCommitPolicy::charge;
};

void PrintTo(const StressParam& p, std::ostream* out) {
  *out << p.backend.name << ", late commits: " << late_commit_policy_name(p.policy);
}

class LedgerStress : public ::testing::TestWithParam<StressParam> {};

TEST_P(LedgerStress, RandomOperationsKeepEveryInvariant) {
  const std::uint64_t seed = env_u64("TOLLGATE_STRESS_SEED").value_or(kDefaultSeed);
  const std::int64_t ops_per_thread =
      static_cast<std::int64_t>(env_u64("TOLLGATE_STRESS_OPS")
                                    .value_or(GetParam().backend.name == "postgres" ? kDefaultOpsPerThreadOnPostgres
                                                                                    : kDefaultOpsPerThread));
  const LateCommitPolicy policy = GetParam().policy;
  std::printf("[ stress   ] seed %llu (rerun: TOLLGATE_STRESS_SEED=%llu), %d threads x %lld operations, late "
              "commits: %s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), kWorkers,
              static_cast<long long>(ops_per_thread), std::string(late_commit_policy_name(policy)).c_str());
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));

  ManualClock clock;
  auto store = GetParam().backend.open_fresh(clock);
  LedgerOptions options;
  options.reaper_interval_ms = 0;  // the workers call reap_once()
  options.late_commit = policy;
  options.id_seed = seed;
  // Small batches and a short queue: many transactions per run, and `overloaded` answers to retry.
  options.group_commit.batch_max = 8;
  options.group_commit.queue_max = 12;
  Ledger ledger(*store, clock, options);

  for (const AccountSpec& spec : kAccounts) {
    auto created = ledger.create_account({spec.id, spec.overdraft_limit, spec.max_active_holds});
    ASSERT_TRUE(created.ok()) << created.error().detail;
    auto credited = ledger.credit({spec.id, kInitialCredits, "initial-" + spec.id});
    ASSERT_TRUE(credited.ok()) << credited.error().detail;
  }

  Problems problems;
  Tally tally;
  Journal journal(problems);
  std::atomic<std::int64_t> ops_done{0};
  std::atomic<bool> workers_done{false};

  // The clock thread: time moves 1–20 ms per 16 operations done (in total), so short TTLs expire
  // during the run and long ones do not. The steps come from the seed.
  std::thread clock_thread([&] {
    std::mt19937_64 rng(seed ^ 0xc10c'c10c'c10c'c10cULL);
    std::int64_t next = 16;
    while (!workers_done.load(std::memory_order_acquire)) {
      if (ops_done.load(std::memory_order_acquire) >= next) {
        clock.advance_ms(1 + static_cast<std::int64_t>(rng() % 20));
        next += 16;
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });

  const auto started = std::chrono::steady_clock::now();
  {
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < kWorkers; ++i) {
      workers.push_back(std::make_unique<Worker>(i, seed, ledger, clock, policy, journal, problems, tally, ops_done));
    }
    std::vector<std::thread> pool;
    for (int i = 0; i < kWorkers; ++i) pool.emplace_back([&, i] { workers[i]->run(ops_per_thread); });
    for (auto& t : pool) t.join();
  }
  workers_done.store(true, std::memory_order_release);
  clock_thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const auto stats = ledger.write_stats();
  std::printf("[ stress   ] %lld operations in %.2f s, %llu transactions; what happened:\n%s",
              static_cast<long long>(ops_done.load()), seconds, static_cast<unsigned long long>(stats.batches),
              tally.report().c_str());

  EXPECT_EQ(problems.count(), 0) << "seed " << seed << ": violations seen during the run:\n" << problems.report();

  // --- afterwards ---------------------------------------------------------------------------------
  expect_audit_clean(ledger, "after the run");
  auto reaped = ledger.reap_once();  // stored states now equal the effective ones
  ASSERT_TRUE(reaped.ok()) << reaped.error().detail;
  expect_audit_clean(ledger, "after the final reap");

  const auto holds = journal.holds();
  const auto transfers = journal.transfers();
  const auto requests = journal.requests();

  // Every request_id names at most one hold, and each hold is named by exactly one request.
  {
    std::set<std::string> named;
    for (const auto& r : requests) {
      EXPECT_LE(r.created_answers, 1) << r.request_id;
      if (r.hold_id) {
        EXPECT_TRUE(named.insert(*r.hold_id).second) << "hold " << *r.hold_id << " named by two requests";
      }
    }
    EXPECT_EQ(named.size(), holds.size());
  }

  struct Expected {
    std::int64_t active_sum = 0, active_count = 0, used = 0, purchased = kInitialCredits;
  };
  std::map<std::string, Expected> expected;
  for (const auto& t : transfers) {
    EXPECT_LE(t.created_answers, 1) << t.reference;
    if (t.created_answers == 1) expected[t.account_id].purchased += t.is_credit ? t.amount : -t.amount;
  }

  // Each hold as stored now, against its events.
  std::map<std::string, std::vector<Event>> hold_events;
  std::set<std::string> reserved_in_log;
  for (const AccountSpec& spec : kAccounts) {
    for (const Event& e : all_events(ledger, spec.id)) {
      if (!e.hold_id) continue;
      hold_events[*e.hold_id].push_back(e);
      if (e.type == EventType::reserved) reserved_in_log.insert(*e.hold_id);
    }
  }
  std::set<std::string> answered;
  std::set<std::string> request_ids;
  std::map<std::string, std::int64_t> by_status;
  for (const auto& record : holds) {
    answered.insert(record.hold_id);
    auto hold = ledger.get_hold(record.hold_id);
    ASSERT_TRUE(hold.ok()) << record.hold_id << ": " << hold.error().detail;
    EXPECT_EQ(hold->request_id, record.request_id);
    EXPECT_EQ(hold->account_id, record.account_id);
    EXPECT_EQ(hold->amount, record.amount);
    EXPECT_TRUE(request_ids.insert(hold->request_id).second) << "request_id " << hold->request_id << " has two holds";
    Expected& x = expected[hold->account_id];
    std::string status(hold_status_name(hold->status));
    if (hold->late_outcome != LateOutcome::none) status += "+late_" + std::string(late_outcome_name(hold->late_outcome));
    ++by_status[status];

    // The stored state and the event log tell the same story.
    std::vector<EventType> story;
    for (const Event& e : hold_events[record.hold_id]) story.push_back(e.type);
    // The life-cycle without its extensions: an `extended` event moves nothing and comes only
    // while the hold is held (before the event that ended it).
    std::vector<Event> events;
    bool ended = false;
    for (const Event& e : hold_events[record.hold_id]) {
      if (e.type == EventType::extended) {
        EXPECT_EQ(e.amount, 0) << record.hold_id;
        EXPECT_FALSE(ended) << record.hold_id << ": extended after it ended";
        continue;
      }
      if (e.type != EventType::reserved) ended = true;
      events.push_back(e);
    }
    ASSERT_FALSE(events.empty()) << record.hold_id;
    EXPECT_EQ(events.front().type, EventType::reserved) << record.hold_id;
    EXPECT_EQ(events.front().amount, record.amount) << record.hold_id;
    switch (hold->status) {
      case HoldStatus::active:
        x.active_sum += hold->amount;
        ++x.active_count;
        EXPECT_EQ(events.size(), 1u) << record.hold_id << ": an active hold has only its reservation";
        EXPECT_EQ(hold->committed_amount, 0);
        break;
      case HoldStatus::committed:
        x.used += hold->committed_amount;
        ASSERT_EQ(events.size(), 2u) << record.hold_id;
        EXPECT_EQ(events[1].type, EventType::committed) << record.hold_id;
        EXPECT_EQ(events[1].amount, hold->committed_amount) << record.hold_id;
        break;
      case HoldStatus::released:
        ASSERT_EQ(events.size(), 2u) << record.hold_id;
        EXPECT_EQ(events[1].type, EventType::released) << record.hold_id;
        EXPECT_EQ(hold->committed_amount, 0);
        break;
      case HoldStatus::expired:
        ASSERT_GE(events.size(), 2u) << record.hold_id;
        EXPECT_EQ(events[1].type, EventType::expired) << record.hold_id;
        switch (hold->late_outcome) {
          case LateOutcome::none:
            EXPECT_EQ(events.size(), 2u) << record.hold_id;
            EXPECT_EQ(hold->committed_amount, 0);
            break;
          case LateOutcome::charged:
            x.used += hold->committed_amount;
            ASSERT_EQ(events.size(), 3u) << record.hold_id;
            EXPECT_EQ(events[2].type, EventType::late_charged) << record.hold_id;
            EXPECT_EQ(events[2].amount, hold->committed_amount) << record.hold_id;
            break;
          case LateOutcome::forgiven:
            ASSERT_EQ(events.size(), 3u) << record.hold_id;
            EXPECT_EQ(events[2].type, EventType::late_forgiven) << record.hold_id;
            EXPECT_EQ(hold->committed_amount, 0);
            break;
        }
        break;
    }
  }
  EXPECT_EQ(answered, reserved_in_log) << "the holds in the log are exactly the holds the answers created";

  for (const AccountSpec& spec : kAccounts) {
    auto account = ledger.get_account(spec.id);
    ASSERT_TRUE(account.ok()) << account.error().detail;
    const Expected& x = expected[spec.id];
    const Balances& b = account->balances;
    EXPECT_EQ(b.reserved, x.active_sum) << spec.id << ": reserved == sum of active holds";
    EXPECT_EQ(account->active_holds, x.active_count) << spec.id;
    EXPECT_EQ(b.used, x.used) << spec.id << ": used == sum committed_amount of committed + late-charged holds";
    EXPECT_EQ(b.purchased, x.purchased) << spec.id << ": purchased == initial + credits - debits";
    EXPECT_EQ(b.available + b.reserved + b.used, b.purchased) << spec.id;
    EXPECT_GE(b.available, -spec.overdraft_limit) << spec.id;
    std::printf("[ stress   ] %s: available %lld reserved %lld used %lld purchased %lld, %lld active holds\n",
                spec.id.c_str(), static_cast<long long>(b.available), static_cast<long long>(b.reserved),
                static_cast<long long>(b.used), static_cast<long long>(b.purchased),
                static_cast<long long>(account->active_holds));
  }
  std::printf("[ stress   ] %zu holds by final state:", holds.size());
  for (const auto& [status, n] : by_status) std::printf(" %s=%lld", status.c_str(), static_cast<long long>(n));
  std::printf("\n");
}

std::vector<StressParam> stress_params() {
  std::vector<StressParam> out;
  for (const auto& backend : testing::all_backends()) {
    for (LateCommitPolicy policy : {LateCommitPolicy::charge, LateCommitPolicy::forgive, LateCommitPolicy::reject}) {
      out.push_back(StressParam{backend, policy});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, LedgerStress, ::testing::ValuesIn(stress_params()),
                         [](const ::testing::TestParamInfo<StressParam>& info) {
                           return info.param.backend.name + "_late_" +
                                  std::string(late_commit_policy_name(info.param.policy));
                         });

}  // namespace
}  // namespace tollgate
