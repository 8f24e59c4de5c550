// The pure core of a batch (core/batch.h): which keys a batch reads, and what it decides on the rows
// it loaded — without a database. A small in-memory World plays the backend: it answers
// keys_of()'s loads the way the stores do and applies the Effects, so batches can follow each other.
// The last tests run seeded random batches and check every invariant after each one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/hold_id.h"
#include "core/invariants.h"
#include "core/limits.h"
#include "core/lots.h"
#include "core/rules.h"
#include "slices.h"

namespace tollgate {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::int64_t kStart = 1'767'225'600'000;  // 2026-01-01
constexpr std::int64_t kTtl = 60'000;

// An in-memory backend: rows in maps, loads as the stores load, effects applied as they write.
class World {
 public:
  std::int64_t now = kStart;
  std::map<std::string, Account> accounts;
  std::map<std::int64_t, Hold> holds;  // by seq
  std::map<std::string, std::pair<Transfer, Event>> transfers;
  std::map<std::string, ApiKey> keys;
  std::vector<Event> events;
  std::int64_t last_seq = 0;
  std::map<std::int64_t, Lot> lots;  // by seq

  batch::Snapshot load(const batch::Keys& k) const {
    batch::Snapshot s;
    s.now_ms = now;
    std::vector<std::string> locked = k.accounts;
    for (const std::string& id : k.hold_ids) {
      if (const Hold* h = hold(id)) {
        s.holds.push_back(*h);
        locked.push_back(h->account_id);
      }
    }
    for (const auto& [seq, h] : holds) {
      if (std::binary_search(k.request_ids.begin(), k.request_ids.end(), h.request_id)) s.holds.push_back(h);
    }
    std::sort(locked.begin(), locked.end());
    locked.erase(std::unique(locked.begin(), locked.end()), locked.end());
    for (const std::string& id : locked) {
      auto a = accounts.find(id);
      if (a == accounts.end()) continue;
      s.accounts.push_back(a->second);
      std::int64_t n = 0;
      for (const Hold& h : by_deadline()) {
        if (h.account_id == id && rules::is_overdue(h, now) && n++ < limits::kReaperBatchMaxDefault) s.holds.push_back(h);
      }
    }
    std::int64_t reaped = 0;
    for (const Hold& h : by_deadline()) {
      if (reaped >= k.overdue_max) break;
      if (!rules::is_overdue(h, now)) continue;
      ++reaped;
      s.holds.push_back(h);
      s.accounts.push_back(accounts.at(h.account_id));
    }
    load_lots(k, s);
    for (const std::string& ref : k.references) {
      if (auto t = transfers.find(ref); t != transfers.end()) s.transfers.push_back(t->second);
    }
    for (const std::string& id : k.view_accounts) {
      if (accounts.count(id) == 0) continue;
      batch::AccountView v;
      v.account_id = id;
      std::vector<std::pair<std::int64_t, std::int64_t>> live;
      for (const auto& [seq, h] : holds) {
        if (h.account_id != id || h.status != HoldStatus::active) continue;
        if (rules::is_overdue(h, now)) {
          ++v.overdue_count;
          v.overdue_sum += h.amount;
        } else {
          live.emplace_back(h.created_at_ms, seq);
        }
      }
      std::sort(live.begin(), live.end());
      if (static_cast<std::int64_t>(live.size()) > k.oldest_live_needed()) live.resize(k.oldest_live_needed());
      v.oldest_live = live;
      s.views.push_back(std::move(v));
    }
    for (const std::string& id : k.key_ids) {
      if (auto key = keys.find(id); key != keys.end()) s.keys.push_back(key->second);
    }
    for (std::int64_t i = 1; i <= k.new_holds_max; ++i) s.new_hold_seqs.push_back(last_seq + i);
    const std::int64_t last_lot = lots.empty() ? 0 : lots.rbegin()->first;
    for (std::int64_t i = 1; i <= k.new_lots_max; ++i) s.new_lot_seqs.push_back(last_lot + i);
    return s;
  }

  // As the stores: the accounts of the oldest overdue lots (a reaper pass), then every locked
  // account's live lots, then (for a refund) what the loaded holds of locked accounts drew.
  void load_lots(const batch::Keys& k, batch::Snapshot& s) const {
    std::vector<const Lot*> overdue;
    for (const auto& [seq, lot] : lots) {
      if (lot.available > 0 && lots::is_overdue(lot, now)) overdue.push_back(&lot);
    }
    std::stable_sort(overdue.begin(), overdue.end(), [](const Lot* a, const Lot* b) {
      return *a->terms.expires_at_ms < *b->terms.expires_at_ms;
    });
    for (std::size_t i = 0; i < overdue.size() && static_cast<std::int64_t>(i) < k.overdue_max; ++i) {
      s.accounts.push_back(accounts.at(overdue[i]->account_id));
    }
    std::vector<std::string> locked;
    for (const Account& a : s.accounts) locked.push_back(a.account_id);
    const auto is_locked = [&](const std::string& id) { return std::find(locked.begin(), locked.end(), id) != locked.end(); };
    for (const auto& [seq, lot] : lots) {
      if (is_locked(lot.account_id) && (lot.available > 0 || lot.reserved > 0)) s.lots.push_back(lot);
    }
    if (!k.refunds) return;  // a commit or release gives back to live lots only
    for (const Hold& h : s.holds) {
      if (!is_locked(h.account_id)) continue;
      for (const LotDraw& d : h.lots) s.lots.push_back(lots.at(d.lot_seq));
    }
  }

  // Applies the effects as a store writes them; returns the event ids it gave.
  std::vector<std::int64_t> write(const batch::Effects& e) {
    for (const Account& a : e.new_accounts) EXPECT_TRUE(accounts.emplace(a.account_id, a).second);
    for (const auto& c : e.changed_accounts) {
      EXPECT_EQ(accounts.at(c.after.account_id), c.before) << "an account changed behind the batch";
      accounts[c.after.account_id] = c.after;
    }
    for (const Hold& h : e.new_holds) {
      const std::int64_t seq = *hold_id_seq(h.hold_id);
      EXPECT_TRUE(holds.emplace(seq, h).second);
      last_seq = std::max(last_seq, seq);
    }
    for (const auto& c : e.changed_holds) {
      const std::int64_t seq = *hold_id_seq(c.after.hold_id);
      EXPECT_EQ(holds.at(seq), c.before) << "a hold changed behind the batch";
      holds[seq] = c.after;
    }
    std::vector<std::int64_t> ids;
    for (Event ev : e.events) {
      ev.event_id = static_cast<std::int64_t>(events.size()) + 1;
      ids.push_back(ev.event_id);
      events.push_back(ev);
    }
    for (const auto& t : e.transfers) {
      Transfer tr = t.transfer;
      tr.event_id = ids.at(t.event_index);
      EXPECT_TRUE(transfers.emplace(tr.reference, std::make_pair(tr, events.at(tr.event_id - 1))).second);
    }
    for (const Lot& lot : e.new_lots) EXPECT_TRUE(lots.emplace(lot.seq, lot).second);
    for (const auto& c : e.changed_lots) {
      EXPECT_EQ(lots.at(c.after.seq), c.before) << "a lot changed behind the batch";
      lots[c.after.seq] = c.after;
    }
    for (const ApiKey& k : e.new_keys) EXPECT_TRUE(keys.emplace(k.key_id, k).second);
    for (const auto& c : e.changed_keys) keys[c.after.key_id] = c.after;
    return ids;
  }

