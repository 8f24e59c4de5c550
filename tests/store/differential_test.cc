// The differential test of the write path: seeded random batches of commands of EVERY kind of the
// `Command` variant (the ledger's, the jobs', the coordination's) run through
//   the store   — the real batch path (core/batch.cc and the slices, decided in memory, written by
//                 SqliteBatchIo / PgBatchIo) on a real SQLite file, and on PostgreSQL when
//                 TOLLGATE_TEST_POSTGRES names a server (tests/support/backends.h), and
//   the model   — tests/model/ledger_model.h: the same rules stated a second time over plain maps,
//                 one command at a time,
// and every answer is compared (ok or error code, the values an error carries, every field of every
// outcome), and every few rounds and at the end the whole state as the store's read API shows it:
// accounts, holds, each account's events in order, jobs and their histories, locks, idempotency
// keys, API keys — and a clean audit.
//
// Generation. Commands name a small pool of accounts, keys, jobs, locks … so that they collide:
// replays of a request id or reference (same and different arguments), unknown accounts and holds,
// insufficient credits, frozen accounts, too many holds, late commits under each policy after the
// clock moved past a hold's deadline (zombies expired lazily, by the reaper, by a refused command),
// balances near 2^53 − 1 (overflow), held locks, claimed idempotency keys, exhausted rate limits.
// Batches have 1 to 16 commands, so commands decide on what earlier ones in the same batch left. A
// hold id is only known once its reserve was applied: a command names a hold by the request id
// that made it ("@<request_id>"), translated to each side's own id just before it is applied, and
// hold ids in answers are compared through the same names (PostgreSQL's ids have gaps).
//
// Honesty. The run counts each kind by its outcome and prints the table; it fails when a kind never
// ran or an expected refusal never happened, so a generator that stopped producing (say) overflows
// cannot pass by comparing trivia. It stops at the first differing batch and prints it.
//
// Bounds. TOLLGATE_DIFFERENTIAL_ITERATIONS batches per seed (default 150; seeds 1, 2, 3), or
// TOLLGATE_DIFFERENTIAL_SEEDS=4,5,6 for others. Every failure names its seed and round.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/clock.h"
#include "core/limits.h"
#include "model/ledger_model.h"
#include "slices.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using testing::LedgerModel;

