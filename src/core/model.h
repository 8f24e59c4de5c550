// tollgate core: the ledger's nouns — accounts, holds, events — as plain values.
//
// These types carry no behaviour beyond naming; the rules that change them are in rules.h.
// Times are milliseconds since the Unix epoch (UTC). Amounts and balances are int64 credits.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/scopes.h"

namespace tollgate {

// The balances of an account. Invariant: available + reserved + used + expired == purchased.
struct Balances {
  std::int64_t available = 0;
  std::int64_t reserved = 0;
  std::int64_t used = 0;
  std::int64_t purchased = 0;  // credits minus debits
  // Credits whose lot ran out unspent (core/lots.h); never negative.
  std::int64_t expired = 0;

  friend bool operator==(const Balances&, const Balances&) = default;
};

// What an account's owner may change (PATCH), as one value: an account_updated event carries the
// settings after the change.
struct AccountSettings {
  std::int64_t overdraft_limit = 0;
  std::optional<std::int64_t> max_active_holds;  // unset: no limit
  bool frozen = false;
  std::optional<std::int64_t> low_balance_threshold;  // unset: no balance notices (rules::balance_notices)

  friend bool operator==(const AccountSettings&, const AccountSettings&) = default;
};

// The reasons an account is frozen by tollgate itself (payments/): a provider's refund took back
// credits that were no longer there (available went below 0, past the overdraft if it had to: the
// account is in debt and stays frozen until a credit brings available back to 0 or above), and a
// disputed payment (frozen until an admin unfreezes it).
inline constexpr std::string_view kFrozenForRefundShortfall = "refund shortfall";
inline constexpr std::string_view kFrozenForDispute = "payment disputed";
// The reason on the account_updated event of the credit that repaid a refund shortfall.
inline constexpr std::string_view kUnfrozenRepaid = "refund shortfall repaid";

struct Account {
  std::string account_id;
  Balances balances;
  std::int64_t overdraft_limit = 0;                 // available ≥ −overdraft_limit
  std::optional<std::int64_t> max_active_holds;     // unset: no limit
  // A frozen account refuses new holds and debits (account_frozen); its existing holds still
  // commit, release, extend and expire, and credits still land.
  bool frozen = false;
  // Why, when the freeze was not an admin's (PATCH): kFrozenForRefundShortfall (lifted by the
  // credit that brings available back to 0 or above), kFrozenForDispute. Unset when not frozen.
  std::optional<std::string> frozen_reason;
  // Balance notices (rules::balance_notices): written when `available` crosses it; unset: none.
  std::optional<std::int64_t> low_balance_threshold;
  std::int64_t active_holds = 0;                    // holds in state active
  std::optional<std::int64_t> oldest_active_hold_age_ms;  // unset when there is no active hold
  std::int64_t created_at_ms = 0;

  AccountSettings settings() const {
    return AccountSettings{overdraft_limit, max_active_holds, frozen, low_balance_threshold};
  }

  friend bool operator==(const Account&, const Account&) = default;
};

enum class HoldStatus : std::uint8_t { active, committed, released, expired };

// What happened to a commit that arrived after the hold expired (the late-commit policy's answer).
enum class LateOutcome : std::uint8_t { none, charged, forgiven };

enum class LateCommitPolicy : std::uint8_t { charge, forgive, reject };

// --- credit lots (core/lots.h: the rules) ------------------------------------------------------
enum class LotCategory : std::uint8_t { paid, promotional };

// What a credit says of the lot it makes.
struct LotTerms {
  std::optional<std::int64_t> expires_at_ms;  // unset: never
  std::int64_t priority = 50;                 // 0..100, lower is spent first
  LotCategory category = LotCategory::paid;

  friend bool operator==(const LotTerms&, const LotTerms&) = default;
};

// A credit's credits, spent in order (core/lots.h). Invariant: available + reserved + used +
// expired == amount, each ≥ 0. A debit lowers amount (credits taken back were never spent).
struct Lot {
  std::int64_t seq = 0;  // its id is "lot_" + seq (lot_id()); creation order
  std::string account_id;
  std::optional<std::string> reference;  // the credit's; unset for the lot an upgrade made
  LotTerms terms;
  std::int64_t amount = 0;
  std::int64_t available = 0;
  std::int64_t reserved = 0;
  std::int64_t used = 0;
  std::int64_t expired = 0;
  std::int64_t created_at_ms = 0;

  friend bool operator==(const Lot&, const Lot&) = default;
};

// A lot that can still be spent or still has credits out (available or reserved): the batch loads an
// account's live lots. The stores keep it as a column (`live`) so that their indexes never name the
// balances a spend changes.
inline bool lot_is_live(const Lot& lot) { return lot.available > 0 || lot.reserved > 0; }

// What a hold (or a late charge) took from one credit lot. A lot's id is "lot_" + seq.
struct LotDraw {
  std::int64_t lot_seq = 0;
  std::int64_t amount = 0;  // ≥ 1

  friend bool operator==(const LotDraw&, const LotDraw&) = default;
};

struct Hold {
  std::string hold_id;
  std::string account_id;
  std::string request_id;
  std::int64_t amount = 0;            // reserved when the hold was made
  std::int64_t committed_amount = 0;  // moved to used (committed, or late-charged)
  // Given back since (refunds: used → available), never more than committed_amount.
  std::int64_t refunded_amount = 0;
  HoldStatus status = HoldStatus::active;
  LateOutcome late_outcome = LateOutcome::none;
  std::int64_t created_at_ms = 0;
  std::int64_t expires_at_ms = 0;
  std::optional<std::int64_t> closed_at_ms;  // set when the hold left `active`
  std::string metadata_json = "{}";         // a JSON object, stored as given
  // The reason given when the hold was released (only a released hold has one; optional there).
  std::optional<std::string> release_reason;
  // The lots it drew from, in spending order (core/lots.h); their sum ≤ amount: the rest came from
  // no lot (the account's base: an overdraft, or a hold made before lots existed).
  std::vector<LotDraw> lots;