  // One batch: load, decide, write. Returns the decision (results with event ids filled in).
  batch::Decision run(std::vector<Command> commands) {
    batch::Decision d = batch::decide(commands, load(batch::keys_of(commands)));
    batch::fill_event_ids(d, write(d.effects));
    return d;
  }
  CommandResult one(Command command) { return run({std::move(command)}).results.at(0); }

  const Hold* hold(std::string_view id) const {
    const auto seq = hold_id_seq(id);
    if (!seq) return nullptr;
    auto it = holds.find(*seq);
    return it != holds.end() && it->second.hold_id == id ? &it->second : nullptr;
  }
  std::vector<Event> events_of(const std::string& account) const {
    std::vector<Event> out;
    for (const Event& e : events) {
      if (e.account_id == account) out.push_back(e);
    }
    return out;
  }
  // Every invariant of design.md that the rows and the log can show.
  std::vector<std::string> violations() const {
    std::vector<std::string> out;
    for (const auto& [id, a] : accounts) {
      std::int64_t sum = 0, count = 0;
      for (const auto& [seq, h] : holds) {
        if (h.account_id == id && h.status == HoldStatus::active) {
          sum += h.amount;
          ++count;
        }
      }
      for (auto& v : invariants::check_account(a, events_of(id), sum, count)) out.push_back(id + ": " + v);
      std::vector<Lot> own;
      std::map<std::int64_t, std::int64_t> drawn;
      for (const auto& [seq, lot] : lots) {
        if (lot.account_id == id) own.push_back(lot);
      }
      for (const auto& [seq, h] : holds) {
        if (h.account_id != id || h.status != HoldStatus::active) continue;
        for (const LotDraw& d : h.lots) drawn[d.lot_seq] += d.amount;
      }
      if (auto bad = lots::check_account_lots(a, own)) out.push_back(id + ": " + *bad);
      for (const Lot& lot : own) {
        if (lot.reserved != drawn[lot.seq]) out.push_back(id + ": " + lot_id(lot.seq) + " reserved differs from its holds' draws");
      }
    }
    return out;
  }

 private:
  std::vector<Hold> by_deadline() const {
    std::vector<Hold> out;
    for (const auto& [seq, h] : holds) {
      if (h.status == HoldStatus::active) out.push_back(h);
    }
    std::stable_sort(out.begin(), out.end(), [](const Hold& a, const Hold& b) { return a.expires_at_ms < b.expires_at_ms; });
    return out;
  }
};

ReserveCommand reserve(std::string account, std::int64_t amount, std::string request, std::int64_t ttl = kTtl) {
  return ReserveCommand{std::move(account), amount, request, ttl, "", "r" + request};
}
CommitCommand commit(std::string hold, std::optional<std::int64_t> amount = std::nullopt,
                     LateCommitPolicy policy = LateCommitPolicy::charge) {
  return CommitCommand{std::move(hold), amount, policy};
}

template <typename T>
const T& outcome(const CommandResult& r) {
  EXPECT_TRUE(r.ok()) << r.error().detail;
  return std::get<T>(r.value());
}

Balances bal(std::int64_t available, std::int64_t reserved, std::int64_t used, std::int64_t purchased) {
  return Balances{available, reserved, used, purchased};
}

std::vector<EventType> types(const std::vector<Event>& events) {
  std::vector<EventType> out;
  for (const Event& e : events) out.push_back(e.type);
  return out;
}

class BatchDecision : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(w.one(CreateAccountCommand{"alice", 0, std::nullopt}).ok());
    ASSERT_TRUE(w.one(CreditCommand{"alice", 10, "pay-1"}).ok());
  }
  std::string hold(std::int64_t amount, const std::string& request, std::int64_t ttl = kTtl) {
    return outcome<HoldOutcome>(w.one(reserve("alice", amount, request, ttl))).hold.hold_id;
  }
  World w;
};

// --- keys -----------------------------------------------------------------------------------------

TEST(BatchKeys, EachCommandKindNamesTheRowsItReads) {
  const std::vector<Command> commands{
      CreateAccountCommand{"carol", 0, std::nullopt},
      CreditCommand{"bob", 5, "ref-b"},
      DebitCommand{"alice", 1, "ref-a", "refund"},
      reserve("bob", 2, "req-1"),
      reserve("bob", 2, "req-1"),  // the same key twice: listed once
      commit("hold_7_ab"),
      ReleaseCommand{"hold_3"},
      ExtendCommand{"not-a-hold-id", 5},
      ExpireOverdueCommand{10},
      ExpireOverdueCommand{5},
      CreateKeyCommand{"key-1", std::string("dave"), "sha"},
      RevokeKeyCommand{"key-0"},
  };
  const batch::Keys k = batch::keys_of(commands);
  EXPECT_THAT(k.accounts, ElementsAre("alice", "bob", "carol", "dave"));
  EXPECT_THAT(k.hold_ids, ElementsAre("hold_3", "hold_7_ab", "not-a-hold-id"));
  EXPECT_THAT(k.hold_seqs, ElementsAre(3, 7));  // a malformed id names no row
  EXPECT_THAT(k.request_ids, ElementsAre("req-1"));
  EXPECT_THAT(k.references, ElementsAre("ref-a", "ref-b"));
  EXPECT_THAT(k.key_ids, ElementsAre("key-0", "key-1"));
  EXPECT_THAT(k.view_accounts, ElementsAre("alice", "bob", "carol"));
  EXPECT_EQ(k.new_holds_max, 2);        // one per reserve command, replays included
  EXPECT_EQ(k.overdue_max, 15);         // the reaper's passes add up
  EXPECT_EQ(k.live_holds_ending_max, 2);  // a commit and a release
  EXPECT_EQ(k.oldest_live_needed(), 3);
}

TEST(BatchKeys, AnEmptyBatchReadsNothing) {
  const batch::Keys k = batch::keys_of({});
  EXPECT_TRUE(k.accounts.empty() && k.hold_ids.empty() && k.request_ids.empty() && k.references.empty());
  EXPECT_EQ(k.new_holds_max + k.overdue_max + k.live_holds_ending_max, 0);
}

// --- reservations ---------------------------------------------------------------------------------

TEST_F(BatchDecision, AReservationThatFitsMovesCreditsAndWritesTheAccountOnceTheHoldAndItsEvent) {
  const batch::Decision d = w.run({reserve("alice", 3, "req-1")});
  const Hold& h = outcome<HoldOutcome>(d.results[0]).hold;
  EXPECT_TRUE(outcome<HoldOutcome>(d.results[0]).created);
  EXPECT_EQ(h.hold_id, "hold_1_rreq-1");
  EXPECT_EQ(h.status, HoldStatus::active);
  EXPECT_EQ(h.expires_at_ms, kStart + kTtl);
  EXPECT_EQ(h.metadata_json, "{}");
  ASSERT_EQ(d.effects.changed_accounts.size(), 1u);
  EXPECT_EQ(d.effects.changed_accounts[0].before.balances, bal(10, 0, 0, 10));
  EXPECT_EQ(d.effects.changed_accounts[0].after.balances, bal(7, 3, 0, 10));
  EXPECT_EQ(d.effects.changed_accounts[0].after.active_holds, 1);
  ASSERT_EQ(d.effects.new_holds.size(), 1u);
  EXPECT_EQ(d.effects.new_holds[0], h);
  ASSERT_EQ(d.effects.events.size(), 1u);
  EXPECT_EQ(d.effects.events[0].type, EventType::reserved);
  EXPECT_EQ(d.effects.events[0].hold_id, h.hold_id);
  EXPECT_EQ(d.effects.events[0].available_after, 7);
}

