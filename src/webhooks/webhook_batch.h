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

struct EndpointOutcome {  // every kind: the endpoint as it is now (as it was, for a delete)
  Endpoint endpoint;
  bool deleted = false;
};

// --- the rows -------------------------------------------------------------------------------------

struct WebhookKeys {
  std::vector<std::string> ids;  // endpoints named; sorted, unique once finished
  bool count = false;            // a create: the number of endpoints is needed

  bool empty() const { return ids.empty() && !count; }
};

struct WebhookSnapshot {
  std::vector<Endpoint> endpoints;  // of WebhookKeys::ids that exist
  std::int64_t count = 0;           // every endpoint (when WebhookKeys::count)
};

struct EndpointChange {
  std::optional<Endpoint> before;  // unset: a new row
  std::optional<Endpoint> after;   // unset: the row is deleted
};

struct WebhookEffects {
  std::vector<EndpointChange> endpoints;  // by endpoint_id, each once

  bool empty() const { return endpoints.empty(); }
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

  WebhookEffects effects() &&;

 private:
  struct Slot {
    std::optional<Endpoint> before;  // as loaded (unset: no row)
    std::optional<Endpoint> now;     // as the batch left it (unset: none, or deleted)
  };
  Result<Endpoint*> existing(const std::string& endpoint_id);

  std::int64_t now_ms_;
  std::int64_t count_;  // endpoints now (meaningful when a create asked for it)
  std::map<std::string, Slot> endpoints_;
};

// --- the slice (core/batch.h's seam): no account changed, so the ledger's part is untouched --------
struct WebhookSlice {
  using Commands =
      std::tuple<CreateEndpointCommand, UpdateEndpointCommand, DeleteEndpointCommand, RotateEndpointSecretCommand>;
  using Outcomes = std::tuple<EndpointOutcome>;
  using Keys = WebhookKeys;
  using Snapshot = WebhookSnapshot;
  using Effects = WebhookEffects;
  using State = WebhookState;

  static void finish(WebhookKeys& k);

  static void add_keys(const CreateEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const UpdateEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const DeleteEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const RotateEndpointSecretCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger);

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

  static Status validate(const CreateEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const UpdateEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const DeleteEndpointCommand& c, const ValidationLimits& limits);
  static Status validate(const RotateEndpointSecretCommand& c, const ValidationLimits& limits);

  // What the ledger fills in before queueing: a new endpoint's id and secret, a rotation's secret
  // (from Completion::random_bytes, the operating system's CSPRNG).
  static void complete(CreateEndpointCommand& c, const batch::Completion& completion);
  static void complete(RotateEndpointSecretCommand& c, const batch::Completion& completion);
};

}  // namespace tollgate::webhooks
