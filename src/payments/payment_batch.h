// tollgate payments: the payment slice of a write batch (core/batch.h's seam) — credits from a
// payment provider's events (api.md "Payments"): the commands, the rows they name, what they decide,
// what they write. Pure: no I/O, no clock, no threads. The HTTP edge (http/routes_payments.cc)
// checks the provider's signature and turns its event into one of these commands.
//
// The money moves through the ledger's part: a payment's credit is LedgerBatch::credit under the
// payment's id as its reference (so the same payment credits once, however often and by however many
// instances its events arrive); a refund takes back by LedgerBatch::take_back (its shortfall policy:
// into debt and frozen, or only what is there); a dispute freezes by LedgerBatch::freeze. This slice
// keeps what makes them exact: one row per payment (its account, its credits, what its refunds owed
// and took back), and one row per refund or dispute event of the provider's (so the same event again
// moves nothing).
//
// Keys: the payment ids and the provider events' references; in the ledger's keys the payment's
// account (every command names it: the edge reads the payment first, and a payment's account never
// changes) and the transfer's reference. On PostgreSQL the loader also takes a transaction-scoped
// advisory lock per payment id and reference (after the accounts, in order), as the refund slice
// does for its insert-only rows. Effects: new and changed payments, new payment events. The
// dialects' loaders and writers: store/sqlite/sqlite_payments.h, store/postgres/pg_payments.h.
//
// Thread safety: plain values; a PaymentState is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/result.h"
#include "core/validate.h"

namespace tollgate::payments {

enum class Provider : std::uint8_t { stripe, webhook };
std::string_view provider_name(Provider p);  // "stripe", "webhook"
std::optional<Provider> parse_provider(std::string_view name);

enum class EventKind : std::uint8_t { refund, dispute };
std::string_view event_kind_name(EventKind k);  // "refund", "dispute"
std::optional<EventKind> parse_event_kind(std::string_view name);

// --- the rows -------------------------------------------------------------------------------------

// A payment a provider told of, credited once.
struct Payment {
  std::string payment_id;  // its credit's reference: "stripe:{checkout session id}", "payment:{payment_id}"
  Provider provider = Provider::stripe;
  std::optional<std::string> provider_payment;  // Stripe: the session's payment_intent (refunds name it)
  std::string account_id;
  std::int64_t credits = 0;           // credited
  std::int64_t refunded_credits = 0;  // owed back by the provider's refunds so far (≤ credits)
  std::int64_t taken_back = 0;        // taken back of that (≤ refunded_credits; less: forgiven)
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;

  friend bool operator==(const Payment&, const Payment&) = default;
};

// One refund or dispute of a payment, as the provider's event named it: applied once.
struct PaymentEvent {
  std::string reference;  // "stripe:{charge}:refunded:{amount_refunded}", "stripe:{dispute}", "payment:{id}:refund:{webhook-id}"
  std::string payment_id;
  EventKind kind = EventKind::refund;
  std::int64_t owed = 0;   // credits this refund owed back (0: a dispute, or nothing more to owe)
  std::int64_t taken = 0;  // taken back of them
  std::int64_t at_ms = 0;