TEST_F(BatchDecision, EachReservationInABatchSeesTheOnesBeforeIt) {
  const batch::Decision d = w.run({reserve("alice", 6, "kiosk-1"), reserve("alice", 6, "kiosk-2"),
                                   reserve("alice", 4, "kiosk-3")});
  EXPECT_TRUE(d.results[0].ok());
  ASSERT_FALSE(d.results[1].ok());
  EXPECT_EQ(d.results[1].error().code, Code::insufficient_credits);
  EXPECT_EQ(d.results[1].error().available, 4);
  EXPECT_EQ(d.results[1].error().requested, 6);
  EXPECT_TRUE(d.results[2].ok());
  // The account is written once, with its final balances; the refusal wrote nothing.
  ASSERT_EQ(d.effects.changed_accounts.size(), 1u);
  EXPECT_EQ(d.effects.changed_accounts[0].after.balances, bal(0, 10, 0, 10));
  EXPECT_EQ(d.effects.new_holds.size(), 2u);
  EXPECT_EQ(types(d.effects.events), (std::vector<EventType>{EventType::reserved, EventType::reserved}));
  // Hold numbers are taken in command order, only by holds that were made.
  EXPECT_EQ(outcome<HoldOutcome>(d.results[0]).hold.hold_id, "hold_1_rkiosk-1");
  EXPECT_EQ(outcome<HoldOutcome>(d.results[2]).hold.hold_id, "hold_2_rkiosk-3");
}

TEST_F(BatchDecision, ARefusedBatchWritesNothingAtAll) {
  const batch::Decision d = w.run({reserve("alice", 11, "too-much"), reserve("nobody", 1, "r"),
                                   commit("hold_99_x"), ReleaseCommand{"garbage"}});
  EXPECT_EQ(d.results[0].error().code, Code::insufficient_credits);
  EXPECT_EQ(d.results[1].error().code, Code::not_found);
  EXPECT_THAT(d.results[1].error().detail, HasSubstr("account nobody does not exist"));
  EXPECT_EQ(d.results[2].error().code, Code::not_found);
  EXPECT_EQ(d.results[3].error().code, Code::not_found);
  EXPECT_TRUE(d.effects.empty());
}

TEST_F(BatchDecision, TooManyHoldsIsCheckedBeforeCredits) {
  ASSERT_TRUE(w.one(CreateAccountCommand{"kiosk", 0, 1}).ok());
  const batch::Decision d = w.run({CreditCommand{"kiosk", 5, "k-pay"}, reserve("kiosk", 1, "a"),
                                   reserve("kiosk", 1, "b")});
  EXPECT_TRUE(d.results[1].ok());
  EXPECT_EQ(d.results[2].error().code, Code::too_many_holds);
}

