// tollgate refunds: the refund slice of a write batch (core/batch.h's seam) — giving back credits a
// charged hold took (api.md "Refunds of a charge"): the command, the rows it names, what it
// decides, what it writes. Pure: no I/O, no clock, no threads.
//
// The money moves through the ledger's part (batch::LedgerBatch::refund_hold: used → available, the
// hold's refunded_amount, a `refunded` event; the rules in core/rules.h plan_refund), so a refund
// can never give back more than its hold charged, whoever asks and however often. This slice keeps
// what makes a refund idempotent: one row per refund request_id (its hold, the amount it gave back,
// the amount it asked for), so the same request again moves nothing and answers the hold as it is.
//
// Keys: the refund's request_id, and in the ledger's keys its hold (add_hold_key: the hold's account
// is locked for the batch, so two refunds of one hold are decided one after the other). On
// PostgreSQL the loader also takes a transaction-scoped advisory lock per request_id (after the
// accounts, in request_id order): two refunds under one request_id of two holds on two instances
// then cannot both find it unused. Effects: new refund rows (a refund row never changes). The
// dialects' loaders and writers: store/sqlite/sqlite_refunds.h, store/postgres/pg_refunds.h.
//
// Thread safety: plain values; a RefundState is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/result.h"
#include "core/validate.h"

namespace tollgate::refunds {

// --- the command ----------------------------------------------------------------------------------

// Gives back `amount` (unset: everything the hold charged and has not given back) of a charged hold
// (committed, or late-charged). The same request_id again answers the hold as it is now and moves
// nothing (created=false); with another hold or another amount, idempotency_mismatch. Refusals:
// not_found (no such hold), conflict (not charged; or a hold a slice owns, asked for through the
// holds API), refund_exceeds_charge.
struct RefundCommand {
  std::string hold_id;
  // Set when a slice's row refunds the hold it owns (a job: "job:<client_request_id>"): the hold must
  // have that request_id. Unset: a hold of the holds API.
  std::optional<std::string> owner_request_id;
  std::optional<std::int64_t> amount;
  std::string reason;      // why (required): kept on the refund and its `refunded` event
  std::string request_id;  // unique over all refunds, ever
};

// One refund as recorded: the row behind the idempotency of its request_id.
struct Refund {
  std::string request_id;
  std::string hold_id;
  std::string account_id;
  std::int64_t amount = 0;                        // given back
  std::optional<std::int64_t> requested_amount;  // as asked (unset: everything left)
  std::string reason;
  std::int64_t created_at_ms = 0;

  friend bool operator==(const Refund&, const Refund&) = default;
};

struct RefundOutcome {
  Hold hold;             // the hold as it is now (refunded_amount: everything given back so far)
  Refund refund;         // this request's refund (the original one on a replay)
  bool created = false;  // false: a replay of an earlier refund; nothing moved
};

// --- the rows -------------------------------------------------------------------------------------

struct RefundKeys {
  std::vector<std::string> request_ids;  // sorted, unique once finished
};

struct RefundSnapshot {
  std::vector<Refund> refunds;  // of RefundKeys::request_ids that exist
};

struct RefundEffects {
  std::vector<Refund> new_refunds;  // by request_id
  bool empty() const { return new_refunds.empty(); }
};

// The refunds of a batch in memory.
class RefundState {
 public:
  RefundState(RefundSnapshot snapshot, std::int64_t now_ms);

  Result<RefundOutcome> refund(const RefundCommand& c, batch::LedgerBatch& ledger);

  RefundEffects effects() &&;

 private:
  struct Slot {
    bool loaded = false;  // as loaded (true), or made by this batch
    Refund now;
  };
  std::int64_t now_ms_;
  std::map<std::string, Slot> refunds_;
};

// --- the slice (core/batch.h's seam) --------------------------------------------------------------
struct RefundSlice {
  using Commands = std::tuple<RefundCommand>;
  using Outcomes = std::tuple<RefundOutcome>;
  using Keys = RefundKeys;
  using Snapshot = RefundSnapshot;
  using Effects = RefundEffects;
  using State = RefundState;

  static void finish(RefundKeys& k);
  static void add_keys(const RefundCommand& c, RefundKeys& k, batch::LedgerKeys& ledger);
  static Result<RefundOutcome> decide(const RefundCommand& c, RefundState& s, batch::LedgerBatch& ledger) {
    return s.refund(c, ledger);
  }
  static Status validate(const RefundCommand& c, const ValidationLimits& limits);
};

}  // namespace tollgate::refunds
