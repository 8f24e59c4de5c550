// tollgate webhooks: the webhook slice of a write batch (core/batch.h's seam) — the commands that
// register, change, delete and re-key webhook endpoints, the rows they name, what they decide, what
// they write. Pure: no I/O, no clock, no threads, no randomness (a new endpoint's id and every new
// secret are filled in by the ledger before the command is queued: WebhookSlice::complete).
//
// Keys: the endpoints named (a create names its new id, so that a collision of random ids is a
// conflict, never an overwrite); a create also asks for the number of endpoints (the limit,
// limits::kWebhookEndpointsMax) and names its filter's account in the ledger's keys, so that the
// batch sees it as the commands before left it (LedgerBatch::account_exists). No account or hold
// is changed. On PostgreSQL the named rows are loaded FOR
// UPDATE and a batch that counts takes the endpoints' advisory lock first, so two instances cannot
// both pass the limit. Effects: each changed endpoint once, with the row it replaces (the writes
// are guarded by it). The dialects' loaders and writers: store/sqlite/sqlite_webhooks.h,
// store/postgres/pg_webhooks.h.
//
// Thread safety: plain values; a WebhookState is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/result.h"
#include "core/validate.h"
#include "webhooks/webhook.h"

namespace tollgate::webhooks {

// --- the commands ---------------------------------------------------------------------------------

// Registers an endpoint, enabled, with a new secret. Refused: an account_id that names no account
// (not_found), limits::kWebhookEndpointsMax endpoints already (invalid_request).
struct CreateEndpointCommand {
  std::string url;
  std::vector<std::string> event_types;  // empty: every type
  std::optional<std::string> account_id;
  std::string description;
  std::string endpoint_id;  // set by the ledger (complete)
  std::string secret;       // set by the ledger (complete)
};

// Changes what is set; the rest stays. Refused: no such endpoint (not_found).
struct UpdateEndpointCommand {
  std::string endpoint_id;
  std::optional<std::string> url;
  std::optional<std::vector<std::string>> event_types;  // set and empty: every type
  std::optional<std::string> description;
  std::optional<EndpointStatus> status;
};

// Forgets an endpoint (its row is deleted). Refused: no such endpoint (not_found).
struct DeleteEndpointCommand {
  std::string endpoint_id;
};

// A new secret; the one it replaces keeps signing beside it for limits::kWebhookPreviousSecretMs (a
// secret older than that is dropped: at most two sign). Refused: no such endpoint (not_found).
struct RotateEndpointSecretCommand {
  std::string endpoint_id;
  std::string secret;  // set by the ledger (complete)
};

// Sends every matching event after `after` again: the endpoint's delivery cursor moves back to
// `after` (never forward: an event not yet sent is never skipped). Each event is then sent as if for
// the first time (a new run of the retry schedule), with its webhook-id unchanged. Refused: no such
// endpoint (not_found).
struct ReplayEndpointCommand {
  std::string endpoint_id;
  std::int64_t after = 0;  // a feed cursor (an event_id, or 0 for the whole feed)
};

struct EndpointOutcome {  // every kind: the endpoint as it is now (as it was, for a delete)
  Endpoint endpoint;
  bool deleted = false;
};

// What a round of deliveries to one endpoint saw (delivery_worker.h), recorded by the deliverer that
// holds the delivery lock with `fence`; and, when cursor_from is set, the endpoint's cursor moved from
// it to cursor_to (every matching event in between is among `attempts`). Each attempt updates its
// event's delivery: a fresh send (retry_of_attempts unset: the cursor passed the event, first or
// replayed) starts a run of the schedule — attempts 1; a retry of a pending delivery counts one more
// attempt, and is skipped (not recorded) when the delivery is no longer pending with
// retry_of_attempts attempts (it was delivered, replayed or recorded meanwhile). A failed attempt
// schedules the next one (next_attempt_at_ms with its jitter) or, the schedule used up, fails the
// delivery. The endpoint's failing_since_ms follows the attempts in order; failing for
// limits::kWebhookDisableAfterFailingMs disables it.
// Refused, nothing written: no such endpoint (not_found: deleted meanwhile); a fence older than the
// endpoint's (lock_lost: another deliverer took over); a cursor_from that is not the endpoint's
// cursor (conflict: a replay or another deliverer moved it).
struct RecordDeliveriesCommand {
  std::string endpoint_id;
  std::int64_t fence = 0;
  std::optional<std::int64_t> cursor_from;  // set: move the cursor from here …
  std::int64_t cursor_to = 0;               // … to here (> cursor_from)
  std::vector<DeliveryAttempt> attempts;    // each event at most once
};

struct DeliveriesOutcome {
  Endpoint endpoint;           // as it is now
  std::int64_t recorded = 0;   // attempts recorded (retries skipped as stale are not)
  std::int64_t failed = 0;     // deliveries that failed for good in this record
  bool disabled = false;       // this record disabled the endpoint (failing too long)
};

// --- the rows -------------------------------------------------------------------------------------

using DeliveryKey = std::pair<std::string, std::int64_t>;  // (endpoint_id, event_id)

struct WebhookKeys {
  std::vector<std::string> ids;  // endpoints named; sorted, unique once finished
  bool count = false;            // a create: the number of endpoints and the feed's head are needed
  std::vector<DeliveryKey> deliveries;  // sorted, unique once finished