TEST_F(BatchDecision, AReservationRefusedOnTheStoredRowFirstExpiresTheAccountsZombies) {
  hold(8, "zombie", 1'000);
  w.now += 5'000;
  const batch::Decision d = w.run({reserve("alice", 9, "fresh")});
  ASSERT_TRUE(d.results[0].ok()) << d.results[0].error().detail;
  EXPECT_EQ(types(d.effects.events), (std::vector<EventType>{EventType::expired, EventType::reserved}));
  EXPECT_EQ(d.effects.changed_accounts.at(0).after.balances, bal(1, 9, 0, 10));
  ASSERT_EQ(d.effects.changed_holds.size(), 1u);
  EXPECT_EQ(d.effects.changed_holds[0].after.status, HoldStatus::expired);
  EXPECT_EQ(d.effects.changed_holds[0].after.closed_at_ms, kStart + 1'000);  // closed at its deadline
}

// The first write on an account brings it to what readers see: its zombies expire first, so that a
// reservation draws from the lots as they are read (core/lots.h), not as the zombies left them.
TEST_F(BatchDecision, AReservationThatFitsStillExpiresTheAccountsZombiesFirst) {
  hold(2, "zombie", 1'000);
  w.now += 5'000;
  const batch::Decision d = w.run({reserve("alice", 1, "small")});
  EXPECT_EQ(types(d.effects.events), (std::vector<EventType>{EventType::expired, EventType::reserved}));
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, TheSameRequestIdAnswersTheHoldAsItIsNowAndAnotherAccountOrAmountIsAMismatch) {
  const std::string id = hold(3, "req-1", 1'000);
  ASSERT_TRUE(w.one(CreateAccountCommand{"bob", 0, std::nullopt}).ok());
  w.now += 2'000;
  const batch::Decision d = w.run({reserve("alice", 3, "req-1"), reserve("alice", 4, "req-1"),
                                   reserve("bob", 3, "req-1")});
  const auto& replay = outcome<HoldOutcome>(d.results[0]);
  EXPECT_FALSE(replay.created);
  EXPECT_EQ(replay.hold.hold_id, id);
  EXPECT_EQ(replay.hold.status, HoldStatus::expired);  // as a reader sees it: overdue
  EXPECT_EQ(d.results[1].error().code, Code::idempotency_mismatch);
  EXPECT_EQ(d.results[2].error().code, Code::idempotency_mismatch);
  EXPECT_TRUE(d.effects.empty());
}

TEST_F(BatchDecision, ARequestIdMadeEarlierInTheSameBatchIsAReplay) {
  const batch::Decision d = w.run({reserve("alice", 2, "twice"), reserve("alice", 2, "twice")});
  EXPECT_TRUE(outcome<HoldOutcome>(d.results[0]).created);
  EXPECT_FALSE(outcome<HoldOutcome>(d.results[1]).created);
  EXPECT_EQ(outcome<HoldOutcome>(d.results[1]).hold, outcome<HoldOutcome>(d.results[0]).hold);
  EXPECT_EQ(d.effects.new_holds.size(), 1u);
}

// --- commit, release, extend, expire -------------------------------------------------------------

TEST_F(BatchDecision, APartialCommitUsesPartAndReturnsTheRestAndAReplayMovesNothing) {
  const std::string id = hold(5, "gen");
  const batch::Decision d = w.run({commit(id, 2), commit(id, 2), commit(id, 3), commit(id)});
  EXPECT_TRUE(outcome<HoldOutcome>(d.results[0]).created);
  EXPECT_EQ(outcome<HoldOutcome>(d.results[0]).hold.committed_amount, 2);
  EXPECT_FALSE(outcome<HoldOutcome>(d.results[1]).created);
  EXPECT_EQ(d.results[2].error().code, Code::hold_committed);
  EXPECT_EQ(d.results[3].error().code, Code::hold_committed);  // without amount: the whole 5
  EXPECT_EQ(w.accounts.at("alice").balances, bal(8, 0, 2, 10));
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, CommittingMoreThanTheHoldIsInvalidAndChangesNothing) {
  const std::string id = hold(5, "gen");
  const batch::Decision d = w.run({commit(id, 6)});
  EXPECT_EQ(d.results[0].error().code, Code::invalid_request);
  EXPECT_TRUE(d.effects.empty());
}

TEST_F(BatchDecision, ReleaseReturnsTheHoldAndThenEndsEveryOtherPath) {
  const std::string id = hold(5, "gen");
  const batch::Decision d = w.run({ReleaseCommand{id}, ReleaseCommand{id}, commit(id), ExtendCommand{id, 10}});
  EXPECT_TRUE(outcome<HoldOutcome>(d.results[0]).created);
  EXPECT_FALSE(outcome<HoldOutcome>(d.results[1]).created);
  EXPECT_EQ(d.results[2].error().code, Code::hold_released);
  EXPECT_EQ(d.results[3].error().code, Code::hold_released);
  EXPECT_EQ(types(d.effects.events), (std::vector<EventType>{EventType::released}));
  EXPECT_EQ(w.accounts.at("alice").balances, bal(10, 0, 0, 10));
}

TEST_F(BatchDecision, ExtendMovesTheDeadlineWithAnExtendedEventAndAnOverdueHoldExpiresInstead) {
  const std::string live = hold(1, "live", 1'000);
  const std::string late = hold(1, "late", 1'000);
  w.now += 500;
  ASSERT_TRUE(w.one(ExtendCommand{live, 10'000}).ok());
  EXPECT_EQ(w.hold(live)->expires_at_ms, w.now + 10'000);
  w.now += 1'000;
  const batch::Decision d = w.run({ExtendCommand{late, 10'000}, ExtendCommand{live, 10'000}});
  EXPECT_EQ(d.results[0].error().code, Code::hold_expired);
  EXPECT_TRUE(d.results[1].ok());
  // The refused extend still expired the zombie it found (the reaper's work, done early); the
  // other wrote its `extended` event (nothing moves).
  EXPECT_EQ(types(d.effects.events), (std::vector<EventType>{EventType::expired, EventType::extended}));
  EXPECT_EQ(d.effects.events.back().amount, 0);
  EXPECT_EQ(d.effects.events.back().hold_id, live);
}

TEST_F(BatchDecision, ALateCommitFollowsThePolicy) {
  struct Case {
    LateCommitPolicy policy;
    std::int64_t available_after_expiry_and_debit;
    std::optional<Code> refusal;
    EventType last;
    LateOutcome outcome;
  };
  for (const Case& c : {Case{LateCommitPolicy::charge, 10, std::nullopt, EventType::late_charged, LateOutcome::charged},
                        Case{LateCommitPolicy::charge, 1, std::nullopt, EventType::late_forgiven, LateOutcome::forgiven},
                        Case{LateCommitPolicy::forgive, 10, std::nullopt, EventType::late_forgiven, LateOutcome::forgiven},
                        Case{LateCommitPolicy::reject, 10, Code::hold_expired, EventType::expired, LateOutcome::none}}) {
    World fresh;
    w = fresh;
    SetUp();
    const std::string id = hold(3, "slow", 1'000);
    w.now += 2'000;
    std::vector<Command> batch;
    if (c.available_after_expiry_and_debit < 10) batch.push_back(DebitCommand{"alice", 9, "refund", "r"});
    batch.push_back(commit(id, std::nullopt, c.policy));
    batch.push_back(commit(id, std::nullopt, c.policy));  // again: the same answer, nothing more
    const batch::Decision d = w.run(batch);
    const CommandResult& first = d.results[batch.size() - 2];
    const CommandResult& again = d.results[batch.size() - 1];
    if (c.refusal) {
      EXPECT_EQ(first.error().code, *c.refusal);
      EXPECT_EQ(again.error().code, *c.refusal);
    } else {
      EXPECT_TRUE(outcome<HoldOutcome>(first).created);
      EXPECT_EQ(outcome<HoldOutcome>(first).hold.late_outcome, c.outcome);
      EXPECT_EQ(outcome<HoldOutcome>(first).hold.status, HoldStatus::expired);
      EXPECT_FALSE(outcome<HoldOutcome>(again).created);
    }
    EXPECT_EQ(d.effects.events.back().type, c.last);
    EXPECT_THAT(w.violations(), IsEmpty());
  }
}

TEST_F(BatchDecision, TheReaperExpiresTheOldestDeadlinesFirstUpToItsPass) {
  const std::string a = hold(1, "a", 3'000);
  const std::string b = hold(1, "b", 1'000);
  const std::string c = hold(1, "c", 2'000);
  hold(1, "d", 100'000);
  w.now += 10'000;
  const batch::Decision d = w.run({ExpireOverdueCommand{2}, ExpireOverdueCommand{5}});
  EXPECT_EQ(std::get<ExpireOutcome>(d.results[0].value()).expired, 2);
  EXPECT_EQ(std::get<ExpireOutcome>(d.results[1].value()).expired, 1);
  ASSERT_EQ(d.effects.events.size(), 3u);
  EXPECT_EQ(d.effects.events[0].hold_id, b);
  EXPECT_EQ(d.effects.events[1].hold_id, c);
  EXPECT_EQ(d.effects.events[2].hold_id, a);
  EXPECT_EQ(w.accounts.at("alice").balances, bal(9, 1, 0, 10));
}

// --- transfers, accounts, keys --------------------------------------------------------------------

TEST_F(BatchDecision, ACreditIsRecordedOnceUnderItsReferenceWithTheEventItWrote) {
  const batch::Decision d = w.run({CreditCommand{"alice", 5, "pay-2"}, CreditCommand{"alice", 5, "pay-2"},
                                   CreditCommand{"alice", 6, "pay-2"}, DebitCommand{"alice", 5, "pay-2", ""}});
  const auto& made = outcome<TransferOutcome>(d.results[0]);
  const auto& replay = outcome<TransferOutcome>(d.results[1]);
  EXPECT_TRUE(made.created);
  EXPECT_FALSE(replay.created);
  EXPECT_GT(made.event.event_id, 0);  // filled in once the backend gave ids
  EXPECT_EQ(replay.event, made.event);
  EXPECT_EQ(made.account.balances, bal(15, 0, 0, 15));
  EXPECT_EQ(d.results[2].error().code, Code::idempotency_mismatch);
  EXPECT_EQ(d.results[3].error().code, Code::idempotency_mismatch);
  ASSERT_EQ(d.effects.transfers.size(), 1u);
  EXPECT_EQ(w.transfers.at("pay-2").first.event_id, made.event.event_id);
}

TEST_F(BatchDecision, ADebitNeverUsesTheOverdraftButMayUseExpiredHolds) {
  ASSERT_TRUE(w.one(CreateAccountCommand{"od", 5, std::nullopt}).ok());
  EXPECT_EQ(w.one(DebitCommand{"od", 1, "od-1", ""}).error().code, Code::insufficient_credits);
  hold(10, "all", 1'000);
  w.now += 2'000;
  const CommandResult r = w.one(DebitCommand{"alice", 10, "refund", "why"});
  ASSERT_TRUE(r.ok()) << r.error().detail;
  EXPECT_EQ(types(w.events_of("alice")).back(), EventType::debited);
  EXPECT_EQ(w.accounts.at("alice").balances, bal(0, 0, 0, 0));
}

TEST_F(BatchDecision, ACreditPastTheLargestBalanceIsAnOverflow) {
  // The largest balance is 2^53 − 1 (api.md): one largest amount fills an empty account.
  ASSERT_TRUE(w.one(CreateAccountCommand{"whale", 0, std::nullopt}).ok());
  const CommandResult r = w.one(CreditCommand{"whale", limits::kAmountMax, "big"});
  ASSERT_TRUE(r.ok()) << r.error().detail;
  const CommandResult over = w.one(CreditCommand{"whale", 1, "over"});
  EXPECT_EQ(over.error().code, Code::overflow);
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, AnAccountMadeInABatchCanBeUsedLaterInIt) {
  const batch::Decision d = w.run({CreateAccountCommand{"new", 0, 2}, CreditCommand{"new", 3, "new-pay"},
                                   reserve("new", 2, "new-r"), CreateAccountCommand{"new", 0, 2},
                                   CreateAccountCommand{"new", 1, 2}});
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(d.results[i].ok()) << i;
  EXPECT_FALSE(outcome<AccountOutcome>(d.results[3]).created);
  EXPECT_EQ(outcome<AccountOutcome>(d.results[3]).account.balances, bal(1, 2, 0, 3));
  EXPECT_EQ(d.results[4].error().code, Code::conflict);
  // Written once, as it ends the batch: an insert with the final balances, no update.
  ASSERT_EQ(d.effects.new_accounts.size(), 1u);
  EXPECT_EQ(d.effects.new_accounts[0].balances, bal(1, 2, 0, 3));
  EXPECT_TRUE(d.effects.changed_accounts.empty());
}

TEST_F(BatchDecision, TheAccountAnOutcomeReportsIsTheReadersViewAtThatCommand) {
  const std::string oldest = hold(1, "oldest");
  w.now += 1'000;
  const std::string middle = hold(1, "middle");
  w.now += 1'000;
  hold(1, "zombie", 500);
  w.now += 1'000;
  // The view: the zombie already counts as available; the oldest live hold is `oldest` until it
  // ends in this very batch, then `middle`.
  const batch::Decision d = w.run({CreditCommand{"alice", 1, "c1"}, commit(oldest), CreditCommand{"alice", 1, "c2"},
                                   ReleaseCommand{middle}, CreditCommand{"alice", 1, "c3"}});
  const Account& first = outcome<TransferOutcome>(d.results[0]).account;
  EXPECT_EQ(first.balances, bal(9, 2, 0, 11));
  EXPECT_EQ(first.active_holds, 2);
  EXPECT_EQ(first.oldest_active_hold_age_ms, 3'000);
  EXPECT_EQ(outcome<TransferOutcome>(d.results[2]).account.oldest_active_hold_age_ms, 2'000);
  EXPECT_EQ(outcome<TransferOutcome>(d.results[4]).account.oldest_active_hold_age_ms, std::nullopt);
  EXPECT_EQ(outcome<TransferOutcome>(d.results[4]).account.balances, bal(12, 0, 1, 13));
}

TEST_F(BatchDecision, KeysAreCreatedOnceAndAccountKeysRevokedOnceButNeverTheAdminKey) {
  const batch::Decision d = w.run({CreateKeyCommand{"admin", std::nullopt, "h0"},
                                   CreateKeyCommand{"k1", std::string("alice"), "h1"},
                                   CreateKeyCommand{"k1", std::string("alice"), "h1"},
                                   CreateKeyCommand{"k1", std::string("alice"), "other"},
                                   CreateKeyCommand{"k2", std::string("nobody"), "h2"}, RevokeKeyCommand{"k1"},
                                   RevokeKeyCommand{"k1"}, RevokeKeyCommand{"admin"}, RevokeKeyCommand{"k9"}});
  EXPECT_TRUE(outcome<KeyOutcome>(d.results[1]).created);
  EXPECT_FALSE(outcome<KeyOutcome>(d.results[2]).created);
  EXPECT_EQ(d.results[3].error().code, Code::conflict);
  EXPECT_EQ(d.results[4].error().code, Code::not_found);
  EXPECT_TRUE(outcome<KeyOutcome>(d.results[5]).created);
  EXPECT_EQ(outcome<KeyOutcome>(d.results[5]).key.revoked_at_ms, kStart);
  EXPECT_FALSE(outcome<KeyOutcome>(d.results[6]).created);
  EXPECT_EQ(d.results[7].error().code, Code::conflict);
  EXPECT_EQ(d.results[8].error().code, Code::not_found);
  EXPECT_EQ(d.effects.new_keys.size(), 2u);  // inserted revoked: one write per key
  EXPECT_TRUE(w.keys.at("k1").revoked_at_ms.has_value());
}

// --- credit lots (core/lots.h) --------------------------------------------------------------------

CreditCommand lot_credit(std::string account, std::int64_t amount, std::string ref, std::int64_t priority,
                         std::optional<std::int64_t> expires_at_ms) {
  CreditCommand c{std::move(account), amount, std::move(ref)};
  c.lot = LotTerms{expires_at_ms, priority, LotCategory::promotional};
  return c;
}

TEST_F(BatchDecision, ACreditMakesALotAndAHoldDrawsThePromotionalLotFirst) {
  const auto credited = outcome<TransferOutcome>(w.one(lot_credit("alice", 4, "promo", 10, w.now + 1'000)));
  ASSERT_TRUE(credited.event.lot_seq.has_value());
  const auto h = outcome<HoldOutcome>(w.one(reserve("alice", 6, "r1"))).hold;
  ASSERT_EQ(h.lots.size(), 2u);
  EXPECT_EQ(h.lots[0], (LotDraw{*credited.event.lot_seq, 4}));
  EXPECT_EQ(h.lots[1].amount, 2);
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, ACreditThatExpiresInThePastIsRefusedAndWritesNothing) {
  const auto events = w.events.size();
  const CommandResult r = w.one(lot_credit("alice", 4, "late", 50, w.now));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::invalid_request);
  EXPECT_THAT(r.error().detail, HasSubstr("expires_at"));
  EXPECT_EQ(w.events.size(), events);
  EXPECT_EQ(w.lots.size(), 1u);
}

TEST_F(BatchDecision, AnOverdueLotExpiresBeforeTheNextSpendAndTheReaperCountsWhatItExpires) {
  ASSERT_TRUE(w.one(lot_credit("alice", 4, "promo", 10, w.now + 100)).ok());
  w.now += 100;
  const batch::Decision d = w.run({reserve("alice", 12, "r1")});
  EXPECT_EQ(d.results[0].error().code, Code::insufficient_credits);  // the 4 expired first
  ASSERT_THAT(types(d.effects.events), ElementsAre(EventType::lot_expired));
  EXPECT_EQ(w.accounts.at("alice").balances.expired, 4);
  ASSERT_TRUE(w.one(lot_credit("alice", 3, "promo2", 10, w.now + 100)).ok());
  w.now += 100;
  const auto reaped = outcome<ExpireOutcome>(w.one(ExpireOverdueCommand{10}));
  EXPECT_EQ(reaped.lots_expired, 1);
  EXPECT_EQ(w.accounts.at("alice").balances.expired, 7);
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, SpendingPastEveryLotIsDebtThatTheNextCreditPaysFirst) {
  UpdateAccountCommand overdraft;
  overdraft.account_id = "alice";
  overdraft.overdraft_limit = 5;
  ASSERT_TRUE(w.one(overdraft).ok());
  const std::string h = hold(14, "r1");
  ASSERT_TRUE(w.one(commit(h)).ok());
  EXPECT_EQ(w.accounts.at("alice").balances.available, -4);
  const auto credited = outcome<TransferOutcome>(w.one(CreditCommand{"alice", 6, "pay-2"}));
  ASSERT_TRUE(credited.event.lot_seq.has_value());
  EXPECT_EQ(w.lots.at(*credited.event.lot_seq).amount, 2);  // 4 paid the debt
  const auto debt_only = outcome<TransferOutcome>(w.one(CreditCommand{"alice", 1, "pay-3"}));
  EXPECT_TRUE(debt_only.event.lot_seq.has_value());  // no debt left: a lot of 1
  // The overdraft cannot be lowered below what the base owes, even while lots hold credits.
  ASSERT_TRUE(w.one(reserve("alice", 8, "r2")).ok());
  overdraft.overdraft_limit = 0;
  EXPECT_EQ(w.one(overdraft).error().code, Code::conflict);
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, AnAccountTakesNoMoreLiveLotsThanTheLimit) {
  std::vector<Command> credits;
  for (std::int64_t i = 1; i < limits::kLiveLotsPerAccountMax; ++i) credits.push_back(CreditCommand{"alice", 1, "c" + std::to_string(i)});
  const batch::Decision d = w.run(credits);
  for (const auto& r : d.results) ASSERT_TRUE(r.ok());
  const CommandResult refused = w.one(CreditCommand{"alice", 1, "one-more"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Code::conflict);
  ASSERT_TRUE(w.one(DebitCommand{"alice", 10, "spend-the-first", ""}).ok());  // the first lot is spent
  EXPECT_TRUE(w.one(CreditCommand{"alice", 1, "one-more"}).ok());
}

// --- every invariant, after seeded random batches ------------------------------------------------

TEST(BatchDecisionProperties, RandomBatchesKeepEveryInvariantAndEveryRefusalWritesNothing) {
  const char* env = std::getenv("TOLLGATE_BATCH_PROPERTY_SEEDS");
  const int seeds = env ? std::atoi(env) : 40;
  int refused = 0, applied = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
    const auto pick = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    World w;
    const std::vector<std::string> accounts{"a", "b", "c"};
    std::vector<std::string> holds{"hold_999_x", "junk"};
    int n = 0;
    for (int round = 0; round < 60; ++round) {
      std::vector<Command> batch;
      const int size = static_cast<int>(pick(1, 12));
      for (int i = 0; i < size; ++i) {
        const std::string& account = accounts[static_cast<std::size_t>(pick(0, 2))];
        const std::string& hold = holds[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(holds.size()) - 1))];
        const auto policy = static_cast<LateCommitPolicy>(pick(0, 2));
        switch (pick(0, 9)) {
          case 0: batch.push_back(CreateAccountCommand{account, pick(0, 1) * 3, pick(0, 1) ? std::optional<std::int64_t>(3) : std::nullopt}); break;
          case 1: batch.push_back(CreditCommand{account, pick(1, 20), "ref-" + std::to_string(pick(0, 40))}); break;
          case 2: batch.push_back(DebitCommand{account, pick(1, 20), "ref-" + std::to_string(pick(0, 40)), ""}); break;
          case 3:
          case 4: batch.push_back(reserve(account, pick(1, 8), "req-" + std::to_string(n++ % 50), pick(1, 5'000))); break;
          case 5: batch.push_back(commit(hold, pick(0, 1) ? std::optional<std::int64_t>(pick(1, 9)) : std::nullopt, policy)); break;
          case 6: batch.push_back(ReleaseCommand{hold}); break;
          case 7: batch.push_back(ExtendCommand{hold, pick(1, 5'000)}); break;
          case 8: batch.push_back(ExpireOverdueCommand{pick(1, 4)}); break;
          default: {
            // Credits make lots: some promotional and spent first, some expiring within the rounds.
            CreditCommand c{account, pick(1, 5), "fund-" + std::to_string(n++)};
            c.lot.priority = pick(0, 1) ? 50 : pick(0, 100);
            if (pick(0, 1)) c.lot.expires_at_ms = w.now + pick(1, 3'000);
            batch.push_back(c);
            break;
          }
        }
      }
      const auto events_before = w.events.size();
      const batch::Decision d = w.run(batch);
      ASSERT_EQ(d.results.size(), batch.size());
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (!d.results[i]) {
          ++refused;
          continue;
        }
        ++applied;
        if (const auto* h = std::get_if<HoldOutcome>(&d.results[i].value())) {
          if (h->created && std::holds_alternative<ReserveCommand>(batch[i])) holds.push_back(h->hold.hold_id);
        }
      }
      // A batch whose commands were all refused or replays writes no event (a refusal may expire
      // zombies, and a reaper pass may too: those are the only writes without a created result).
      const bool only_refusals = std::all_of(d.results.begin(), d.results.end(), [](const CommandResult& r) {
        return !r.ok() || std::visit([](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, ExpireOutcome>) return o.expired == 0 && o.lots_expired == 0;
          else if constexpr (std::is_same_v<T, KeyUseOutcome>) return true;  // writes no event
          else if constexpr (std::is_same_v<T, LockOutcome> || std::is_same_v<T, IdempotencyOutcome> ||
                             std::is_same_v<T, RateLimitOutcome> || std::is_same_v<T, PruneOutcome> ||
                             std::is_same_v<T, EndpointOutcome> || std::is_same_v<T, DeliveriesOutcome>) {
            return true;  // coordination rows and webhook endpoints and deliveries write no event
          } else return !o.created;
        }, r.value());
      });
      if (only_refusals) {
        for (std::size_t e = events_before; e < w.events.size(); ++e) {
          EXPECT_TRUE(w.events[e].type == EventType::expired || w.events[e].type == EventType::lot_expired)
              << "seed " << seed << " round " << round;
        }
      }
      ASSERT_THAT(w.violations(), IsEmpty()) << "seed " << seed << " round " << round;
      w.now += pick(0, 1'500);
    }
  }
  EXPECT_GT(applied, 1000);
  EXPECT_GT(refused, 1000);
}

// --- balance notices (docs/api.md "Balance notices") ---------------------------------------------

UpdateAccountCommand threshold(std::string account, std::optional<std::int64_t> n) {
  UpdateAccountCommand c;
  c.account_id = std::move(account);
  c.low_balance_threshold = n;
  return c;
}

TEST_F(BatchDecision, AFallFromTenToZeroUnderThresholdFiveWritesLowThenDepletedAfterTheDebit) {
  ASSERT_TRUE(w.one(threshold("alice", 5)).ok());
  const batch::Decision d = w.run({DebitCommand{"alice", 10, "all-of-it", ""}});
  ASSERT_TRUE(d.results[0].ok());
  ASSERT_THAT(types(d.effects.events), ElementsAre(EventType::debited, EventType::balance_low, EventType::balance_depleted));
  for (std::size_t i = 1; i < 3; ++i) {
    const Event& notice = d.effects.events[i];
    EXPECT_EQ(notice.account_id, "alice");
    EXPECT_EQ(notice.amount, 0);
    EXPECT_EQ(notice.hold_id, std::nullopt);
    EXPECT_EQ(notice.reference, std::nullopt);
    EXPECT_EQ(notice.available_after, 0);  // the balances after the movement
    EXPECT_EQ(notice.used_after, 0);
  }
  // The debit's outcome names its own event, not a notice.
  EXPECT_EQ(outcome<TransferOutcome>(d.results[0]).event.type, EventType::debited);
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, ACreditFromMinusThreeToSevenOverThresholdFiveWritesRecoveredOnly) {
  ASSERT_TRUE(w.one(CreateAccountCommand{"bob", 5, std::nullopt}).ok());
  ASSERT_TRUE(w.one(threshold("bob", 5)).ok());
  // 0 → −3 in the overdraft: already under 5 and not above 0 before: no notice.
  const batch::Decision into_overdraft = w.run({reserve("bob", 3, "bob-1")});
  EXPECT_THAT(types(into_overdraft.effects.events), ElementsAre(EventType::reserved));
  const batch::Decision d = w.run({CreditCommand{"bob", 10, "bob-pay"}});
  EXPECT_THAT(types(d.effects.events), ElementsAre(EventType::credited, EventType::balance_recovered));
  EXPECT_EQ(d.effects.events[1].available_after, 7);
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, AnAccountWithoutAThresholdGetsNoNoticesAndAMovementThatCrossesNothingNone) {
  EXPECT_THAT(types(w.run({DebitCommand{"alice", 10, "d-1", ""}}).effects.events), ElementsAre(EventType::debited));
  ASSERT_TRUE(w.one(CreditCommand{"alice", 8, "c-1"}).ok());
  ASSERT_TRUE(w.one(threshold("alice", 5)).ok());
  EXPECT_THAT(types(w.run({DebitCommand{"alice", 2, "d-2", ""}}).effects.events), ElementsAre(EventType::debited));  // 8 → 6
  ASSERT_TRUE(w.one(threshold("alice", std::nullopt)).ok());  // notices off again
  EXPECT_THAT(types(w.run({DebitCommand{"alice", 6, "d-3", ""}}).effects.events), ElementsAre(EventType::debited));
}

TEST_F(BatchDecision, SettingTheThresholdWritesNoNoticeEvenUnderIt) {
  ASSERT_TRUE(w.one(DebitCommand{"alice", 7, "d-1", ""}).ok());  // 3 left
  const batch::Decision d = w.run({threshold("alice", 5)});
  EXPECT_THAT(types(d.effects.events), ElementsAre(EventType::account_updated));
  EXPECT_EQ(d.effects.events[0].settings->low_balance_threshold, 5);
  EXPECT_EQ(outcome<AccountOutcome>(d.results[0]).account.low_balance_threshold, 5);
  // The same threshold again changes nothing (a replay, no event).
  EXPECT_TRUE(w.run({threshold("alice", 5)}).effects.events.empty());
  // Still under 5: a further fall is no crossing; a rise past it is.
  EXPECT_THAT(types(w.run({DebitCommand{"alice", 1, "d-2", ""}}).effects.events), ElementsAre(EventType::debited));
  EXPECT_THAT(types(w.run({CreditCommand{"alice", 3, "c-1"}}).effects.events),
              ElementsAre(EventType::credited, EventType::balance_recovered));
}

TEST_F(BatchDecision, EachMovementInOneBatchIsComparedWithTheOneBeforeIt) {
  ASSERT_TRUE(w.one(threshold("alice", 5)).ok());
  const batch::Decision d = w.run({reserve("alice", 6, "r-1"), CreditCommand{"alice", 2, "c-1"},
                                   DebitCommand{"alice", 6, "d-1", ""}, CreditCommand{"alice", 1, "c-2"}});
  // 10 → 4 (low), 4 → 6 (recovered), 6 → 0 (low, depleted), 0 → 1 (nothing).
  EXPECT_THAT(types(d.effects.events),
              ElementsAre(EventType::reserved, EventType::balance_low, EventType::credited, EventType::balance_recovered,
                          EventType::debited, EventType::balance_low, EventType::balance_depleted, EventType::credited));
}

TEST_F(BatchDecision, TheReaperEndingSeveralHoldsWritesTheRecoveryOnceAfterTheExpiryThatCrossesIt) {
  ASSERT_TRUE(w.one(threshold("alice", 5)).ok());
  hold(4, "r-1", 100);
  hold(4, "r-2", 100);  // 10 → 6 → 2: one balance_low
  hold(2, "r-3", 200);  // 2 → 0: depleted
  EXPECT_THAT(types(w.events_of("alice")),
              ElementsAre(EventType::credited, EventType::account_updated, EventType::reserved, EventType::reserved,
                          EventType::balance_low, EventType::reserved, EventType::balance_depleted));
  w.now += 1'000;
  const batch::Decision d = w.run({ExpireOverdueCommand{10}});
  EXPECT_EQ(outcome<ExpireOutcome>(d.results[0]).expired, 3);
  // 0 → 4 (nothing: still under 5), 4 → 8 (recovered), 8 → 10 (nothing).
  EXPECT_THAT(types(d.effects.events), ElementsAre(EventType::expired, EventType::expired, EventType::balance_recovered,
                                                   EventType::expired));
  EXPECT_THAT(w.violations(), IsEmpty());
}

TEST_F(BatchDecision, CommitsReleasesAndLateChargesCrossLikeAnyMovement) {
  ASSERT_TRUE(w.one(CreateAccountCommand{"carol", 10, std::nullopt}).ok());
  ASSERT_TRUE(w.one(CreditCommand{"carol", 6, "carol-pay"}).ok());
  ASSERT_TRUE(w.one(threshold("carol", 5)).ok());
  const std::string h1 = outcome<HoldOutcome>(w.one(reserve("carol", 6, "c-1"))).hold.hold_id;  // 6 → 0: low, depleted
  // Into the overdraft (0 → −2), then a partial commit gives 4 back (−2 → 2): neither crosses.
  const std::string h2 = outcome<HoldOutcome>(w.one(reserve("carol", 2, "c-2", 100))).hold.hold_id;  // 0 → −2
  EXPECT_THAT(types(w.run({commit(h1, 2)}).effects.events), ElementsAre(EventType::committed));  // −2 → 2
  w.now += 1'000;  // h2 is overdue: a late charge of it takes 2 after its expiry gave them back
  const batch::Decision late = w.run({commit(h2, std::nullopt, LateCommitPolicy::charge)});
  // 2 → 4 (expired, nothing), 4 → 2 (late charge, nothing).
  EXPECT_THAT(types(late.effects.events), ElementsAre(EventType::expired, EventType::late_charged));
  ASSERT_TRUE(w.one(CreditCommand{"carol", 4, "carol-pay-2"}).ok());  // 2 → 6: recovered
  const std::string h3 = outcome<HoldOutcome>(w.one(reserve("carol", 3, "c-3"))).hold.hold_id;  // 6 → 3: low
  EXPECT_THAT(types(w.run({ReleaseCommand{h3}}).effects.events), ElementsAre(EventType::released, EventType::balance_recovered));
  EXPECT_THAT(w.violations(), IsEmpty());
}

// The property: over random movements of every kind on one account, with its threshold changed now
// and then, the log has a notice exactly where a movement crossed — once per crossing, none without
// one, in order — read back from the log itself (the threshold from its account_updated events).
TEST(BatchDecisionProperties, EveryCrossingOfTheThresholdWritesItsNoticeOnceAndNothingElseDoes) {
  const char* env = std::getenv("TOLLGATE_BATCH_PROPERTY_SEEDS");
  const int seeds = env ? std::atoi(env) : 60;
  std::map<EventType, int> seen;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 7919);
    const auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
    World w;
    ASSERT_TRUE(w.one(CreateAccountCommand{"a", pick(0, 1) * 10, std::nullopt}).ok());
    ASSERT_TRUE(w.one(threshold("a", pick(1, 12))).ok());
    std::vector<std::string> holds{"junk"};
    int n = 0;
    for (int round = 0; round < 80; ++round) {
      std::vector<Command> batch;
      for (int i = 0, size = static_cast<int>(pick(1, 6)); i < size; ++i) {
        const std::string& hold = holds[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(holds.size()) - 1))];
        const std::string id = std::to_string(n++);
        switch (pick(0, 8)) {
          case 0: batch.push_back(CreditCommand{"a", pick(1, 15), "c" + id}); break;
          case 1: batch.push_back(DebitCommand{"a", pick(1, 15), "d" + id, ""}); break;
          case 2: case 3: batch.push_back(reserve("a", pick(1, 8), "r" + id, pick(1, 3'000))); break;
          case 4: batch.push_back(commit(hold, pick(0, 1) ? std::optional<std::int64_t>(pick(1, 8)) : std::nullopt,
                                         static_cast<LateCommitPolicy>(pick(0, 2)))); break;
          case 5: batch.push_back(ReleaseCommand{hold}); break;
          case 6: batch.push_back(ExpireOverdueCommand{pick(1, 4)}); break;
          case 7: batch.push_back(threshold("a", pick(0, 4) == 0 ? std::nullopt : std::optional<std::int64_t>(pick(1, 12)))); break;
          default: batch.push_back(CreditCommand{"a", pick(1, 4), "f" + id}); break;
        }
      }
      const batch::Decision d = w.run(batch);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (!d.results[i] || !std::holds_alternative<ReserveCommand>(batch[i])) continue;
        holds.push_back(std::get<HoldOutcome>(d.results[i].value()).hold.hold_id);
      }
      w.now += pick(0, 1'500);
    }
    // Read the log back: after each movement, exactly the notices its crossing asks for.
    const std::vector<Event> log = w.events_of("a");
    std::optional<std::int64_t> n_now;
    std::int64_t available = 0;
    bool under = true;  // available < threshold, as the notices told so far (meaningful once one is set)
    for (std::size_t i = 0; i < log.size();) {
      const Event& movement = log[i++];
      ASSERT_FALSE(is_balance_notice(movement.type)) << "seed " << seed << ": a notice after no movement, event " << i;
      if (movement.type == EventType::account_updated) n_now = movement.settings->low_balance_threshold;
      std::vector<EventType> notices;
      for (; i < log.size() && is_balance_notice(log[i].type); ++i) {
        notices.push_back(log[i].type);
        EXPECT_EQ(log[i].amount, 0);
        EXPECT_EQ(log[i].hold_id, std::nullopt);
        EXPECT_EQ(log[i].available_after, movement.available_after);
        EXPECT_EQ(log[i].reserved_after, movement.reserved_after);
        ++seen[log[i].type];
      }
      const std::int64_t was = std::exchange(available, movement.available_after);
      std::vector<EventType> want;
      if (n_now) {
        if (was >= *n_now && available < *n_now) want.push_back(EventType::balance_low);
        if (was > 0 && available <= 0) want.push_back(EventType::balance_depleted);
        if (was < *n_now && available >= *n_now) want.push_back(EventType::balance_recovered);
        // Low and recovered alternate while the threshold stays: each one flips the side it told.
        for (const EventType t : notices) {
          if (t == EventType::balance_low) {
            EXPECT_FALSE(std::exchange(under, true)) << "seed " << seed;
          }
          if (t == EventType::balance_recovered) {
            EXPECT_TRUE(std::exchange(under, false)) << "seed " << seed;
          }
        }
      }
      if (movement.type == EventType::account_updated || !n_now) under = n_now && available < *n_now;
      ASSERT_EQ(notices, want) << "seed " << seed << ": after " << movement;
    }
    ASSERT_THAT(w.violations(), IsEmpty()) << "seed " << seed;
  }
  // Each kind of notice happened many times, so the comparison above had something to compare.
  EXPECT_GT(seen[EventType::balance_low], 100);
  EXPECT_GT(seen[EventType::balance_depleted], 100);
  EXPECT_GT(seen[EventType::balance_recovered], 100);
}

// --- the seam: feature slices in the same batch (src/slices.h) ----------------------------------

SubmitJobCommand submit_job(std::string id, std::string account, std::int64_t cost) {
  SubmitJobCommand c;
  c.client_request_id = std::move(id);
  c.account_id = std::move(account);
  c.cost = cost;
  c.provider = "echo";
  c.input_json = "{}";
  c.ttl_ms = kTtl;
  c.hold_id_random = "0123456789abcdef";
  c.owner = "instance-1";
  c.lease_ms = 30'000;
  return c;
}

TEST(BatchSeam, ASlicesCommandNamesItsOwnRowsAndTheLedgerRowsItTouches) {
  coord::LockCommand lock;
  lock.key = "nightly";
  lock.owner = "worker";
  lock.ttl_ms = 1'000;
  const std::vector<Command> commands{
      submit_job("job-b", "alice", 3),
      EndJobCommand{"job-a", "hold_9_ab", jobs::JobStatus::cancelled},
      lock,
      submit_job("job-b", "alice", 3),  // the same job twice: listed once
  };
  const batch::Keys k = batch::keys_of(commands);
  EXPECT_THAT(k.of<jobs::JobSlice>().ids, ElementsAre("job-a", "job-b"));
  EXPECT_THAT(k.of<coord::CoordSlice>().locks, ElementsAre("nightly"));
  // The ledger's rows a job changes: its account (locked), its hold by request_id and by id.
  EXPECT_THAT(k.accounts, ElementsAre("alice"));
  EXPECT_THAT(k.request_ids, ElementsAre("job:job-b"));
  EXPECT_THAT(k.hold_ids, ElementsAre("hold_9_ab"));
  EXPECT_THAT(k.hold_seqs, ElementsAre(9));
  EXPECT_EQ(k.new_holds_max, 2);
  EXPECT_EQ(k.live_holds_ending_max, 1);
}

TEST_F(BatchDecision, EachDecisionSeesTheEffectsOfTheOnesBeforeItWhicheverSliceMadeThem) {
  coord::LockCommand lock;
  lock.key = "nightly";
  lock.owner = "worker";
  lock.ttl_ms = 1'000;
  const batch::Decision d = w.run({CreditCommand{"alice", 5, "pay-2"},  // 15 available
                                   submit_job("job-1", "alice", 14),   // its hold takes 14 of them
                                   reserve("alice", 2, "after-the-job"),  // 1 left: refused
                                   reserve("alice", 1, "the-last-one"), lock});
  ASSERT_EQ(d.results.size(), 5u);
  const JobOutcome& job = outcome<JobOutcome>(d.results[1]);
  EXPECT_TRUE(job.created);
  EXPECT_EQ(job.job.status, jobs::JobStatus::pending);
  EXPECT_EQ(d.results[2].code(), Code::insufficient_credits);
  EXPECT_EQ(outcome<HoldOutcome>(d.results[3]).hold.amount, 1);
  EXPECT_TRUE(outcome<LockOutcome>(d.results[4]).changed);
  // Each part of the effects is its slice's: the job's hold is the ledger's, the job the jobs'.
  ASSERT_EQ(d.effects.new_holds.size(), 2u);
  EXPECT_EQ(d.effects.new_holds[0].request_id, "job:job-1");
  EXPECT_EQ(d.effects.new_holds[0].hold_id, job.job.hold_id);
  const jobs::JobEffects& jobs_written = d.effects.of<jobs::JobSlice>();
  ASSERT_EQ(jobs_written.new_jobs.size(), 1u);
  EXPECT_EQ(jobs_written.new_jobs[0], job.job);
  ASSERT_EQ(jobs_written.entries.size(), 1u);
  EXPECT_EQ(jobs_written.entries[0].kind, "submitted");
  EXPECT_EQ(d.effects.of<coord::CoordSlice>().locks.size(), 1u);
  EXPECT_FALSE(d.effects.empty());
  // One event per move, in command order; the job's hold's event names the job.
  EXPECT_THAT(types(d.effects.events), ElementsAre(EventType::credited, EventType::reserved, EventType::reserved));
  EXPECT_EQ(d.effects.events[1].job_id, std::optional<std::string>("job-1"));
  EXPECT_EQ(w.accounts.at("alice").balances, bal(0, 15, 0, 15));
  EXPECT_THAT(w.violations(), IsEmpty());
}

}  // namespace
}  // namespace tollgate