constexpr std::int64_t kMax = limits::kAmountMax;  // 2^53 − 1
constexpr std::int64_t kRetentionMs = 2'000;      // the prune commands' (one value: see prune's loads)

// ================================================================================================
// names: a hold id → "H<request_id>", per side

struct Names {
  std::map<std::string, std::string> holds;  // hold id → canonical name
  std::map<std::string, std::string> ids;    // request id → hold id

  void learn(const std::string& hold_id, const std::string& request_id) {
    holds[hold_id] = "H" + request_id;
    ids[request_id] = hold_id;
  }
  std::string hold(const std::string& id) const {
    auto it = holds.find(id);
    return it == holds.end() ? id : it->second;
  }
  std::string hold(const std::optional<std::string>& id) const { return id ? hold(*id) : "null"; }
  // Hold ids inside a text (a job's error names its hold).
  std::string text(std::string s) const {
    for (const auto& [id, name] : holds) {
      for (std::size_t at = s.find(id); at != std::string::npos; at = s.find(id, at + name.size())) {
        const std::size_t end = at + id.size();
        if (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) continue;
        s.replace(at, id.size(), name);
      }
    }
    return s;
  }
  // A command's hold reference "@<request_id>" → this side's id (an unknown one stays unknown).
  std::string resolve(const std::string& ref) const {
    if (ref.empty() || ref[0] != '@') return ref;
    auto it = ids.find(ref.substr(1));
    return it == ids.end() ? "hold_999999999_ffffffffffffffff" : it->second;
  }
};

// ================================================================================================
// canonical text of everything compared

template <typename T>
std::string opt(const std::optional<T>& v) {
  if (!v) return "null";
  std::ostringstream o;
  o << *v;
  return o.str();
}

std::string show(const Account& a) {
  std::ostringstream o;
  o << "account " << a.account_id << " " << a.balances.available << "/" << a.balances.reserved << "/"
    << a.balances.used << "/" << a.balances.purchased << " overdraft=" << a.overdraft_limit
    << " max_holds=" << opt(a.max_active_holds) << " frozen=" << a.frozen << " frozen_reason=" << opt(a.frozen_reason)
    << " low_balance_threshold=" << opt(a.low_balance_threshold) << " active=" << a.active_holds
    << " oldest_age=" << opt(a.oldest_active_hold_age_ms) << " created_at=" << a.created_at_ms;
  return o.str();
}

std::string show(const payments::Payment& p) {
  std::ostringstream o;
  o << "payment " << p.payment_id << " " << payments::provider_name(p.provider) << " provider_payment="
    << opt(p.provider_payment) << " account=" << p.account_id << " credits=" << p.credits
    << " refunded=" << p.refunded_credits << " taken_back=" << p.taken_back << " created_at=" << p.created_at_ms
    << " updated_at=" << p.updated_at_ms;
  return o.str();
}

std::string show(const Hold& h, const Names& n) {
  std::ostringstream o;
  o << "hold " << n.hold(h.hold_id) << " account=" << h.account_id << " request=" << h.request_id
    << " amount=" << h.amount << " committed=" << h.committed_amount << " " << hold_status_name(h.status)
    << " late=" << late_outcome_name(h.late_outcome) << " created_at=" << h.created_at_ms
    << " expires_at=" << h.expires_at_ms << " closed_at=" << opt(h.closed_at_ms) << " metadata=" << h.metadata_json
    << " reason=" << opt(h.release_reason) << " refunded=" << h.refunded_amount;
  return o.str();
}

std::string show(const Event& e, const Names& n) {  // without event_id: each side numbers its own
  std::ostringstream o;
  o << "event " << e.account_id << " " << event_type_name(e.type) << " " << e.amount
    << " hold=" << (e.hold_id ? n.hold(*e.hold_id) : "null") << " job=" << opt(e.job_id)
    << " reference=" << opt(e.reference) << " reason=" << opt(e.reason) << " at=" << e.at_ms
    << " after=" << e.available_after << "/" << e.reserved_after << "/" << e.used_after
    << " expires_at=" << opt(e.expires_at_ms);
  if (e.settings) {
    o << " settings=" << e.settings->overdraft_limit << "/" << opt(e.settings->max_active_holds) << "/"
      << e.settings->frozen << "/" << opt(e.settings->low_balance_threshold);
  }
  return o.str();
}

std::string show(const ApiKey& k) {
  return "key " + k.key_id + " account=" + opt(k.account_id) + " secret=" + k.secret_sha256.substr(0, 4) +
         " created_at=" + std::to_string(k.created_at_ms) + " revoked_at=" + opt(k.revoked_at_ms) +
         " last_used_at=" + opt(k.last_used_at_ms);
}

std::string show(const jobs::Job& j, const Names& n) {
  std::ostringstream o;
  o << "job " << j.client_request_id << " account=" << j.account_id << " cost=" << j.cost << " provider=" << j.provider
    << " input=" << j.input_json << " " << jobs::job_status_name(j.status) << " hold=" << n.hold(j.hold_id)
    << " attempts=" << j.attempts << " result=" << opt(j.result_json)
    << " error=" << (j.error ? n.text(*j.error) : "null") << " charged=" << j.charged << " created_at=" << j.created_at_ms
    << " updated_at=" << j.updated_at_ms << " lease=" << opt(j.lease_owner) << "/" << opt(j.lease_expires_at_ms);
  return o.str();
}

std::string show(const coord::Lock& l) {
  std::ostringstream o;
  o << "lock " << l.key << " owner=" << opt(l.owner) << " fence=" << l.fence << " expires_at=" << opt(l.expires_at_ms)
    << " cancelled=" << l.cancelled << " updated_at=" << l.updated_at_ms;
  return o.str();
}

std::string show(const coord::IdempotencyKey& k) {
  std::ostringstream o;
  o << "idem " << k.key << " fp=" << k.fingerprint << " " << coord::idem_state_name(k.state)
    << " response=" << opt(k.response_json) << " created_at=" << k.created_at_ms << " expires_at=" << k.expires_at_ms
    << " finished_at=" << opt(k.finished_at_ms) << " attempt=" << k.attempt;
  return o.str();
}

std::string show(const webhooks::Endpoint& e) {
  std::ostringstream o;
  o << "endpoint " << e.endpoint_id << " url=" << e.url << " types=" << webhooks::join_event_types(e.event_types)
    << " account=" << opt(e.account_id) << " description=" << e.description << " "
    << webhooks::endpoint_status_name(e.status) << " secret=" << e.secret << " previous=" << opt(e.previous_secret)
    << "/" << opt(e.previous_secret_until_ms) << " created_at=" << e.created_at_ms << " updated_at=" << e.updated_at_ms
    << " fence=" << e.delivery_fence << " failing_since=" << opt(e.failing_since_ms);
  return o.str();  // not the cursor: a feed position, and each side numbers its own events
}

std::string show(const webhooks::Delivery& d) {
  std::ostringstream o;
  o << "delivery " << d.endpoint_id << "/" << d.event_id << " " << webhooks::delivery_status_name(d.status)
    << " attempts=" << d.attempts << " last=" << d.last_attempt_at_ms << " code=" << opt(d.last_status_code)
    << " error=" << d.last_error << " next=" << opt(d.next_attempt_at_ms) << " created_at=" << d.created_at_ms;
  return o.str();
}

std::string show(const prices::Price& p) {
  return "price " + p.feature + " credits_per_unit=" + std::to_string(p.credits_per_unit) +
         " version=" + std::to_string(p.version) + " at=" + std::to_string(p.updated_at_ms);
}

std::string show(const prices::PricedHold& h, const Names& n) {
  return "priced " + h.request_id + " hold=" + n.hold(h.hold_id) + " account=" + h.account_id + " feature=" + h.feature +
         " quantity=" + std::to_string(h.quantity) + " unit_price=" + std::to_string(h.unit_price) +
         " version=" + std::to_string(h.price_version);
}

std::string show(const Error& e) {
  return std::string("error ") + std::string(code_name(e.code)) + " available=" + opt(e.available) +
         " requested=" + opt(e.requested) + " reserved=" + opt(e.reserved) + " expires_at=" + opt(e.expires_at_ms) +
         " retry_after=" + opt(e.retry_after_ms);
}

std::string show(const CommandResult& r, const Names& n) {
  if (!r.ok()) return show(r.error());
  return std::visit(
      [&](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        const auto made = [](bool created) { return std::string(created ? "ok created " : "ok replay "); };
        if constexpr (std::is_same_v<T, AccountOutcome>) {
          return made(o.created) + show(o.account);
        } else if constexpr (std::is_same_v<T, TransferOutcome>) {
          return made(o.created) + show(o.event, n) + " | " + show(o.account);
        } else if constexpr (std::is_same_v<T, HoldOutcome>) {
          return made(o.created) + show(o.hold, n);
        } else if constexpr (std::is_same_v<T, KeyOutcome>) {
          return made(o.created) + show(o.key);
        } else if constexpr (std::is_same_v<T, ExpireOutcome>) {
          return "ok expired=" + std::to_string(o.expired);
        } else if constexpr (std::is_same_v<T, KeyUseOutcome>) {
          return "ok recorded=" + std::to_string(o.recorded);
        } else if constexpr (std::is_same_v<T, jobs::JobOutcome>) {
          return made(o.created) + show(o.job, n) + " ended_hold=" + (o.ended_hold ? show(*o.ended_hold, n) : "null");
        } else if constexpr (std::is_same_v<T, coord::LockOutcome>) {
          return "ok " + std::string(coord::lock_decision_name(o.decision)) + " changed=" + std::to_string(o.changed) +
                 " now=" + std::to_string(o.now_ms) + " " + show(o.lock);
        } else if constexpr (std::is_same_v<T, coord::IdempotencyOutcome>) {
          return "ok " + std::string(coord::idem_decision_name(o.decision)) + " changed=" + std::to_string(o.changed) +
                 " taken_over=" + std::to_string(o.taken_over) + " " + (o.row ? show(*o.row) : "no row");
        } else if constexpr (std::is_same_v<T, coord::RateLimitOutcome>) {
          const auto& d = o.decision;
          return "ok allowed=" + std::to_string(d.allowed) + " remaining=" + std::to_string(d.remaining) +
                 " reset_after=" + std::to_string(d.reset_after_ms) + " retry_after=" + std::to_string(d.retry_after_ms) +
                 " tat=" + opt(d.new_tat_ns);
        } else if constexpr (std::is_same_v<T, coord::PruneOutcome>) {
          return "ok pruned keys=" + std::to_string(o.pruned_keys) + " rates=" + std::to_string(o.pruned_rates);
        } else if constexpr (std::is_same_v<T, EndpointOutcome>) {
          return std::string(o.deleted ? "ok deleted " : "ok ") + show(o.endpoint);
        } else if constexpr (std::is_same_v<T, DeliveriesOutcome>) {
          return "ok recorded=" + std::to_string(o.recorded) + " failed=" + std::to_string(o.failed) +
                 " disabled=" + std::to_string(o.disabled) + " " + show(o.endpoint);
        } else if constexpr (std::is_same_v<T, RefundOutcome>) {
          const refunds::Refund& r = o.refund;
          return made(o.created) + show(o.hold, n) + " | refund " + r.request_id + " hold=" + n.hold(r.hold_id) +
                 " account=" + r.account_id + " amount=" + std::to_string(r.amount) + " asked=" +
                 opt(r.requested_amount) + " reason=" + r.reason + " at=" + std::to_string(r.created_at_ms);
        } else if constexpr (std::is_same_v<T, PaymentOutcome>) {
          return made(o.created) + show(o.payment) + " | " + show(o.account) + " moved=" + std::to_string(o.moved) +
                 " owed=" + std::to_string(o.owed) + " froze=" + std::to_string(o.froze);
        } else if constexpr (std::is_same_v<T, PriceOutcome>) {
          return made(o.created) + show(o.price);
        } else if constexpr (std::is_same_v<T, PricedHoldOutcome>) {
          return made(o.created) + show(o.hold, n) + " | " + show(o.priced, n);
        } else {
          static_assert(!sizeof(T*), "an outcome this test does not show");
        }
      },
      r.value());
}

// The kind of a command, by name (the per-kind table).
std::string kind_of(const Command& c) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, CreateAccountCommand>) return "create_account";
        else if constexpr (std::is_same_v<T, CreditCommand>) return "credit";
        else if constexpr (std::is_same_v<T, DebitCommand>) return "debit";
        else if constexpr (std::is_same_v<T, ReserveCommand>) return "reserve";
        else if constexpr (std::is_same_v<T, CommitCommand>) return "commit";
        else if constexpr (std::is_same_v<T, ReleaseCommand>) return "release";
        else if constexpr (std::is_same_v<T, ExtendCommand>) return "extend";
        else if constexpr (std::is_same_v<T, UpdateAccountCommand>) return "update_account";
        else if constexpr (std::is_same_v<T, ExpireOverdueCommand>) return "expire_overdue";
        else if constexpr (std::is_same_v<T, CreateKeyCommand>) return "create_key";
        else if constexpr (std::is_same_v<T, RevokeKeyCommand>) return "revoke_key";
        else if constexpr (std::is_same_v<T, RecordKeyUseCommand>) return "record_key_use";
        else if constexpr (std::is_same_v<T, jobs::SubmitJobCommand>) return "submit_job";
        else if constexpr (std::is_same_v<T, jobs::ClaimJobCommand>) return "claim_job";
        else if constexpr (std::is_same_v<T, jobs::EndJobCommand>) return "end_job";
        else if constexpr (std::is_same_v<T, coord::LockCommand>) return "lock";
        else if constexpr (std::is_same_v<T, coord::IdempotencyCommand>) return "idempotency";
        else if constexpr (std::is_same_v<T, coord::RateLimitCommand>) return "rate_limit";
        else if constexpr (std::is_same_v<T, coord::PruneCoordCommand>) return "prune_coord";
        else if constexpr (std::is_same_v<T, webhooks::CreateEndpointCommand>) return "create_endpoint";
        else if constexpr (std::is_same_v<T, webhooks::UpdateEndpointCommand>) return "update_endpoint";
        else if constexpr (std::is_same_v<T, webhooks::DeleteEndpointCommand>) return "delete_endpoint";
        else if constexpr (std::is_same_v<T, webhooks::RotateEndpointSecretCommand>) return "rotate_endpoint";
        else if constexpr (std::is_same_v<T, webhooks::ReplayEndpointCommand>) return "replay_endpoint";
        else if constexpr (std::is_same_v<T, webhooks::RecordDeliveriesCommand>) return "record_deliveries";
        else if constexpr (std::is_same_v<T, refunds::RefundCommand>) return "refund";
        else if constexpr (std::is_same_v<T, payments::CreditPaymentCommand>) return "credit_payment";
        else if constexpr (std::is_same_v<T, payments::TakeBackPaymentCommand>) return "take_back_payment";
        else if constexpr (std::is_same_v<T, payments::DisputePaymentCommand>) return "dispute_payment";
        else if constexpr (std::is_same_v<T, prices::SetPriceCommand>) return "set_price";
        else if constexpr (std::is_same_v<T, prices::ReserveByFeatureCommand>) return "reserve_by_feature";
        else static_assert(!sizeof(T*), "a command kind this test does not generate: add it");
      },
      c);
}

// How a result is counted: the error code, or what the success did.
std::string outcome_of(const CommandResult& r) {
  if (!r.ok()) return std::string(code_name(r.code()));
  return std::visit(
      [](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, coord::LockOutcome>) return std::string(coord::lock_decision_name(o.decision));
        else if constexpr (std::is_same_v<T, coord::IdempotencyOutcome>) return std::string(coord::idem_decision_name(o.decision));
        else if constexpr (std::is_same_v<T, coord::RateLimitOutcome>) return o.decision.allowed ? "allowed" : "limited";
        else if constexpr (std::is_same_v<T, EndpointOutcome>) return o.deleted ? "deleted" : "ok";
        else if constexpr (std::is_same_v<T, DeliveriesOutcome>) return o.disabled ? "disabled" : "recorded";
        else if constexpr (std::is_same_v<T, PaymentOutcome>) {
          if (o.froze) return "froze";
          if (o.created && o.moved < o.owed) return "forgiven";
          return o.created ? "created" : "replay";
        }
        else if constexpr (std::is_same_v<T, HoldOutcome>) {
          if (o.hold.late_outcome == LateOutcome::charged && o.created) return "late_charged";
          if (o.hold.late_outcome == LateOutcome::forgiven && o.created) return "late_forgiven";
          return o.created ? "created" : "replay";
        } else if constexpr (requires { o.created; }) return o.created ? "created" : "replay";
        else return "ok";
      },
      r.value());
}