  bool empty() const { return ids.empty() && !count && deliveries.empty(); }
};

struct WebhookSnapshot {
  std::vector<Endpoint> endpoints;  // of WebhookKeys::ids that exist
  std::int64_t count = 0;           // every endpoint (when WebhookKeys::count)
  std::int64_t feed_head = 0;       // the largest event_id committed (when WebhookKeys::count)
  std::vector<Delivery> deliveries;  // of WebhookKeys::deliveries that exist
};

struct EndpointChange {
  std::optional<Endpoint> before;  // unset: a new row
  std::optional<Endpoint> after;   // unset: the row is deleted
};

struct DeliveryChange {
  std::optional<Delivery> before;  // unset: a new row
  Delivery after;
};

// A deleted endpoint's deliveries are deleted with it (by the writer).
struct WebhookEffects {
  // By endpoint_id, each once — but an endpoint deleted and made again under its id is two changes
  // (the old row deleted, then the new one inserted).
  std::vector<EndpointChange> endpoints;
  std::vector<DeliveryChange> deliveries;  // by (endpoint_id, event_id), each once

  bool empty() const { return endpoints.empty() && deliveries.empty(); }
};

// The endpoints of a batch in memory.
class WebhookState {
 public:
  WebhookState(WebhookSnapshot snapshot, std::int64_t now_ms);

  // `account_exists`: the account filter names an account (or there is none).
  Result<EndpointOutcome> create(const CreateEndpointCommand& c, bool account_exists);
  Result<EndpointOutcome> update(const UpdateEndpointCommand& c);
  Result<EndpointOutcome> remove(const DeleteEndpointCommand& c);
  Result<EndpointOutcome> rotate(const RotateEndpointSecretCommand& c);
  Result<EndpointOutcome> replay(const ReplayEndpointCommand& c);
  Result<DeliveriesOutcome> record(const RecordDeliveriesCommand& c);

  WebhookEffects effects() &&;

 private:
  template <typename Row>
  struct Slot {
    std::optional<Row> before;  // as loaded (unset: no row)
    std::optional<Row> now;     // as the batch left it (unset: none, or deleted)
    bool removed = false;       // deleted by the batch (and perhaps made again under its id)
  };
  Result<Endpoint*> existing(const std::string& endpoint_id);
  // Applies one attempt to its delivery and the endpoint; false: a stale retry, not recorded.
  bool apply(Endpoint& e, const DeliveryAttempt& a, DeliveriesOutcome& out);

  std::int64_t now_ms_;
  std::int64_t count_;      // endpoints now (meaningful when a create asked for it)
  std::int64_t feed_head_;  // (likewise)
  std::map<std::string, Slot<Endpoint>> endpoints_;
  std::map<DeliveryKey, Slot<Delivery>> deliveries_;
};

// --- the slice (core/batch.h's seam): no account changed, so the ledger's part is untouched --------
struct WebhookSlice {
  using Commands = std::tuple<CreateEndpointCommand, UpdateEndpointCommand, DeleteEndpointCommand,
                              RotateEndpointSecretCommand, ReplayEndpointCommand, RecordDeliveriesCommand>;
  using Outcomes = std::tuple<EndpointOutcome, DeliveriesOutcome>;
  using Keys = WebhookKeys;
  using Snapshot = WebhookSnapshot;
  using Effects = WebhookEffects;
  using State = WebhookState;

  static void finish(WebhookKeys& k);

  static void add_keys(const CreateEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const UpdateEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const DeleteEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const RotateEndpointSecretCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const ReplayEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const RecordDeliveriesCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);

  static Result<EndpointOutcome> decide(const CreateEndpointCommand& c, WebhookState& s, batch::LedgerBatch& ledger) {
    return s.create(c, !c.account_id || ledger.account_exists(*c.account_id));
  }
  static Result<EndpointOutcome> decide(const UpdateEndpointCommand& c, WebhookState& s, batch::LedgerBatch&) {
    return s.update(c);
  }
  static Result<EndpointOutcome> decide(const DeleteEndpointCommand& c, WebhookState& s, batch::LedgerBatch&) {
    return s.remove(c);
  }
  static Result<EndpointOutcome> decide(const RotateEndpointSecretCommand& c, WebhookState& s, batch::LedgerBatch&) {
    return s.rotate(c);
  }
  static Result<EndpointOutcome> decide(const ReplayEndpointCommand& c, WebhookState& s, batch::LedgerBatch&) {
    return s.replay(c);
  }
  static Result<DeliveriesOutcome> decide(const RecordDeliveriesCommand& c, WebhookState& s, batch::LedgerBatch&) {
    return s.record(c);
  }

  static Status validate(const CreateEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const UpdateEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const DeleteEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const RotateEndpointSecretCommand& c, const ValidationLimits& limits);
  static Status validate(const ReplayEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const RecordDeliveriesCommand& c, const ValidationLimits& limits);

  // What the ledger fills in before queueing: a new endpoint's id and secret, a rotation's secret
  // (from Completion::random_bytes, the operating system's CSPRNG).
  static void complete(CreateEndpointCommand& c, const batch::Completion& completion);
  static void complete(RotateEndpointSecretCommand& c, const batch::Completion& completion);
};

}  // namespace tollgate::webhooks
