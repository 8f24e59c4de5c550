// Routes of operations: liveness, readiness, metrics, the OpenAPI document, the audit.
#include "http/routes.h"

namespace tollgate::http {

void healthz(Context&, Call& call) {
  Response r;
  r.body = "{\"status\":\"ok\"}";
  call.reply(std::move(r));
}

void openapi_document(Context& ctx, Call& call) {
  Response r;
  r.body = ctx.options.openapi_json;
  call.reply(std::move(r));
}

void readyz(Context& ctx, Call& call) {
  json::object body;
  bool ready = true;
  if (auto ping = ctx.ledger.store().ping(); !ping) {
    ready = false;
    body["database"] = ping.error().detail;
  } else {
    body["database"] = "ok";
  }
  const auto last = ctx.ledger.reaper_last_run_ms();
  const std::int64_t age_ms = last ? ctx.clock.now_ms() - *last : -1;
  if (!last || age_ms > 3 * ctx.options.reaper_interval_ms + 1000) {
    ready = false;
    body["reaper"] = last ? "last ran " + std::to_string(age_ms) + " ms ago" : std::string("has not run yet");
  } else {
    body["reaper"] = "ok";
  }
  body["status"] = ready ? "ready" : "not ready";
  Response r = json_response(ready ? 200 : 503, body);
  if (!ready) r.retry_after_s = 1;
  call.reply(std::move(r));
}

void prometheus_metrics(Context& ctx, Call& call) {
  Response r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = ctx.options.render_metrics ? ctx.options.render_metrics() : std::string();
  call.reply(std::move(r));
}

void audit(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id"}));
  std::optional<std::string> account;
  if (auto it = call.query.find("account_id"); it != call.query.end()) account = it->second;
  auto report = ctx.ledger.audit(account ? std::optional<std::string_view>(*account) : std::nullopt);
  TG_REPLY_IF_ERROR(report);
  ctx.metrics.invariant_violations.fetch_add(report->violations.size(), std::memory_order_relaxed);
  call.reply(value_response(200, *report));
}

}  // namespace tollgate::http
