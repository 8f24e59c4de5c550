// Routes of credit lots (core/lots.h): the terms a credit gives its lot, and an account's lots.
#include "core/clock.h"
#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {

Result<LotTerms> lot_terms(FieldReader& f) {
  LotTerms terms;
  auto expires_at = f.string("expires_at", limits::kIdLengthMax);
  if (!expires_at) return expires_at.error();
  if (*expires_at) {
    terms.expires_at_ms = parse_rfc3339_ms(**expires_at);
    if (!terms.expires_at_ms) {
      return invalid("expires_at must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z");
    }
  }
  auto priority = f.integer("priority", 0, limits::kLotPriorityMax);
  if (!priority) return priority.error();
  terms.priority = priority->value_or(limits::kLotPriorityDefault);
  auto category = f.string("category", limits::kIdLengthMax);
  if (!category) return category.error();
  if (*category) {
    const auto parsed = parse_lot_category(**category);
    if (!parsed) return invalid("category must be paid or promotional");
    terms.category = *parsed;
  }
  return terms;
}

// An account's lots in spending order; an account key sees only its own account's.
void list_lots(Context& ctx, Call& call) {
  if (auto e = check_account_visible(call.principal, call.params[0])) return call.reply(problem(*e));
  TG_REPLY_IF_ERROR(known_query(call, {"status", "limit", "starting_after"}));
  LotQuery query{call.params[0], std::nullopt};
  if (auto it = call.query.find("status"); it != call.query.end()) {
    query.status = lots::parse_lot_status(it->second);
    if (!query.status) return call.reply(problem(invalid("status must be active, expired or spent")));
  }
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto lots = ctx.ledger.list_lots(query, *page);
  TG_REPLY_IF_ERROR(lots);
  call.reply(page_response("lots", *lots));
}

}  // namespace tollgate::http
