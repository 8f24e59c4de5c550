// The webhook slice of a batch (see webhook_batch.h).
#include "webhooks/webhook_batch.h"

#include <algorithm>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate::webhooks {
namespace {

#define TG_TRY(expr)                      \
  do {                                    \
    if (auto s_ = (expr); !s_) return s_; \
  } while (0)

template <typename T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

Error endpoint_not_found(std::string_view id) {
  return Error::make(Code::not_found, "webhook endpoint " + std::string(id) + " does not exist");
}

Status check_description(const std::string& description) {
  return check_text(description, limits::kWebhookDescriptionBytesMax, "description");
}

}  // namespace

// --- keys -----------------------------------------------------------------------------------------

void WebhookSlice::finish(WebhookKeys& k) {
  sort_unique(k.ids);
}

void WebhookSlice::add_keys(const CreateEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys& ledger) {
  k.ids.push_back(c.endpoint_id);
  if (c.account_id) ledger.accounts.push_back(*c.account_id);
  k.count = true;
}
void WebhookSlice::add_keys(const UpdateEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys&) {
  k.ids.push_back(c.endpoint_id);
}
void WebhookSlice::add_keys(const DeleteEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys&) {
  k.ids.push_back(c.endpoint_id);
}
void WebhookSlice::add_keys(const RotateEndpointSecretCommand& c, WebhookKeys& k, batch::LedgerKeys&) {
  k.ids.push_back(c.endpoint_id);
}

// --- decisions ------------------------------------------------------------------------------------

WebhookState::WebhookState(WebhookSnapshot s, std::int64_t now_ms)
    : now_ms_(now_ms), count_(s.count) {
  TG_ASSERT(count_ >= 0);
  for (Endpoint& e : s.endpoints) {
    const std::string id = e.endpoint_id;
    endpoints_.try_emplace(id, Slot{e, std::move(e)});
  }
}

Result<Endpoint*> WebhookState::existing(const std::string& endpoint_id) {
  auto it = endpoints_.find(endpoint_id);
  if (it == endpoints_.end() || !it->second.now) return endpoint_not_found(endpoint_id);
  return &*it->second.now;
}

Result<EndpointOutcome> WebhookState::create(const CreateEndpointCommand& c, bool account_exists) {
  TG_ASSERT(!c.endpoint_id.empty() && !c.secret.empty());  // completed by the ledger
  if (!account_exists) {
    return Error::make(Code::not_found, "account " + *c.account_id + " does not exist");
  }
  if (count_ >= limits::kWebhookEndpointsMax) {
    return invalid("there are " + std::to_string(count_) + " webhook endpoints, the most tollgate keeps (" +
                   std::to_string(limits::kWebhookEndpointsMax) + "): delete one first");
  }
  Slot& slot = endpoints_[c.endpoint_id];
  if (slot.now) {  // two random ids met: refuse rather than overwrite; the caller sends again
    return Error::make(Code::conflict, "webhook endpoint " + c.endpoint_id + " exists already; retry");
  }
  Endpoint e;
  e.endpoint_id = c.endpoint_id;
  e.url = c.url;
  e.event_types = c.event_types;
  e.account_id = c.account_id;
  e.description = c.description;
  e.status = EndpointStatus::enabled;
  e.secret = c.secret;
  e.created_at_ms = now_ms_;
  e.updated_at_ms = now_ms_;
  slot.now = e;
  ++count_;
  TG_ASSERT(count_ <= limits::kWebhookEndpointsMax);
  return EndpointOutcome{std::move(e), false};
}

Result<EndpointOutcome> WebhookState::update(const UpdateEndpointCommand& c) {
  auto found = existing(c.endpoint_id);
  if (!found) return found.error();
  Endpoint& e = **found;
  if (c.url) e.url = *c.url;
  if (c.event_types) e.event_types = *c.event_types;
  if (c.description) e.description = *c.description;
  if (c.status) e.status = *c.status;
  e.updated_at_ms = now_ms_;
  return EndpointOutcome{e, false};
}

Result<EndpointOutcome> WebhookState::remove(const DeleteEndpointCommand& c) {
  auto found = existing(c.endpoint_id);
  if (!found) return found.error();
  EndpointOutcome out{**found, true};
  endpoints_[c.endpoint_id].now.reset();
  // The count is loaded only for a batch with a create (WebhookKeys::count), and then it counted this
  // row; without a create it stays 0, unused.
  if (count_ > 0) --count_;
  return out;
}

Result<EndpointOutcome> WebhookState::rotate(const RotateEndpointSecretCommand& c) {
  TG_ASSERT(!c.secret.empty());  // completed by the ledger
  auto found = existing(c.endpoint_id);
  if (!found) return found.error();
  Endpoint& e = **found;
  TG_ASSERT(c.secret != e.secret);
  const auto until = checked_add(now_ms_, limits::kWebhookPreviousSecretMs);
  TG_ASSERT(until.has_value());
  e.previous_secret = e.secret;
  e.previous_secret_until_ms = *until;
  e.secret = c.secret;
  e.updated_at_ms = now_ms_;
  return EndpointOutcome{e, false};
}

WebhookEffects WebhookState::effects() && {
  WebhookEffects out;
  for (auto& [id, slot] : endpoints_) {
    if (slot.before == slot.now) continue;
    out.endpoints.push_back({std::move(slot.before), std::move(slot.now)});
  }
  return out;
}

// --- validation at the service boundary -----------------------------------------------------------

Status WebhookSlice::validate(const CreateEndpointCommand& c, const ValidationLimits&) {
  TG_TRY(check_url(c.url, "url"));
  if (!c.event_types.empty()) TG_TRY(check_event_types(c.event_types, "event_types"));
  if (c.account_id) TG_TRY(check_id(*c.account_id, "account_id"));
  return check_description(c.description);
}

Status WebhookSlice::validate(const UpdateEndpointCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.endpoint_id, "endpoint_id"));
  if (c.url) TG_TRY(check_url(*c.url, "url"));
  if (c.event_types && !c.event_types->empty()) TG_TRY(check_event_types(*c.event_types, "event_types"));
  if (c.description) TG_TRY(check_description(*c.description));
  return ok_status();
}

Status WebhookSlice::validate(const DeleteEndpointCommand& c, const ValidationLimits&) {
  return check_id(c.endpoint_id, "endpoint_id");
}

Status WebhookSlice::validate(const RotateEndpointSecretCommand& c, const ValidationLimits&) {
  return check_id(c.endpoint_id, "endpoint_id");
}

// --- what the ledger fills in ---------------------------------------------------------------------

void WebhookSlice::complete(CreateEndpointCommand& c, const batch::Completion& completion) {
  TG_ASSERT(completion.random_bytes);
  c.endpoint_id = endpoint_id_from_random(completion.random_bytes(8));
  c.secret = secret_from_random(completion.random_bytes(limits::kWebhookSecretBytes));
}

void WebhookSlice::complete(RotateEndpointSecretCommand& c, const batch::Completion& completion) {
  TG_ASSERT(completion.random_bytes);
  c.secret = secret_from_random(completion.random_bytes(limits::kWebhookSecretBytes));
}

#undef TG_TRY

}  // namespace tollgate::webhooks
