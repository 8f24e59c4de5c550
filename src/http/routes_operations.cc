// Routes of operations: liveness, readiness, metrics, the OpenAPI document, the audit.
#include "core/limits.h"
#include "core/log.h"
#include "http/routes.h"

#include <memory>

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
  const Readiness readiness = ctx.ledger.readiness();
  json::object body;
  body["database"] = readiness.database;
  body["reaper"] = readiness.reaper;
  body["status"] = readiness.ready ? "ready" : "not ready";
  Response r = json_response(readiness.ready ? 200 : 503, body);
  if (!readiness.ready) r.retry_after_s = 1;
  call.reply(std::move(r));
}

// With a metrics_key configured, /metrics answers that key or an admin key (which may do
// everything), and 401 to anything else.
Status metrics_access(Context& ctx, const Call& call) {
  if (!ctx.options.metrics_key) return ok_status();
  constexpr std::string_view kBearer = "Bearer ";
  const std::string& header = call.authorization;
  if (header.size() > kBearer.size() && header.compare(0, kBearer.size(), kBearer) == 0 &&
      constant_time_equal(sha256_hex(std::string_view(header).substr(kBearer.size())),
                          sha256_hex(*ctx.options.metrics_key))) {
    return ok_status();
  }
  auto principal = ctx.auth.authenticate(header);
  if (principal && principal->admin) return ok_status();
  if (!principal && principal.code() != Code::unauthorized) return principal.error();  // the database
  return Error::make(Code::unauthorized, "GET /metrics needs the metrics key (or an admin key)");
}

void prometheus_metrics(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(metrics_access(ctx, call));
  Response r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = ctx.options.render_metrics ? ctx.options.render_metrics() : std::string();
  call.reply(std::move(r));
}

namespace {

// A full audit in parts: each part audits limits::kAuditAccountsPerTask accounts (by id, one
// snapshot) on a reader thread, then queues the next part behind the reads that arrived meanwhile —
// so an audit of every account never holds a reader thread, or the reads behind it, for long. The
// answer, once the last part ran, is the sum: {accounts_checked, violations}.
struct FullAudit {
  Context ctx;
  Reply reply;
  std::string after;  // the last account audited
  AuditReport report;
};

void audit_part(const std::shared_ptr<FullAudit>& audit) {
  auto page = audit->ctx.ledger.audit_range(audit->after, limits::kAuditAccountsPerTask);
  if (!page) return audit->reply(problem(page.error()));
  audit->report.accounts_checked += page->report.accounts_checked;
  for (auto& v : page->report.violations) audit->report.violations.push_back(std::move(v));
  audit->after = std::move(page->last_account_id);
  if (!page->has_more) return audit->reply(value_response(200, audit->report));
  audit->ctx.readers.continue_with([audit] { audit_part(audit); });
}

}  // namespace

void audit(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id"}));
  if (auto it = call.query.find("account_id"); it != call.query.end()) {
    auto report = ctx.ledger.audit(std::string_view(it->second));
    TG_REPLY_IF_ERROR(report);
    return call.reply(value_response(200, *report));
  }
  audit_part(std::make_shared<FullAudit>(FullAudit{ctx, std::move(call.reply), "", {}}));
}

}  // namespace tollgate::http