  friend bool operator==(const PaymentEvent&, const PaymentEvent&) = default;
};

// --- the commands ---------------------------------------------------------------------------------

// Credits `credits` to the account once per payment_id: the same payment again answers it as it is
// and moves nothing (created=false), even with other credits (a pack changed before a redelivery:
// it was credited as it was then); with another account or provider, idempotency_mismatch.
// Refusal: not_found (no such account: the provider retries; create the account meanwhile).
struct CreditPaymentCommand {
  std::string payment_id;
  Provider provider = Provider::stripe;
  std::optional<std::string> provider_payment;
  std::string account_id;
  std::int64_t credits = 0;
  LotTerms lot;  // the lot its credit makes (core/lots.h)
};

// A share of a payment refunded, as Stripe counts it: `refunded` of `total` (the charge's
// amount_refunded so far, and its amount, in the currency's smallest unit).
struct RefundShare {
  std::int64_t refunded = 0;
  std::int64_t total = 0;
};

// Takes back what a refund at the provider owes, once per reference. Exactly one of:
//   share:   the payment's credits × refunded / total, rounded up, less what earlier refunds owed
//            (Stripe: amount_refunded is cumulative, so events in any order owe the right sum);
//   credits: this many more, at most what is not yet owed back (a provider that counts credits).
// `into_debt` is the shortfall policy (config's refund_shortfall): true takes all of it, into debt
// and frozen if it must; false only what is available. Refusals: not_found (no such payment on that
// account), idempotency_mismatch (the reference names another payment or kind).
struct TakeBackPaymentCommand {
  std::string payment_id;
  std::string account_id;  // the payment's (the edge read it)
  std::string reference;
  std::optional<RefundShare> share;
  std::optional<std::int64_t> credits;
  bool into_debt = true;
};

// Freezes the payment's account (kFrozenForDispute), once per reference.
struct DisputePaymentCommand {
  std::string payment_id;
  std::string account_id;
  std::string reference;
};

struct PaymentOutcome {
  Payment payment;          // as it is now
  Account account;          // as readers see it now
  std::int64_t moved = 0;   // credited (a credit) or taken back (a refund) by this command
  std::int64_t owed = 0;    // a refund: what it owed back (moved < owed: the rest forgiven)
  bool created = false;     // false: the same provider event again; nothing moved
  bool froze = false;       // this froze the account (a shortfall into debt, a dispute)
};

// --- the batch's rows -----------------------------------------------------------------------------

struct PaymentKeys {
  std::vector<std::string> payment_ids;  // sorted, unique once finished
  std::vector<std::string> references;   // of payment events; sorted, unique once finished
};

struct PaymentSnapshot {
  std::vector<Payment> payments;    // of PaymentKeys::payment_ids that exist
  std::vector<PaymentEvent> events;  // of PaymentKeys::references that exist
};

struct PaymentEffects {
  std::vector<Payment> new_payments;                     // by payment_id
  std::vector<batch::Change<Payment>> changed_payments;  // by payment_id
  std::vector<PaymentEvent> new_events;                  // by reference
  bool empty() const { return new_payments.empty() && changed_payments.empty() && new_events.empty(); }
};

// The payments of a batch in memory.
class PaymentState {
 public:
  PaymentState(PaymentSnapshot snapshot, std::int64_t now_ms);

  Result<PaymentOutcome> credit(const CreditPaymentCommand& c, batch::LedgerBatch& ledger);
  Result<PaymentOutcome> take_back(const TakeBackPaymentCommand& c, batch::LedgerBatch& ledger);
  Result<PaymentOutcome> dispute(const DisputePaymentCommand& c, batch::LedgerBatch& ledger);

  PaymentEffects effects() &&;

 private:
  struct PaymentSlot {
    std::optional<Payment> loaded;  // as loaded; unset: made by this batch
    Payment now;
  };
  // The payment the command names, on its account; not_found otherwise.
  Result<PaymentSlot*> payment_of(std::string_view payment_id, std::string_view account_id);
  // The event already applied under `reference` (nullptr: none); idempotency_mismatch when it was
  // another payment's or another kind's.
  Result<const PaymentEvent*> earlier_event(std::string_view reference, std::string_view payment_id, EventKind kind);
  PaymentOutcome replay(const Payment& p, batch::LedgerBatch& ledger);

  std::int64_t now_ms_;
  std::map<std::string, PaymentSlot, std::less<>> payments_;
  std::map<std::string, std::pair<bool, PaymentEvent>, std::less<>> events_;  // (loaded, row)
};

// What a refund of `share` owes of a payment of `credits` credits whose refunds owed
// `already_owed` so far: ceil(credits × refunded / total) − already_owed, at least 0.
std::int64_t owed_by_share(std::int64_t credits, std::int64_t already_owed, RefundShare share);

// --- the slice (core/batch.h's seam) --------------------------------------------------------------
struct PaymentSlice {
  using Commands = std::tuple<CreditPaymentCommand, TakeBackPaymentCommand, DisputePaymentCommand>;
  using Outcomes = std::tuple<PaymentOutcome>;
  using Keys = PaymentKeys;
  using Snapshot = PaymentSnapshot;
  using Effects = PaymentEffects;
  using State = PaymentState;

  static void finish(PaymentKeys& k);
  static void add_keys(const CreditPaymentCommand& c, PaymentKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const TakeBackPaymentCommand& c, PaymentKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const DisputePaymentCommand& c, PaymentKeys& k, batch::LedgerKeys& ledger);
  static Result<PaymentOutcome> decide(const CreditPaymentCommand& c, PaymentState& s, batch::LedgerBatch& l) {
    return s.credit(c, l);
  }
  static Result<PaymentOutcome> decide(const TakeBackPaymentCommand& c, PaymentState& s, batch::LedgerBatch& l) {
    return s.take_back(c, l);
  }
  static Result<PaymentOutcome> decide(const DisputePaymentCommand& c, PaymentState& s, batch::LedgerBatch& l) {
    return s.dispute(c, l);
  }
  static Status validate(const CreditPaymentCommand& c, const ValidationLimits& limits);
  static Status validate(const TakeBackPaymentCommand& c, const ValidationLimits& limits);
  static Status validate(const DisputePaymentCommand& c, const ValidationLimits& limits);
};

}  // namespace tollgate::payments