  friend bool operator==(const Hold&, const Hold&) = default;
};

enum class EventType : std::uint8_t {
  credited,
  debited,
  reserved,
  committed,
  released,
  expired,
  late_charged,
  late_forgiven,
  account_updated,  // amount 0, balances unchanged; carries the account's settings after the change
  extended,         // amount 0, balances unchanged: an active hold's deadline was pushed back (to expires_at_ms)
  // Balance notices (rules::balance_notices): amount 0, the balances after the movement that crossed
  // the account's low_balance_threshold, written right after that movement's event.
  balance_low,        // available fell from ≥ threshold to < threshold
  balance_depleted,   // available fell from > 0 to ≤ 0
  balance_recovered,  // available rose from < threshold to ≥ threshold
  refunded,           // a charged hold gave `amount` back: used → available (purchased unchanged)
  lot_expired,        // a lot's unspent available credits reached its expires_at: available → expired
};
// The last event type: every type is 0..kLastEventType (for lists of every name).
inline constexpr EventType kLastEventType = EventType::lot_expired;
// A balance notice (no hold, no amount, no balance moved).
inline bool is_balance_notice(EventType type) {
  return type == EventType::balance_low || type == EventType::balance_depleted || type == EventType::balance_recovered;
}

struct Event {
  std::int64_t event_id = 0;  // strictly increasing with commit order
  std::string account_id;
  EventType type = EventType::credited;
  std::int64_t amount = 0;
  std::optional<std::string> hold_id;
  std::optional<std::string> job_id;  // an owned hold's owning row (core/hold_id.h): the events API's field
  std::optional<std::string> reference;
  std::optional<std::string> reason;  // a debit's reason; a release's reason, when one was given
  std::optional<AccountSettings> settings;  // account_updated only: the settings after the change
  // extended only: the hold's new deadline (unset on extended events written before it was recorded)
  std::optional<std::int64_t> expires_at_ms;
  // credited (the lot it made; unset when it only paid debt) and lot_expired: the lot's seq.
  std::optional<std::int64_t> lot_seq;
  std::int64_t at_ms = 0;
  std::int64_t available_after = 0;
  std::int64_t reserved_after = 0;
  std::int64_t used_after = 0;
  std::int64_t expired_after = 0;

  friend bool operator==(const Event&, const Event&) = default;
};

// A credit or debit recorded under its reference (unique over all credits and debits, ever), with
// the event it wrote.
struct Transfer {
  std::string reference;
  std::string account_id;
  EventType kind = EventType::credited;  // credited | debited
  std::int64_t amount = 0;
  std::string reason;
  std::int64_t event_id = 0;

  friend bool operator==(const Transfer&, const Transfer&) = default;
};

// An API key. The secret is never stored: only its SHA-256 (hex). An admin key has no account_id;
// an account key may only touch its own account, and only within its scopes (core/scopes.h).
struct ApiKey {
  std::string key_id;
  std::optional<std::string> account_id;  // unset: an admin key
  std::string secret_sha256;              // hex
  std::int64_t created_at_ms = 0;
  std::optional<std::int64_t> revoked_at_ms;
  // When the key last authenticated a request, as recorded so far (ledger/key_use.h: written at
  // most once per key per interval, so it may lag the last use by that much); unset: never.
  std::optional<std::int64_t> last_used_at_ms;
  // What it may do (keys made before scopes existed: default_scopes() of their kind).
  ScopeSet scopes = kAccountKeyScopes;
  // From then on it authenticates nothing (401), by the database's clock; unset: never.
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> name;  // the operator's label ("kiosk 3 screen"), 1..kKeyNameBytesMax

  friend bool operator==(const ApiKey&, const ApiKey&) = default;
};

// The id of the admin key a first start generates when none is configured (keys made through the
// API are "key_" + hex: never this). It cannot be revoked through the API; a configured admin key
// retires it.
inline constexpr std::string_view kGeneratedAdminKeyId = "admin";

// A key looked up by its secret's hash (or none), and the time of the read that found it: the
// database's clock on PostgreSQL (the one clock every instance shares), against which expires_at_ms
// is compared on every instance alike.
struct KeyLookup {
  std::optional<ApiKey> key;
  std::int64_t now_ms = 0;
};

// Readable forms, for logs and test failures ({available=… reserved=…}, {hold_… active 3 …}).
std::ostream& operator<<(std::ostream& out, const Balances& balances);
std::ostream& operator<<(std::ostream& out, const Account& account);
std::ostream& operator<<(std::ostream& out, const Hold& hold);
std::ostream& operator<<(std::ostream& out, const Event& event);

std::string_view hold_status_name(HoldStatus status);
std::optional<HoldStatus> parse_hold_status(std::string_view name);
std::string_view late_outcome_name(LateOutcome outcome);  // "" for none
std::optional<LateOutcome> parse_late_outcome(std::string_view name);
std::string_view late_commit_policy_name(LateCommitPolicy policy);
std::optional<LateCommitPolicy> parse_late_commit_policy(std::string_view name);
std::string_view event_type_name(EventType type);
std::string_view lot_category_name(LotCategory category);
std::optional<LotCategory> parse_lot_category(std::string_view name);
// "lot_" + seq, and back (nullopt: not a lot id).
std::string lot_id(std::int64_t seq);
std::optional<std::int64_t> parse_lot_id(std::string_view id);
std::optional<EventType> parse_event_type(std::string_view name);

}  // namespace tollgate