// A command as text, for the report of a differing batch.
std::string describe(const Command& c) {
  std::ostringstream o;
  o << kind_of(c);
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (requires { x.account_id; }) o << " account=" << opt(std::optional(x.account_id));
        if constexpr (requires { x.hold_id; }) o << " hold=" << x.hold_id;
        if constexpr (requires { x.request_id; }) o << " request=" << x.request_id;
        if constexpr (requires { x.client_request_id; }) o << " job=" << x.client_request_id;
        if constexpr (requires { x.reference; }) o << " reference=" << x.reference;
        if constexpr (std::is_same_v<T, CreditCommand> || std::is_same_v<T, DebitCommand> ||
                      std::is_same_v<T, ReserveCommand>) {
          o << " amount=" << x.amount;
        }
        if constexpr (std::is_same_v<T, CommitCommand> || std::is_same_v<T, refunds::RefundCommand>) {
          o << " amount=" << opt(x.amount);
        }
        if constexpr (requires { x.feature; }) o << " feature=" << x.feature;
        if constexpr (std::is_same_v<T, prices::SetPriceCommand>) o << " credits_per_unit=" << x.credits_per_unit;
        if constexpr (std::is_same_v<T, prices::ReserveByFeatureCommand>) {
          o << " account=" << x.reserve.account_id << " request=" << x.reserve.request_id << " quantity=" << x.quantity;
        }
        if constexpr (requires { x.key; }) o << " key=" << x.key;
        if constexpr (requires { x.key_id; }) o << " key_id=" << x.key_id;
      },
      c);
  return o.str();
}

// ================================================================================================
// the generator

// The payments the generator makes: Stripe's checkout sessions, then another provider's payments.
const std::vector<std::string> kPaymentIds = {"stripe:cs_0", "stripe:cs_1", "stripe:cs_2", "stripe:cs_3", "stripe:cs_4",
                                              "stripe:cs_5", "stripe:cs_6", "payment:p7",  "payment:p8",  "payment:p9"};

