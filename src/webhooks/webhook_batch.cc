// The webhook slice of a batch (see webhook_batch.h).
#include "webhooks/webhook_batch.h"

#include <algorithm>
#include <set>
#include <string>

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
  sort_unique(k.deliveries);
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
void WebhookSlice::add_keys(const ReplayEndpointCommand& c, WebhookKeys& k, batch::LedgerKeys&) {
  k.ids.push_back(c.endpoint_id);
}
void WebhookSlice::add_keys(const RecordDeliveriesCommand& c, WebhookKeys& k, batch::LedgerKeys&) {
  k.ids.push_back(c.endpoint_id);
  for (const DeliveryAttempt& a : c.attempts) k.deliveries.emplace_back(c.endpoint_id, a.event_id);
}

// --- decisions ------------------------------------------------------------------------------------

WebhookState::WebhookState(WebhookSnapshot s, std::int64_t now_ms)
    : now_ms_(now_ms), count_(s.count), feed_head_(s.feed_head) {
  TG_ASSERT(count_ >= 0 && feed_head_ >= 0);
  for (Endpoint& e : s.endpoints) {
    const std::string id = e.endpoint_id;
    endpoints_.try_emplace(id, Slot<Endpoint>{e, std::move(e)});
  }
  for (Delivery& d : s.deliveries) {
    DeliveryKey key{d.endpoint_id, d.event_id};
    deliveries_.try_emplace(std::move(key), Slot<Delivery>{d, std::move(d)});
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
  Slot<Endpoint>& slot = endpoints_[c.endpoint_id];
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
  e.delivery_cursor = feed_head_;  // the events that follow its registration
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
  if (c.status) {
    // Enabled again: a fresh start of the failing clock (delivery resumes at the cursor).
    if (*c.status == EndpointStatus::enabled && e.status != EndpointStatus::enabled) e.failing_since_ms.reset();
    e.status = *c.status;
  }
  e.updated_at_ms = now_ms_;
  return EndpointOutcome{e, false};
}

Result<EndpointOutcome> WebhookState::remove(const DeleteEndpointCommand& c) {
  auto found = existing(c.endpoint_id);
  if (!found) return found.error();
  EndpointOutcome out{**found, true};
  endpoints_[c.endpoint_id].now.reset();
  endpoints_[c.endpoint_id].removed = true;
  // Its deliveries go with it (the writer deletes them): one recorded later in the batch, for an
  // endpoint made again under this id, is a new row.
  for (auto it = deliveries_.lower_bound({c.endpoint_id, 0}); it != deliveries_.end() && it->first.first == c.endpoint_id;
       ++it) {
    it->second.before.reset();
    it->second.now.reset();
  }
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

Result<EndpointOutcome> WebhookState::replay(const ReplayEndpointCommand& c) {
  auto found = existing(c.endpoint_id);
  if (!found) return found.error();
  Endpoint& e = **found;
  e.delivery_cursor = std::min(e.delivery_cursor, c.after);
  return EndpointOutcome{e, false};
}

bool WebhookState::apply(Endpoint& e, const DeliveryAttempt& a, DeliveriesOutcome& out) {
  Slot<Delivery>& slot = deliveries_[DeliveryKey{e.endpoint_id, a.event_id}];
  if (a.retry_of_attempts) {
    const bool current = slot.now && slot.now->status == DeliveryStatus::pending &&
                         slot.now->attempts == *a.retry_of_attempts;
    if (!current) return false;
  }
  if (!slot.now) {
    Delivery d;
    d.endpoint_id = e.endpoint_id;
    d.event_id = a.event_id;
    d.created_at_ms = a.at_ms;
    slot.now = std::move(d);
  }
  Delivery& d = *slot.now;
  d.event_type = a.event_type;
  d.account_id = a.account_id;
  d.event_at_ms = a.event_at_ms;
  d.attempts = a.retry_of_attempts ? d.attempts + 1 : 1;
  d.last_attempt_at_ms = a.at_ms;
  d.last_status_code = a.status_code;
  d.last_error = a.delivered ? std::string() : a.error;
  if (a.delivered) {
    d.status = DeliveryStatus::delivered;
    d.next_attempt_at_ms.reset();
    e.failing_since_ms.reset();
  } else {
    d.next_attempt_at_ms = next_attempt_at_ms(d.attempts, a.at_ms, a.jitter_permille);
    d.status = d.next_attempt_at_ms ? DeliveryStatus::pending : DeliveryStatus::failed;
    if (d.status == DeliveryStatus::failed) ++out.failed;
    if (!e.failing_since_ms) e.failing_since_ms = a.at_ms;
  }
  ++out.recorded;
  return true;
}

Result<DeliveriesOutcome> WebhookState::record(const RecordDeliveriesCommand& c) {
  auto found = existing(c.endpoint_id);
  if (!found) return found.error();
  Endpoint& e = **found;
  if (c.fence < e.delivery_fence) {
    return Error::make(Code::lock_lost, "webhook endpoint " + c.endpoint_id + ": a deliverer with fence " +
                                            std::to_string(e.delivery_fence) + " took over from fence " +
                                            std::to_string(c.fence));
  }
  if (c.cursor_from && *c.cursor_from != e.delivery_cursor) {
    return Error::make(Code::conflict, "webhook endpoint " + c.endpoint_id + ": its delivery cursor is " +
                                           std::to_string(e.delivery_cursor) + ", not " +
                                           std::to_string(*c.cursor_from) + " (replayed, or moved by another deliverer)");
  }
  DeliveriesOutcome out;
  for (const DeliveryAttempt& a : c.attempts) apply(e, a, out);
  e.delivery_fence = c.fence;
  if (c.cursor_from) e.delivery_cursor = c.cursor_to;
  if (e.status == EndpointStatus::enabled && e.failing_since_ms &&
      now_ms_ - *e.failing_since_ms >= limits::kWebhookDisableAfterFailingMs) {
    e.status = EndpointStatus::disabled;
    e.updated_at_ms = now_ms_;
    out.disabled = true;
  }
  out.endpoint = e;
  return out;
}

WebhookEffects WebhookState::effects() && {
  WebhookEffects out;
  for (auto& [id, slot] : endpoints_) {
    if (slot.before == slot.now) continue;
    if (slot.removed && slot.before && slot.now) {
      // Deleted and made again under the same id: the old row goes (with its deliveries), a new one comes.
      out.endpoints.push_back({std::move(slot.before), std::nullopt});
      out.endpoints.push_back({std::nullopt, std::move(slot.now)});
      continue;
    }
    out.endpoints.push_back({std::move(slot.before), std::move(slot.now)});
  }
  for (auto& [key, slot] : deliveries_) {
    if (!slot.now || slot.before == slot.now) continue;
    // A delivery of an endpoint deleted later in the batch goes with it.
    const auto endpoint = endpoints_.find(key.first);
    if (endpoint == endpoints_.end() || !endpoint->second.now) continue;
    out.deliveries.push_back({std::move(slot.before), std::move(*slot.now)});
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

Status WebhookSlice::validate(const ReplayEndpointCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.endpoint_id, "endpoint_id"));
  if (c.after < 0) return invalid("after must be an event_id (0 or more), not " + std::to_string(c.after));
  return ok_status();
}

// Made by the deliverer, not by callers: what is wrong here is a bug, but it is refused as a value so
// that a bad record never reaches a writer.
Status WebhookSlice::validate(const RecordDeliveriesCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.endpoint_id, "endpoint_id"));
  if (c.fence < 1) return invalid("fence must be a lock's fence (1 or more)");
  if (c.cursor_from && (*c.cursor_from < 0 || c.cursor_to <= *c.cursor_from)) {
    return invalid("cursor_to must be after cursor_from");
  }
  std::set<std::int64_t> events;
  for (const DeliveryAttempt& a : c.attempts) {
    if (a.event_id < 1 || !events.insert(a.event_id).second) return invalid("each attempt names another event");
    if (a.jitter_permille < -kDeliveryJitterPermilleMax || a.jitter_permille > kDeliveryJitterPermilleMax) {
      return invalid("jitter_permille out of range");
    }
    if (a.error.size() > limits::kWebhookDeliveryErrorBytesMax) return invalid("an attempt's error is too long");
    if (a.delivered != a.error.empty()) return invalid("an attempt delivered has no error, and a failed one has one");
    if (a.retry_of_attempts && *a.retry_of_attempts < 1) return invalid("retry_of_attempts must be 1 or more");
  }
  return ok_status();
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
