// Routes of webhook endpoints (admin keys only; api.md, Webhooks): register, list, read, change,
// delete, rotate the secret; each endpoint's deliveries, and a replay from a feed cursor. A secret is
// in the answer of the create and of the rotation that made it, and nowhere else.
#include <limits>

#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {
namespace {

// {…the endpoint…, "secret": …}: the one answer that shows a secret.
Response with_secret(unsigned status, const webhooks::Endpoint& e) {
  return written_response(status, [&](std::string& out) {
    append_json(out, e);
    TG_ASSERT(!out.empty() && out.back() == '}');
    out.pop_back();
    out += ",\"secret\":";
    append_json_string(out, e.secret);
    out += '}';
  });
}

// An explicit [] would read as "every type": refused, naming the field (leave it out, or null).
Status not_an_empty_list(const std::optional<std::optional<std::vector<std::string>>>& types) {
  if (types && *types && (*types)->empty()) return webhooks::check_event_types({}, "event_types");
  return ok_status();
}

}  // namespace

// The reader takes any string the body can hold; the slice's validation refuses one too long with
// its own limit named (limits::kWebhookUrlBytesMax, kWebhookDescriptionBytesMax).
void create_webhook_endpoint(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto url = f.required_string("url", limits::kBodyBytesMax);
  TG_REPLY_IF_ERROR(url);
  auto types = f.nullable_strings("event_types", limits::kWebhookEventTypesMax, limits::kWebhookEventTypeBytesMax);
  TG_REPLY_IF_ERROR(types);
  auto account_id = f.optional_id("account_id");
  TG_REPLY_IF_ERROR(account_id);
  auto description = f.string("description", limits::kBodyBytesMax);
  TG_REPLY_IF_ERROR(description);
  TG_REPLY_IF_ERROR(f.finish());
  TG_REPLY_IF_ERROR(not_an_empty_list(*types));
  webhooks::CreateEndpointCommand c;
  c.url = std::move(*url);
  if (*types && **types) c.event_types = std::move(***types);
  c.account_id = std::move(*account_id);
  c.description = description->value_or("");
  submit(ctx, call, std::move(c),
         [](const CommandResult& r) { return with_secret(201, outcome<EndpointOutcome>(r).endpoint); });
}

void list_webhook_endpoints(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"limit", "starting_after"}));
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto endpoints = ctx.ledger.list_webhook_endpoints(*page);
  TG_REPLY_IF_ERROR(endpoints);
  call.reply(page_response("endpoints", *endpoints));
}

void get_webhook_endpoint(Context& ctx, Call& call) {
  auto endpoint = ctx.ledger.get_webhook_endpoint(call.params[0]);
  TG_REPLY_IF_ERROR(endpoint);
  call.reply(value_response(200, *endpoint));
}

void update_webhook_endpoint(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "endpoint_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto url = f.string("url", limits::kBodyBytesMax);
  TG_REPLY_IF_ERROR(url);
  auto types = f.nullable_strings("event_types", limits::kWebhookEventTypesMax, limits::kWebhookEventTypeBytesMax);
  TG_REPLY_IF_ERROR(types);
  auto description = f.string("description", limits::kBodyBytesMax);
  TG_REPLY_IF_ERROR(description);
  auto status = f.string("status", 16);
  TG_REPLY_IF_ERROR(status);
  TG_REPLY_IF_ERROR(f.finish());
  TG_REPLY_IF_ERROR(not_an_empty_list(*types));
  webhooks::UpdateEndpointCommand c;
  c.endpoint_id = call.params[0];
  c.url = std::move(*url);
  if (*types) c.event_types = **types ? ***types : std::vector<std::string>{};  // null: every type again
  c.description = std::move(*description);
  if (*status) {
    c.status = webhooks::parse_endpoint_status(**status);
    if (!c.status) return call.reply(problem(invalid("status must be enabled or disabled, got " + **status)));
  }
  submit(ctx, call, std::move(c),
         [](const CommandResult& r) { return value_response(200, outcome<EndpointOutcome>(r).endpoint); });
}

void delete_webhook_endpoint(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "endpoint_id"); !s) return call.reply(problem(s.error()));
  if (!call.body.empty()) {
    auto body = body_object(call);
    TG_REPLY_IF_ERROR(body);
    TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  }
  submit(ctx, call, webhooks::DeleteEndpointCommand{call.params[0]}, [](const CommandResult& r) {
    return json_response(200, json::object{{"endpoint_id", outcome<EndpointOutcome>(r).endpoint.endpoint_id},
                                           {"deleted", true}});
  });
}

void rotate_webhook_secret(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "endpoint_id"); !s) return call.reply(problem(s.error()));
  if (!call.body.empty()) {
    auto body = body_object(call);
    TG_REPLY_IF_ERROR(body);
    TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  }
  submit(ctx, call, webhooks::RotateEndpointSecretCommand{call.params[0], ""},
         [](const CommandResult& r) { return with_secret(200, outcome<EndpointOutcome>(r).endpoint); });
}

void list_webhook_deliveries(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"status", "limit", "starting_after"}));
  if (auto s = check_id(call.params[0], "endpoint_id"); !s) return call.reply(problem(s.error()));
  std::optional<webhooks::DeliveryStatus> status;
  if (auto it = call.query.find("status"); it != call.query.end()) {
    status = webhooks::parse_delivery_status(it->second);
    if (!status) return call.reply(problem(invalid("status must be pending, delivered or failed, got " + it->second)));
  }
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto deliveries = ctx.ledger.list_webhook_deliveries(call.params[0], status, *page);
  TG_REPLY_IF_ERROR(deliveries);
  call.reply(page_response("deliveries", *deliveries));
}

void replay_webhook_endpoint(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "endpoint_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto after = f.required_integer("after", 0, std::numeric_limits<std::int64_t>::max());
  TG_REPLY_IF_ERROR(after);
  TG_REPLY_IF_ERROR(f.finish());
  submit(ctx, call, webhooks::ReplayEndpointCommand{call.params[0], *after},
         [](const CommandResult& r) { return value_response(202, outcome<EndpointOutcome>(r).endpoint); });
}

}  // namespace tollgate::http