class Generator {
 public:
  // Webhook endpoint commands come from a stream of their own, added between the others: they touch no
  // ledger row, so the ledger's commands and outcomes stay what the seed made them before they existed.
  // Refunds likewise (they move money, so the ledger's outcomes after one differ, but the commands
  // the other streams make stay the same).
  explicit Generator(std::uint64_t seed)
      : rng_(seed),
        endpoint_rng_(seed ^ 0x77656268'6f6f6b73ULL),
        refund_rng_(seed ^ 0x72656675'6e647321ULL),
        payment_rng_(seed ^ 0x7061796d'656e7473ULL),
        price_rng_(seed ^ 0x70726963'65732121ULL) {}

  // One batch; hold references are "@<request_id>". `model` tells which holds and jobs exist.
  std::vector<Command> batch(const LedgerModel& model, std::int64_t now_ms) {
    std::vector<Command> out;
    const int size = pick(4) == 0 ? 1 : 1 + pick(16);
    for (int i = 0; i < size; ++i) {
      out.push_back(command(model, now_ms));
      if (endpoint_pick(100) < 5) out.push_back(endpoint_command(model, endpoint_pick(4)));
      if (endpoint_pick(100) < 5) out.push_back(delivery_command(model, now_ms));
      if (refund_pick(100) < 8) out.push_back(refund_command(model, now_ms));
      if (payment_pick(100) < 12) out.push_back(payment_command(model));
      if (price_pick(100) < 10) out.push_back(price_command());
    }
    return out;
  }

 private:
  int pick(int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng_)); }
  std::int64_t between(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(100) < percent; }
  template <typename T>
  const T& one_of(const std::vector<T>& v) { return v.at(static_cast<std::size_t>(pick(static_cast<int>(v.size())))); }

  std::string account() { return one_of(std::vector<std::string>{"a0", "a1", "a2", "a3", "big", "ghost"}); }
  std::string random_part() {
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 16; ++i) s += hex[pick(16)];
    return s;
  }
  std::int64_t amount() {
    switch (pick(10)) {
      case 0: return kMax - between(0, 3);  // near 2^53 − 1
      case 1: return between(100, 2'000);
      default: return between(1, 30);
    }
  }
  std::string owner() { return one_of(std::vector<std::string>{"o1", "o2", "o3"}); }
  std::string hold_ref(const LedgerModel& model, std::int64_t now_ms, bool jobs_too) {
    if (chance(5)) return "hold_424242_0123456789abcdef";  // unknown
    std::vector<std::string> refs;
    for (const Hold& h : model.holds(now_ms)) {
      if (jobs_too || h.request_id.rfind("job:", 0) != 0 || chance(3)) refs.push_back("@" + h.request_id);
    }
    if (refs.empty()) return "hold_424242_0123456789abcdef";
    // Mostly the recent ones (still active), now and then any.
    if (chance(70) && refs.size() > 6) return refs.at(refs.size() - 1 - static_cast<std::size_t>(pick(6)));
    return one_of(refs);
  }
  std::string job_id(const LedgerModel& model) {
    auto ids = model.job_ids();
    if (ids.empty() || chance(10)) return "j" + std::to_string(pick(next_job_ + 1));
    if (chance(70) && ids.size() > 4) return ids.at(ids.size() - 1 - static_cast<std::size_t>(pick(4)));
    return one_of(ids);
  }
  std::string secret(int n) { return std::string(64, "0123456789abcdef"[n]); }  // 64 hex digits

  Command command(const LedgerModel& model, std::int64_t now_ms) {
    const int kind = pick(100);
    if (kind < 6) {  // create_account (again: a replay, or other settings: conflict)
      std::string id = account();
      if (id == "ghost") id = "a0";  // ghost stays unknown
      if (id == "big") return CreateAccountCommand{id, 100, std::nullopt};  // room for overflows of reserved
      // Mostly the settings it was first asked with (created, or a replay), now and then others (conflict).
      auto first = settings_.try_emplace(id, one_of(std::vector<std::int64_t>{0, 0, 5}), chance(30)).first->second;
      if (chance(15)) first = {one_of(std::vector<std::int64_t>{0, 5, 50}), chance(50)};
      return CreateAccountCommand{id, first.first, first.second ? std::optional<std::int64_t>(3) : std::nullopt};
    }
    if (chance(8) && !made_.empty()) return one_of(made_);  // the same command again: a replay
    if (kind < 16) {  // credit
      const bool replay = chance(15) && !references_.empty();
      const std::string ref = replay ? one_of(references_) : "r" + std::to_string(references_.size());
      if (!replay) references_.push_back(ref);
      return remember(CreditCommand{account(), replay && chance(50) ? 5 : amount(), ref});
    }
    if (kind < 22) {  // debit
      const bool replay = chance(15) && !references_.empty();
      const std::string ref = replay ? one_of(references_) : "r" + std::to_string(references_.size());
      if (!replay) references_.push_back(ref);
      return remember(DebitCommand{account(), replay && chance(50) ? 5 : amount(), ref, chance(50) ? "fee" : ""});
    }
    if (kind < 36) {  // reserve
      const bool replay = chance(15) && !requests_.empty();
      const std::string req = replay ? one_of(requests_) : "q" + std::to_string(requests_.size());
      if (!replay) requests_.push_back(req);
      std::int64_t amt = amount();
      if (replay && chance(60)) amt = replay_amounts_[req];
      replay_amounts_.try_emplace(req, amt);
      return remember(ReserveCommand{account(), amt, req, between(200, 4'000), chance(20) ? "{\"k\":1}" : "", random_part()});
    }
    if (kind < 44) {  // commit
      std::optional<std::int64_t> amt;
      if (chance(50)) amt = chance(10) ? between(500, 5'000) : between(1, 25);
      const auto policy = one_of(std::vector<LateCommitPolicy>{LateCommitPolicy::charge, LateCommitPolicy::forgive,
                                                               LateCommitPolicy::reject});
      return CommitCommand{hold_ref(model, now_ms, false), amt, policy};
    }
    if (kind < 49) {
      return ReleaseCommand{hold_ref(model, now_ms, false), chance(50) ? std::optional<std::string>("done") : std::nullopt};
    }
    if (kind < 53) return ExtendCommand{hold_ref(model, now_ms, false), between(200, 4'000)};
    if (kind < 57) {  // update_account
      UpdateAccountCommand c;
      c.account_id = account();
      if (chance(40)) c.overdraft_limit = one_of(std::vector<std::int64_t>{0, 5, 100});
      if (chance(30)) c.max_active_holds = chance(50) ? std::optional<std::int64_t>(3) : std::nullopt;
      if (chance(40)) c.frozen = chance(30);
      // Balance notices: thresholds around the small amounts the batches move, so crossings happen.
      if (chance(50)) {
        c.low_balance_threshold = one_of(std::vector<std::optional<std::int64_t>>{std::nullopt, 1, 5, 20, 40});
      }
      return c;
    }
    if (kind < 60) return ExpireOverdueCommand{between(1, 4)};
    if (kind < 63) {  // create_key
      const int n = pick(5);
      std::optional<std::string> acct;
      if (n > 0) acct = account();
      return CreateKeyCommand{"k" + std::to_string(n), acct, secret(chance(85) ? n : n + 10)};
    }
    if (kind < 65) return RevokeKeyCommand{"k" + std::to_string(pick(6)), chance(30)};
    if (kind < 67) {  // record_key_use
      RecordKeyUseCommand c;
      std::set<std::string> seen;
      for (int i = 0, n = 1 + pick(3); i < n; ++i) {
        const std::string id = "k" + std::to_string(pick(6));
        if (seen.insert(id).second) c.uses.push_back({id, now_ms - between(-500, 3'000)});
      }
      return c;
    }
    if (kind < 74) {  // submit_job
      jobs::SubmitJobCommand c;
      const bool replay = chance(15) && next_job_ > 0;
      c.client_request_id = replay ? "j" + std::to_string(pick(next_job_)) : "j" + std::to_string(next_job_++);
      c.account_id = account();
      c.cost = chance(80) ? between(1, 20) : amount();
      c.provider = "p";
      c.input_json = chance(90) ? "{}" : "{\"x\":2}";
      c.ttl_ms = between(300, 4'000);
      c.hold_id_random = random_part();
      c.owner = owner();
      c.lease_ms = between(100, 3'000);
      return remember(c);
    }
    if (kind < 80) {  // claim_job
      jobs::ClaimJobCommand c;
      c.client_request_id = job_id(model);
      c.hold_id = chance(92) ? "@job:" + c.client_request_id : hold_ref(model, now_ms, true);
      c.owner = owner();
      c.lease_ms = between(100, 3'000);
      c.begin_attempt = chance(60);
      if (chance(30)) c.note = "seen";
      return c;
    }
    if (kind < 86) {  // end_job
      jobs::EndJobCommand c;
      c.client_request_id = job_id(model);
      c.hold_id = chance(92) ? "@job:" + c.client_request_id : hold_ref(model, now_ms, true);
      c.end = one_of(std::vector<jobs::JobStatus>{jobs::JobStatus::completed, jobs::JobStatus::completed,
                                                   jobs::JobStatus::failed, jobs::JobStatus::cancelled});
      if (c.end == jobs::JobStatus::completed) c.result_json = "{\"r\":1}";
      if (c.end == jobs::JobStatus::failed && chance(50)) c.error = "provider said no";
      c.by = one_of(std::vector<jobs::EndedBy>{jobs::EndedBy::provider, jobs::EndedBy::client, jobs::EndedBy::recovery});
      c.late_commit = one_of(std::vector<LateCommitPolicy>{LateCommitPolicy::charge, LateCommitPolicy::forgive,
                                                           LateCommitPolicy::reject});
      return c;
    }
    if (kind < 90) {  // lock
      coord::LockCommand c;
      c.op = one_of(std::vector<coord::LockOp>{coord::LockOp::acquire, coord::LockOp::acquire, coord::LockOp::renew,
                                               coord::LockOp::release, coord::LockOp::cancel});
      c.key = "L" + std::to_string(pick(3));
      if (c.op != coord::LockOp::cancel) c.owner = owner();
      if (c.op == coord::LockOp::acquire || c.op == coord::LockOp::renew) c.ttl_ms = between(100, 3'000);
      if ((c.op == coord::LockOp::renew || c.op == coord::LockOp::release) && chance(40)) {
        auto l = model.lock(c.key);
        c.fence = l && chance(70) ? l->fence : between(1, 5);
      }
      return c;
    }
    if (kind < 95) {  // idempotency
      coord::IdempotencyCommand c;
      c.op = one_of(std::vector<coord::IdemOp>{coord::IdemOp::begin, coord::IdemOp::begin, coord::IdemOp::finish,
                                               coord::IdemOp::finish, coord::IdemOp::abandon});
      c.key = "I" + std::to_string(pick(3));
      c.fingerprint = chance(90) ? "f" : "g";
      if (c.op == coord::IdemOp::begin) c.ttl_ms = between(100, 3'000);
      if (c.op == coord::IdemOp::finish) c.response_json = "{\"done\":true}";
      if (c.op != coord::IdemOp::begin && chance(40)) {
        auto k = model.idempotency_key(c.key);
        c.attempt = k && chance(70) ? k->attempt : between(1, 3);
      }
      return c;
    }
    if (kind < 98) {  // rate_limit: 3 per second
      coord::RateLimitCommand c;
      c.op = chance(10) ? coord::RateOp::reset : coord::RateOp::check;
      c.policy = "pol";
      c.key = "R" + std::to_string(pick(2));
      if (c.op == coord::RateOp::check) {
        c.gcra = coord::GcraPolicy{3, 1'000};
        c.cost = between(1, 3);
      }
      return c;
    }
    return coord::PruneCoordCommand{kRetentionMs, 1'000};
  }

  // Webhook endpoints: a pool of four ids (a create of a taken one: conflict), accounts that exist
  // or not, every field changed now and then; ids and secrets made here as the ledger would.
  int endpoint_pick(int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(endpoint_rng_)); }
  bool endpoint_chance(int percent) { return endpoint_pick(100) < percent; }
  std::string endpoint_id() { return "we_000000000000000" + std::to_string(endpoint_pick(4)); }
  // Mostly one that exists (so that changes are compared, not only refused), now and then any.
  std::string existing_endpoint_id(const LedgerModel& model) {
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) {
      if (model.endpoint("we_000000000000000" + std::to_string(i))) ids.push_back("we_000000000000000" + std::to_string(i));
    }
    return ids.empty() || endpoint_chance(20) ? endpoint_id() : ids.at(static_cast<std::size_t>(endpoint_pick(static_cast<int>(ids.size()))));
  }
  std::string endpoint_secret() {
    std::string bytes;
    for (std::size_t i = 0; i < limits::kWebhookSecretBytes; ++i) bytes.push_back(static_cast<char>(endpoint_pick(256)));
    return webhooks::secret_from_random(bytes);
  }
  std::vector<std::string> event_types() {
    if (endpoint_chance(40)) return {};
    if (endpoint_chance(50)) return {"credited"};
    return {"balance_low", "balance_recovered"};
  }
  Command endpoint_command(const LedgerModel& model, int which) {
    switch (which) {
      case 0: {
        webhooks::CreateEndpointCommand c;
        c.url = "https://hooks.example/" + std::to_string(endpoint_pick(3));
        c.event_types = event_types();
        if (endpoint_chance(40)) c.account_id = endpoint_chance(80) ? "a" + std::to_string(endpoint_pick(4)) : "ghost";
        if (endpoint_chance(50)) c.description = "d" + std::to_string(endpoint_pick(3));
        c.endpoint_id = endpoint_id();
        c.secret = endpoint_secret();
        return c;
      }
      case 1: {
        webhooks::UpdateEndpointCommand c;
        c.endpoint_id = existing_endpoint_id(model);
        if (endpoint_chance(40)) c.url = "http://other.example:8080/x";
        if (endpoint_chance(30)) c.event_types = event_types();
        if (endpoint_chance(30)) c.description = "changed";
        if (endpoint_chance(50)) {
          c.status = endpoint_chance(50) ? webhooks::EndpointStatus::disabled : webhooks::EndpointStatus::enabled;
        }
        return c;
      }
      case 2: return webhooks::DeleteEndpointCommand{existing_endpoint_id(model)};
      default: return webhooks::RotateEndpointSecretCommand{existing_endpoint_id(model), endpoint_secret()};
    }
  }

  // Replays and delivery records on the endpoints (no cursor moves: each side numbers its own events,
  // and the cursor's compare-and-set is the conformance suite's, tests/webhooks/webhook_store_test.cc).
  Command delivery_command(const LedgerModel& model, std::int64_t now_ms) {
    const std::string endpoint_id = existing_endpoint_id(model);
    if (endpoint_chance(20)) return webhooks::ReplayEndpointCommand{endpoint_id, endpoint_pick(5)};
    webhooks::RecordDeliveriesCommand c;
    c.endpoint_id = endpoint_id;
    c.fence = 1 + endpoint_pick(3);
    std::set<std::int64_t> events;
    for (int i = 0, n = 1 + endpoint_pick(4); i < n; ++i) events.insert(1 + endpoint_pick(6));
    for (const std::int64_t event_id : events) {
      webhooks::DeliveryAttempt a;
      a.event_id = event_id;
      a.event_type = "credited";
      a.account_id = "a1";
      a.event_at_ms = now_ms - 1'000;
      // Hours apart at times, so that an endpoint fails for 5 days now and then.
      a.at_ms = now_ms - (endpoint_chance(10) ? 6 * 86'400'000 : 0);
      a.delivered = endpoint_chance(40);
      if (!a.delivered) a.error = endpoint_chance(50) ? "HTTP 500" : "timed out";
      if (endpoint_chance(50)) a.status_code = a.delivered ? 200 : 500;
      a.jitter_permille = endpoint_pick(201) - 100;
      if (const auto d = model.delivery(endpoint_id, event_id); d && endpoint_chance(70)) {
        a.retry_of_attempts = endpoint_chance(80) ? d->attempts : d->attempts + 1;
      }
      c.attempts.push_back(a);
    }
    return c;
  }

  // Refunds: mostly of the charged holds (so that amounts are compared, not only refused), now and
  // then of any hold or none; a job's hold through its job (its request_id) or, refused, through the
  // holds API; request_ids new or used before (the same refund again, or another hold or amount).
  int refund_pick(int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(refund_rng_)); }
  bool refund_chance(int percent) { return refund_pick(100) < percent; }
  Command refund_command(const LedgerModel& model, std::int64_t now_ms) {
    std::vector<const Hold*> charged;
    const std::vector<Hold> holds = model.holds(now_ms);
    for (const Hold& h : holds) {
      if (h.committed_amount > 0 || refund_chance(5)) charged.push_back(&h);
    }
    refunds::RefundCommand c;
    if (charged.empty() || refund_chance(5)) {
      c.hold_id = "hold_424242_0123456789abcdef";
    } else {
      const Hold& h = *charged.at(static_cast<std::size_t>(refund_pick(static_cast<int>(charged.size()))));
      c.hold_id = "@" + h.request_id;
      if (h.request_id.rfind("job:", 0) == 0 && refund_chance(85)) {
        c.owner_request_id = refund_chance(90) ? h.request_id : "job:j9999";
      }
    }
    if (refund_chance(60)) c.amount = refund_chance(10) ? refund_pick(5'000) + 1 : refund_pick(6) + 1;
    c.reason = refund_chance(50) ? "jammed" : "complaint";
    const bool again = refund_chance(20) && !refund_requests_.empty();
    if (again) {
      const Command& earlier = refund_requests_.at(static_cast<std::size_t>(refund_pick(static_cast<int>(refund_requests_.size()))));
      if (refund_chance(70)) return earlier;  // the same refund again
      c.request_id = std::get<refunds::RefundCommand>(earlier).request_id;  // another hold or amount
    } else {
      c.request_id = "f" + std::to_string(next_refund_++);
      refund_requests_.push_back(c);
    }
    return c;
  }

  // Payments: a few payments (Stripe's and another provider's) on the accounts, mostly named with
  // the account that paid (so refunds and disputes apply), now and then another; refunds as a share
  // (Stripe: cumulative, in any order) or in credits, into debt or forgiven; the same event again.
  int payment_pick(int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(payment_rng_)); }
  bool payment_chance(int percent) { return payment_pick(100) < percent; }
  std::string payment_account() {
    if (payment_chance(50)) return "pay";
    return std::vector<std::string>{"a0", "a1", "a2", "a3", "big", "ghost"}.at(static_cast<std::size_t>(payment_pick(6)));
  }
  // "pay" is the payment stream's own account: credited only by payments and spent by its debits,
  // so that refunds find the credits gone (a shortfall: into debt and frozen, or forgiven).
  Command payment_command(const LedgerModel& model) {
    if (payment_chance(4)) return CreateAccountCommand{"pay", 0, std::nullopt};
    if (payment_chance(20)) {
      return DebitCommand{"pay", 1 + payment_pick(25), "pd" + std::to_string(next_payment_debit_++), "spent"};
    }
    const int n = payment_pick(static_cast<int>(kPaymentIds.size()));
    const bool stripe = n < 7;
    const std::string id = stripe ? "stripe:cs_" + std::to_string(n) : "payment:p" + std::to_string(n);
    const auto paid = model.payment(id);
    const int kind = payment_pick(100);
    if (kind < 40 || (!paid && kind < 80)) {
      payments::CreditPaymentCommand c;
      c.payment_id = id;
      c.provider = stripe ? payments::Provider::stripe : payments::Provider::webhook;
      if (stripe) c.provider_payment = "pi_" + std::to_string(n);
      c.account_id = paid && payment_chance(80) ? paid->account_id : payment_account();
      c.credits = paid && payment_chance(80) ? paid->credits : 1 + payment_pick(40);
      return c;
    }
    const std::string account = paid && payment_chance(90) ? paid->account_id : payment_account();
    if (kind < 90) {
      payments::TakeBackPaymentCommand c;
      c.payment_id = id;
      c.account_id = account;
      c.into_debt = payment_chance(60);
      if (stripe) {
        const std::int64_t total = payment_chance(70) ? 100 : 3;
        const std::int64_t refunded = payment_pick(static_cast<int>(total) + 1);
        c.share = payments::RefundShare{refunded, total};
        c.reference = "stripe:ch_" + std::to_string(n) + ":refunded:" + std::to_string(refunded) + "-" + std::to_string(total);
      } else {
        c.credits = 1 + payment_pick(15);
        c.reference = id + ":refund:w" + std::to_string(payment_pick(8));
      }
      return c;
    }
    const int dispute = payment_chance(85) ? n : payment_pick(3);  // mostly the payment's own dispute
    return payments::DisputePaymentCommand{id, account, "stripe:dp_" + std::to_string(dispute)};
  }

  // Prices: a few features priced and re-priced (now and then near the largest amount), holds by
  // feature on the accounts — of unknown features too, quantities that overflow, the same request
  // again (as it was, or with another quantity), and request_ids of holds made by amount.
  int price_pick(int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(price_rng_)); }
  bool price_chance(int percent) { return price_pick(100) < percent; }
  Command price_command() {
    static const std::vector<std::string> kFeatures = {"photo", "video", "print", "unpriced"};
    const std::string feature = kFeatures.at(static_cast<std::size_t>(price_pick(price_chance(90) ? 3 : 4)));
    if (price_chance(30)) {
      const std::int64_t credits = price_chance(5) ? kMax - price_pick(3) : 1 + price_pick(6);
      return prices::SetPriceCommand{feature, credits};
    }
    prices::ReserveByFeatureCommand c;
    c.feature = feature;
    c.quantity = price_chance(5) ? kMax / 2 : 1 + price_pick(4);
    const std::string account =
        std::vector<std::string>{"a0", "a1", "a2", "a3", "big", "ghost"}.at(static_cast<std::size_t>(price_pick(6)));
    std::string request = "p" + std::to_string(next_priced_);
    if (price_chance(15) && !priced_.empty()) {
      const auto& earlier = priced_.at(static_cast<std::size_t>(price_pick(static_cast<int>(priced_.size()))));
      if (price_chance(70)) return earlier;  // the same request again
      request = earlier.reserve.request_id;  // another quantity or account
    } else if (price_chance(5) && !requests_.empty()) {
      request = requests_.front();  // a request_id that made (or may make) a hold by amount
    } else {
      ++next_priced_;
    }
    c.reserve = ReserveCommand{account, 0, request, 200 + price_pick(3'800), "", ""};
    const std::string number = std::to_string(next_priced_);
    c.reserve.hold_id_random = "c" + std::string(15 - number.size(), '0') + number;
    if (request.rfind('p', 0) == 0 && priced_.size() < 100) priced_.push_back(c);
    return c;
  }

  Command remember(Command c) {
    if (made_.size() < 200) made_.push_back(c);
    return c;
  }

  std::mt19937_64 rng_;
  std::mt19937_64 endpoint_rng_;
  std::mt19937_64 refund_rng_;
  std::mt19937_64 payment_rng_;
  std::mt19937_64 price_rng_;
  std::vector<prices::ReserveByFeatureCommand> priced_;  // holds by feature asked for, to send again
  int next_priced_ = 0;
  int next_payment_debit_ = 0;
  std::vector<Command> refund_requests_;  // refunds made, to send again
  int next_refund_ = 0;
  std::vector<Command> made_;  // transfers, reservations, jobs: sent again as they were
  std::map<std::string, std::pair<std::int64_t, bool>> settings_;  // account → (overdraft, max 3 holds)
  std::vector<std::string> references_;
  std::vector<std::string> requests_;
  std::map<std::string, std::int64_t> replay_amounts_;
  int next_job_ = 0;
};

// A command with its hold references ("@<request_id>") made this side's ids.
Command resolve(Command c, const Names& n) {
  std::visit(
      [&](auto& x) {
        if constexpr (requires { x.hold_id; }) {
          if constexpr (std::is_same_v<std::decay_t<decltype(x.hold_id)>, std::string>) x.hold_id = n.resolve(x.hold_id);
        }
      },
      c);
  return c;
}

// Learns the hold ids an answer reports.
void learn(const CommandResult& r, Names& n) {
  if (!r.ok()) return;
  if (const auto* h = std::get_if<HoldOutcome>(&r.value())) n.learn(h->hold.hold_id, h->hold.request_id);
  if (const auto* h = std::get_if<PricedHoldOutcome>(&r.value())) n.learn(h->hold.hold_id, h->hold.request_id);
  if (const auto* j = std::get_if<jobs::JobOutcome>(&r.value())) {
    n.learn(j->job.hold_id, "job:" + j->job.client_request_id);
  }
}

// ================================================================================================
// the whole state, as the store's reads show it and as the model has it

// A side's holds by their shared names (the order both sides list them in).
std::map<std::string, std::string> by_name(const Names& n) {
  std::map<std::string, std::string> out;
  for (const auto& [id, name] : n.holds) out[name] = id;
  return out;
}

const std::vector<std::string> kAccounts = {"a0", "a1", "a2", "a3", "big", "ghost", "pay"};


std::vector<std::string> store_state(Store& store, const Names& n, const std::vector<std::string>& job_ids,
                                     const std::vector<std::string>& secrets) {
  std::vector<std::string> out;
  for (const std::string& id : kAccounts) {
    auto a = store.get_account(id);
    out.push_back(a.ok() ? show(*a) : id + ": " + std::string(code_name(a.code())));
    if (!a.ok()) continue;
    std::int64_t after = 0;
    for (int page = 0; page < 1'000; ++page) {
      auto events = store.read_events(id, after, limits::kEventsPageMax);
      if (!events.ok()) {
        out.push_back("events: " + std::string(code_name(events.code())));
        break;
      }
      for (const Event& e : events->events) out.push_back(show(e, n));
      if (events->events.empty()) break;
      after = events->next_after;
    }
  }
  for (const auto& [name, id] : by_name(n)) {  // every hold this side answered with, by name
    auto h = store.get_hold(id);
    out.push_back(h.ok() ? show(*h, n) : name + ": " + std::string(code_name(h.code())));
  }
  for (const std::string& id : job_ids) {
    auto j = store.jobs().get_job(id);
    out.push_back(j.ok() ? show(*j, n) : id + ": " + std::string(code_name(j.code())));
    auto history = store.jobs().job_history(id);
    if (history.ok()) {
      for (const auto& e : *history) out.push_back("  " + e.kind + " attempt=" + opt(e.attempt) + " at=" + std::to_string(e.at_ms));
    }
  }
  for (int i = 0; i < 3; ++i) {
    auto l = store.coord().get_lock("L" + std::to_string(i));
    out.push_back(!l.ok() ? "lock error" : l->row ? show(*l->row) : "no lock L" + std::to_string(i));
  }
  for (int i = 0; i < 4; ++i) {
    auto k = store.coord().get_idempotency_key("I" + std::to_string(i));
    out.push_back(!k.ok() ? "idem error" : k->row ? show(*k->row) : "no idem I" + std::to_string(i));
  }
  for (int i = 0; i < 4; ++i) {
    const std::string id = "we_000000000000000" + std::to_string(i);
    auto e = store.webhooks().get_endpoint(id);
    out.push_back(e.ok() ? show(*e) : id + ": " + std::string(code_name(e.code())));
  }
  for (const std::string& id : kPaymentIds) {
    auto p = store.payments().get_payment(id);
    out.push_back(p.ok() ? show(*p) : id + ": " + std::string(code_name(p.code())));
  }
  for (const std::string feature : {"photo", "video", "print", "unpriced"}) {
    auto versions = store.prices().list_versions(feature, PageRequest{limits::kListPageMax, std::nullopt});
    if (!versions.ok()) {
      out.push_back(feature + ": " + std::string(code_name(versions.code())));
      continue;
    }
    for (auto it = versions->items.rbegin(); it != versions->items.rend(); ++it) out.push_back(show(*it));
  }
  {
    std::vector<std::int64_t> seqs;
    for (const auto& [name, id] : by_name(n)) {
      if (auto seq = hold_id_seq(id); seq && seqs.size() < static_cast<std::size_t>(limits::kListPageMax)) seqs.push_back(*seq);
    }
    auto priced = store.prices().priced_holds(seqs);
    std::map<std::string, std::string> by_request;
    if (priced.ok()) {
      for (const auto& [seq, h] : *priced) by_request[h.request_id] = show(h, n);
    }
    for (const auto& [request, line] : by_request) out.push_back(line);
  }
  for (const std::string& s : secrets) {
    auto k = store.find_key(s);
    out.push_back(!k.ok() ? "key error" : k->key ? show(*k->key) : "no key " + s.substr(0, 4));
  }
  return out;
}

std::vector<std::string> model_state(const LedgerModel& m, const Names& n, std::int64_t now_ms,
                                     const std::vector<std::string>& job_ids, const std::vector<std::string>& secrets) {
  std::vector<std::string> out;
  for (const std::string& id : kAccounts) {
    auto a = m.account(id, now_ms);
    out.push_back(a ? show(*a) : id + ": not_found");
    if (!a) continue;
    for (const Event& e : m.events_of(id)) out.push_back(show(e, n));
  }
  std::map<std::string, Hold> by_id;
  for (const Hold& h : m.holds(now_ms)) by_id[h.hold_id] = h;
  for (const auto& [name, id] : by_name(n)) {
    auto it = by_id.find(id);
    out.push_back(it != by_id.end() ? show(it->second, n) : name + ": not_found");
  }
  for (const std::string& id : job_ids) {
    auto j = m.job(id);
    out.push_back(j ? show(*j, n) : id + ": not_found");
    if (j) {
      for (const auto& e : m.history(id)) out.push_back("  " + e.kind + " attempt=" + opt(e.attempt) + " at=" + std::to_string(e.at_ms));
    }
  }
  for (int i = 0; i < 3; ++i) {
    auto l = m.lock("L" + std::to_string(i));
    out.push_back(l ? show(*l) : "no lock L" + std::to_string(i));
  }
  for (int i = 0; i < 4; ++i) {
    auto k = m.idempotency_key("I" + std::to_string(i));
    out.push_back(k ? show(*k) : "no idem I" + std::to_string(i));
  }
  for (int i = 0; i < 4; ++i) {
    const std::string id = "we_000000000000000" + std::to_string(i);
    auto e = m.endpoint(id);
    out.push_back(e ? show(*e) : id + ": not_found");
  }
  for (const std::string& id : kPaymentIds) {
    auto p = m.payment(id);
    out.push_back(p ? show(*p) : id + ": not_found");
  }
  for (const std::string feature : {"photo", "video", "print", "unpriced"}) {
    bool any = false;
    for (const prices::Price& p : m.price_versions()) {
      if (p.feature != feature) continue;
      out.push_back(show(p));
      any = true;
    }
    if (!any) out.push_back(feature + ": not_found");
  }
  {
    std::map<std::string, std::string> by_request;
    for (const auto& [name, id] : by_name(n)) {
      if (auto h = m.priced_hold(name.substr(1))) by_request[h->request_id] = show(*h, n);
    }
    for (const auto& [request, line] : by_request) out.push_back(line);
  }
  for (const std::string& s : secrets) {
    std::optional<ApiKey> found;
    for (int i = 0; i < 6 && !found; ++i) {
      auto k = m.key("k" + std::to_string(i));
      if (k && k->secret_sha256 == s) found = k;
    }
    out.push_back(found ? show(*found) : "no key " + s.substr(0, 4));
  }
  return out;
}

// The first lines where two states differ (at most 12).
std::string state_diff(const std::vector<std::string>& store, const std::vector<std::string>& model) {
  std::ostringstream o;
  int shown = 0;
  for (std::size_t i = 0; i < std::max(store.size(), model.size()) && shown < 12; ++i) {
    const std::string s = i < store.size() ? store[i] : "(nothing)";
    const std::string m = i < model.size() ? model[i] : "(nothing)";
    if (s == m) continue;
    o << "\n  line " << i << "\n    store: " << s << "\n    model: " << m;
    ++shown;
  }
  return o.str();
}

std::vector<std::uint64_t> seeds() {
  std::vector<std::uint64_t> out;
  if (const char* env = std::getenv("TOLLGATE_DIFFERENTIAL_SEEDS")) {
    std::stringstream in(env);
    std::string part;
    while (std::getline(in, part, ',')) {
      if (!part.empty()) out.push_back(std::stoull(part));
    }
  }
  if (out.empty()) out = {1, 2, 3};
  return out;
}

int iterations() {
  if (const char* env = std::getenv("TOLLGATE_DIFFERENTIAL_ITERATIONS")) {
    const int n = std::atoi(env);
    if (n >= 1 && n <= 1'000'000) return n;
  }
  return 150;
}

// A fresh store of one backend, owning its home (a temporary folder, or a schema dropped after).
struct Opened {
  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<testing::PgSchema> schema;
  std::unique_ptr<SqliteStore> sqlite;
  std::unique_ptr<PgStore> pg;

  Opened(const std::string& backend, const std::optional<std::string>& pg_server, const Clock& clock) {
    if (backend == "sqlite") {
      dir = std::make_unique<testing::TempDir>();
      SqliteOptions options;
      options.path = dir->file("tollgate.db");
      options.lease_wait_ms = 30'000;  // a hang detector on a loaded machine, not a latency goal
      auto opened = SqliteStore::open(options, clock);
      if (!opened) throw std::runtime_error("open sqlite: " + opened.error().detail);
      sqlite = std::move(opened).value();
    } else {
      schema = std::make_unique<testing::PgSchema>(pg_server.value());
      PgOptions options;
      options.uri = schema->uri();
      options.clock = &clock;
      options.readers_max = 2;
      options.statement_timeout_ms = 30'000;
      options.lease_wait_ms = 30'000;
      auto opened = PgStore::open(options);
      if (!opened) throw std::runtime_error("open postgres: " + opened.error().detail);
      pg = std::move(opened).value();
    }
  }
  ~Opened() {
    sqlite.reset();
    pg.reset();  // before its schema is dropped
  }
  Store& store() { return sqlite ? static_cast<Store&>(*sqlite) : static_cast<Store&>(*pg); }
  const BatchRunCounters& counters() const { return sqlite ? sqlite->counters() : pg->counters(); }
};

using Table = std::map<std::string, std::map<std::string, int>>;  // kind → outcome → count

// One round of a run: how far the clock moves before it, and its batch (hold references
// "@<request_id>"). `next` gets the model as it stands and the time the batch runs at.
struct Round {
  std::int64_t advance_ms = 0;
  std::vector<Command> commands;
};
using NextRound = std::function<Round(const LedgerModel&, std::int64_t now_ms, int round)>;

// Runs `rounds` rounds through a fresh store and the model; false at the first difference (reported
// as a test failure). The whole state is compared every 10 rounds and after the last; `check`, when
// set, then looks at the store itself.
bool run_rounds(const std::string& backend, const std::optional<std::string>& pg_server, const std::string& who,
                int rounds, const NextRound& next, Table& table, const std::function<void(Store&)>& check = {}) {
  ManualClock clock;
  Opened opened(backend, pg_server, clock);
  Store* store = &opened.store();
  LedgerModel model;
  Names store_names, model_names;
  std::vector<std::string> secrets;
  for (int i = 0; i < 15; ++i) secrets.push_back(std::string(64, "0123456789abcdef"[i]));
  const ValidationLimits limits;
  for (int round = 0; round < rounds; ++round) {
    const Round r = next(model, clock.now_ms(), round);
    clock.advance_ms(r.advance_ms);
    const std::int64_t now = clock.now_ms();
    const std::vector<Command>& batch = r.commands;
    std::vector<Command> to_store, to_model;
    for (const Command& c : batch) {
      to_store.push_back(resolve(c, store_names));
      to_model.push_back(resolve(c, model_names));
      if (auto valid = validate(to_store.back(), limits); !valid) {
        ADD_FAILURE() << who << ": an invalid command: " << describe(c) << ": " << valid.error().detail;
        return false;
      }
    }
    std::vector<CommandResult> results;
    model.begin_batch();
    if (auto applied = store->apply(to_store, results); !applied) {
      ADD_FAILURE() << who << " round " << round << ": apply failed: " << applied.error().detail;
      return false;
    }
    if (results.size() != batch.size()) {
      ADD_FAILURE() << who << ": " << results.size() << " results for " << batch.size() << " commands";
      return false;
    }
    std::ostringstream report;
    bool differs = false;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const CommandResult expected = model.apply(to_model[i], now);
      learn(results[i], store_names);
      learn(expected, model_names);
      const std::string got = show(results[i], store_names), want = show(expected, model_names);
      ++table[kind_of(batch[i])][outcome_of(results[i])];
      if (batch.size() <= 64 || got != want) report << "\n  " << i << ": " << describe(batch[i]) << "\n     store: " << got;
      if (got != want) {
        differs = true;
        report << "\n     model: " << want << "   <-- differs";
      }
    }
    if (differs) {
      ADD_FAILURE() << who << " round " << round << " (now " << now << "): an answer differs; the batch:" << report.str();
      return false;
    }
    if (round % 10 == 9 || round == rounds - 1) {
      const auto ids = model.job_ids();
      const auto s = store_state(*store, store_names, ids, secrets);
      const auto m = model_state(model, model_names, clock.now_ms(), ids, secrets);
      if (s != m) {
        ADD_FAILURE() << who << " after round " << round << ": the state differs:" << state_diff(s, m);
        return false;
      }
      auto audit = store->audit(std::nullopt);
      if (!audit.ok() || !audit->violations.empty()) {
        ADD_FAILURE() << who << ": the audit is not clean: "
                      << (audit.ok() ? audit->violations.front().message : audit.error().detail);
        return false;
      }
    }
  }
  // Balance notices are events of the model's movements: counted by type, so the table shows (and
  // the test requires) that each kind of notice happened and was compared.
  for (const std::string& id : model.account_ids()) {
    for (const Event& e : model.events_of(id)) {
      if (is_balance_notice(e.type)) ++table["balance_notice"][std::string(event_type_name(e.type))];
    }
  }
  if (check) check(*store);
  // Refusals are results: a batch is never split into one transaction per command, nor re-run.
  EXPECT_EQ(opened.counters().isolated_batches, 0u) << who;
  EXPECT_EQ(opened.counters().conflict_reruns, 0u) << who;
  return true;
}

// Runs one seed of random batches.
bool run_seed(const std::string& backend, const std::optional<std::string>& pg_server, std::uint64_t seed, int rounds,
              Table& table) {
  Generator gen(seed);
  std::mt19937 time_rng(static_cast<std::mt19937::result_type>(seed));
  const NextRound next = [&](const LedgerModel& model, std::int64_t now_ms, int) {
    // Time moves: holds (200 ms to 4 s), leases, claims and rate budgets run out between batches.
    const std::int64_t advance = std::uniform_int_distribution<int>(0, 900)(time_rng);
    return Round{advance, gen.batch(model, now_ms + advance)};
  };
  return run_rounds(backend, pg_server, backend + " seed " + std::to_string(seed), rounds, next, table);
}

class Differential : public ::testing::TestWithParam<std::string> {};

TEST_P(Differential, RandomBatchesOfEveryKindMatchTheModel) {
  const std::string backend = GetParam();
  std::optional<std::string> pg_server;
  if (backend == "postgres") {
    REQUIRE_POSTGRES(server);  // skipped without TOLLGATE_TEST_POSTGRES; failed if TOLLGATE_REQUIRE_POSTGRES=1
    pg_server = server;
  }
  const auto started = std::chrono::steady_clock::now();
  Table table;
  const int rounds = iterations();
  for (std::uint64_t seed : seeds()) {
    if (!run_seed(backend, pg_server, seed, rounds, table)) break;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::printf("[differential] %s: %d batches per seed, %lld ms; commands by kind and outcome:\n", backend.c_str(),
              rounds, static_cast<long long>(ms.count()));
  int total = 0;
  for (const auto& [kind, outcomes] : table) {
    int n = 0;
    std::string line;
    for (const auto& [outcome, count] : outcomes) {
      n += count;
      line += " " + outcome + "=" + std::to_string(count);
    }
    total += n;
    std::printf("[differential]   %-15s %6d:%s\n", kind.c_str(), n, line.c_str());
  }
  std::printf("[differential]   total %d commands\n", total);
  if (HasFailure()) return;
  // Every kind ran, and the refusals and paths worth comparing happened (else the generator rotted).
  for (const char* kind : {"create_account", "credit", "debit", "reserve", "commit", "release", "extend",
                           "update_account", "expire_overdue", "create_key", "revoke_key", "record_key_use",
                           "submit_job", "claim_job", "end_job", "lock", "idempotency", "rate_limit", "prune_coord",
                           "create_endpoint", "update_endpoint", "delete_endpoint", "rotate_endpoint",
                           "credit_payment", "take_back_payment", "dispute_payment", "set_price",
                           "reserve_by_feature"}) {
    EXPECT_GT(table[kind].size(), 0u) << "no " << kind << " ran";
  }
  const std::vector<std::pair<const char*, const char*>> wanted = {
      {"credit", "overflow"},          {"credit", "replay"},           {"credit", "idempotency_mismatch"},
      {"credit", "not_found"},         {"debit", "insufficient_credits"}, {"debit", "account_frozen"},
      {"reserve", "insufficient_credits"}, {"reserve", "replay"},      {"reserve", "idempotency_mismatch"},
      {"reserve", "too_many_holds"},   {"commit", "created"},          {"commit", "hold_expired"},
      {"commit", "late_charged"},      {"commit", "late_forgiven"},    {"commit", "not_found"},
      {"commit", "invalid_request"},   {"commit", "hold_released"},    {"release", "created"},
      {"extend", "created"},           {"extend", "hold_expired"},     {"update_account", "created"},
      {"create_key", "created"},       {"create_key", "conflict"},     {"revoke_key", "created"},
      {"submit_job", "created"},       {"submit_job", "replay"},       {"claim_job", "created"},
      {"claim_job", "conflict"},       {"end_job", "created"},         {"end_job", "replay"},
      {"lock", "acquired"},            {"lock", "lock_held"},          {"idempotency", "started"},
      {"idempotency", "in_progress"},  {"idempotency", "replayed"},    {"rate_limit", "allowed"},
      {"rate_limit", "limited"},
      {"create_endpoint", "ok"},       {"create_endpoint", "conflict"}, {"create_endpoint", "not_found"},
      {"update_endpoint", "ok"},       {"update_endpoint", "not_found"}, {"delete_endpoint", "deleted"},
      {"rotate_endpoint", "ok"},
      {"credit_payment", "created"},   {"credit_payment", "replay"},   {"credit_payment", "idempotency_mismatch"},
      {"credit_payment", "not_found"}, {"take_back_payment", "created"}, {"take_back_payment", "replay"},
      {"take_back_payment", "froze"},  {"take_back_payment", "forgiven"}, {"take_back_payment", "not_found"},
      {"dispute_payment", "froze"},    {"dispute_payment", "replay"},
      {"set_price", "created"},        {"set_price", "replay"},        {"reserve_by_feature", "created"},
      {"reserve_by_feature", "replay"}, {"reserve_by_feature", "idempotency_mismatch"},
      {"reserve_by_feature", "invalid_request"}, {"reserve_by_feature", "insufficient_credits"},
      {"balance_notice", "balance_low"}, {"balance_notice", "balance_depleted"},
      {"balance_notice", "balance_recovered"},
  };
  for (const auto& [kind, outcome] : wanted) {
    EXPECT_GT(table[kind][outcome], 0) << "no " << kind << " answered " << outcome << ": the generator no longer reaches it";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Differential, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ================================================================================================
// hand-picked batches: edges the random batches (at most 16 commands, small amounts) do not reach

Command reserve(const std::string& account, std::int64_t amount, const std::string& request, std::int64_t ttl_ms) {
  return ReserveCommand{account, amount, request, ttl_ms, "", "00000000000000" + std::string(2, request.back())};
}

struct HandPicked {
  std::string name;
  std::vector<Round> rounds;
  std::function<void(Store&)> check;  // after the model comparison, on the store itself (may be empty)
};

// `holds` reservations of 1 credit each on `account` (credited first), expiring after 100 ms.
Round many_holds(const std::string& account, std::int64_t holds) {
  Round round{0, {CreateAccountCommand{account, 0, std::nullopt}, CreditCommand{account, holds, account + "-many"}}};
  for (std::int64_t i = 0; i < holds; ++i) round.commands.push_back(reserve(account, 1, account + "-m" + std::to_string(i), 100));
  return round;
}

std::vector<HandPicked> hand_picked() {
  using P = LateCommitPolicy;
  const Round setup{0,
                    {CreateAccountCommand{"a0", 0, std::nullopt}, CreateAccountCommand{"a1", 0, std::nullopt},
                     CreateAccountCommand{"a2", 10, std::nullopt}, CreditCommand{"a0", 50, "a0-c0"},
                     CreditCommand{"a1", 30, "a1-c0"}, CreditCommand{"a2", 5, "a2-c0"}}};
  std::vector<HandPicked> cases;
  cases.push_back({"two refusals in one batch on an account with more overdue holds than one reaper pass expires",
                   {setup, many_holds("big", limits::kReaperBatchMaxDefault + 1),
                    {200,
                     {reserve("big", 1'000, "big-1", 60'000),  // refused, expires 1,000 overdue holds, then fits
                      reserve("big", 1, "big-2", 60'000),      // refused again: the last overdue hold goes, then fits
                      CreateAccountCommand{"big", 0, std::nullopt}}}},
                   [](Store& store) {
                     // Both fit once the overdue holds were expired: 1,000 by the first refusal's pass,
                     // the last by the second's.
                     auto big = store.get_account("big");
                     ASSERT_TRUE(big.ok());
                     EXPECT_EQ(big->balances, (Balances{0, 1'001, 0, 1'001})) << show(*big);
                     EXPECT_EQ(big->active_holds, 2);
                   }});
  cases.push_back({"balances at the edge of the largest balance (2^53 − 1)",
                   {setup,
                    {0, {CreateAccountCommand{"a3", 0, std::nullopt}, CreditCommand{"a3", limits::kBalanceMax, "a3-max"}}},
                    {10,
                     {CreditCommand{"a3", 1, "a3-over"}, reserve("a3", kMax, "a3-r1", 100), reserve("a3", kMax, "a3-r2", 100),
                      DebitCommand{"a3", kMax, "a3-d1", ""}, CreditCommand{"a3", kMax, "a3-over2"},
                      CreateAccountCommand{"a3", 0, std::nullopt}}},
                    {200, {CommitCommand{"@a3-r1", std::nullopt, P::charge}, CreditCommand{"a3", 1, "a3-c1"},
                           ExpireOverdueCommand{10}}}},
                   {}});
  cases.push_back({"late commits under each policy and reaper passes in one batch",
                   {setup,
                    {0, {reserve("a0", 10, "l1", 100), reserve("a0", 20, "l2", 100), reserve("a1", 15, "l4", 100),
                         reserve("a0", 5, "l3", 100), DebitCommand{"a1", 1, "a1-d0", ""}}},
                    {200,
                     {ExpireOverdueCommand{1'000}, CommitCommand{"@l1", 5, P::charge}, CommitCommand{"@l2", 5, P::forgive},
                      CommitCommand{"@l3", 5, P::reject}, CommitCommand{"@l1", 5, P::reject},
                      CommitCommand{"@l2", 7, P::charge}, CommitCommand{"@l4", std::nullopt, P::charge},
                      ReleaseCommand{"@l1"}, ReleaseCommand{"@l3"}, ExpireOverdueCommand{1'000}}}},
                   {}});
  // Refused commands between successful ones on one account change nothing — no event, no row,
  // their reference or request_id not taken — and every other one is applied; checked against the
  // model and against figures computed by hand.
  const Round refusals_setup{0,
                             {CreateAccountCommand{"a0", 0, 5}, CreateAccountCommand{"a1", 0, std::nullopt},
                              CreditCommand{"a0", 100, "mid-c0"}, CreditCommand{"a1", 5, "other-c"},
                              reserve("a0", 10, "mid-r0", 60'000), reserve("a0", 5, "mid-r1", 60'000)}};
  // (A hold reference names a hold made in an earlier round: references are resolved before a batch.)
  const Round release_r1{0, {ReleaseCommand{"@mid-r1"}}};
  cases.push_back(
      {"refusals in the middle of a batch change nothing and the commands around them are all applied",
       {refusals_setup, release_r1,
        {10,
         {CreditCommand{"a0", 20, "mid-c1"},
          DebitCommand{"a0", 1'000, "mid-d1", "x"},  // insufficient_credits
          reserve("a0", 30, "mid-r2", 60'000),
          CommitCommand{"@nobody", std::nullopt, P::charge},  // not_found
          reserve("a0", 11, "mid-r0", 60'000),               // idempotency_mismatch
          CreditCommand{"a0", 7, "other-c"},                 // idempotency_mismatch
          CommitCommand{"@mid-r1", std::nullopt, P::charge},  // hold_released
          DebitCommand{"a0", 15, "mid-d2", ""},
          reserve("a0", 5'000, "mid-r3", 60'000),  // insufficient_credits
          CommitCommand{"@mid-r0", 4, P::charge},
          CommitCommand{"@mid-r0", 5, P::charge},  // hold_committed
          ReleaseCommand{"@mid-r0"},               // hold_committed
          ExtendCommand{"@mid-r1", 1'000},         // hold_released
          reserve("a0", 2, "mid-r4", 60'000),
          reserve("ghost", 1, "mid-r5", 60'000),  // not_found
          CreditCommand{"ghost", 1, "mid-c9"},    // not_found
          CreateAccountCommand{"a0", 5, 5},       // conflict
          reserve("a0", 1, "mid-r6", 60'000),
          CommitCommand{"@mid-r0", 100, P::charge},  // invalid_request
          reserve("a0", 1, "mid-r7", 60'000),
          CreditCommand{"a0", 3, "mid-c10"},
          DebitCommand{"a0", 1, "mid-d1", "x"},  // the refused debit's reference was not taken
          reserve("a0", 1, "mid-r3", 60'000),   // nor the refused reservation's request_id
          reserve("a0", 1, "mid-r8", 60'000),   // too_many_holds: 5 active holds, the most allowed
          DebitCommand{"a0", 500, "mid-d3", ""},  // insufficient_credits
          CreateKeyCommand{"k-mid", std::string("ghost"), std::string(64, 'a')},  // not_found
          RevokeKeyCommand{"k-none"},                                            // not_found
          reserve("a0", 30, "mid-r2", 60'000),  // a replay
          CreditCommand{"a0", 20, "mid-c1"},    // a replay
          ExpireOverdueCommand{10}}}},          // nothing is overdue
       [](Store& store) {
         // By hand: 100 − 10 (r0) + 20 − 30 − 15 + 6 (r0 commits 4 of 10) − 2 − 1 − 1 + 3 − 1 − 1.
         auto mid = store.get_account("a0");
         ASSERT_TRUE(mid.ok());
         EXPECT_EQ(mid->balances, (Balances{68, 35, 4, 107})) << show(*mid);
         EXPECT_EQ(mid->active_holds, 5);
         auto events = store.read_events("a0", 0, limits::kEventsPageMax);
         ASSERT_TRUE(events.ok());
         std::vector<std::string> types;
         for (const Event& e : events->events) types.push_back(std::string(event_type_name(e.type)) + " " + std::to_string(e.amount));
         const std::vector<std::string> expected = {
             "credited 100", "reserved 10", "reserved 5", "released 5",                               // setup
             "credited 20", "reserved 30", "debited 15", "committed 4", "reserved 2", "reserved 1",  // the batch
             "reserved 1", "credited 3", "debited 1", "reserved 1"};
         EXPECT_EQ(types, expected);
       }});
  return cases;
}

class DifferentialHandPicked : public ::testing::TestWithParam<std::string> {};

TEST_P(DifferentialHandPicked, CasesMatchTheModel) {
  const std::string backend = GetParam();
  std::optional<std::string> pg_server;
  if (backend == "postgres") {
    REQUIRE_POSTGRES(server);
    pg_server = server;
  }
  Table table;
  for (const HandPicked& c : hand_picked()) {
    const NextRound next = [&](const LedgerModel&, std::int64_t, int round) {
      return c.rounds.at(static_cast<std::size_t>(round));
    };
    run_rounds(backend, pg_server, backend + " hand-picked '" + c.name + "'", static_cast<int>(c.rounds.size()), next,
               table, c.check);
  }
  // The edges the cases exist for were reached (not refused earlier for another reason).
  EXPECT_GT(table["reserve"]["insufficient_credits"], 0);
  EXPECT_GT(table["reserve"]["too_many_holds"], 0);
  EXPECT_GT(table["credit"]["overflow"], 0);
  EXPECT_GT(table["commit"]["late_forgiven"], 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, DifferentialHandPicked, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tollgate
