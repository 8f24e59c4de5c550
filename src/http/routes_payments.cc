// Routes of payment providers (api.md "Payments"): open routes, authenticated by the provider's
// signature over the raw body (payments/signature.h), checked before anything in the body is read.
// A signed event becomes one command of the payment slice (payments/payment_batch.h), which decides;
// these handlers verify, translate the provider's event, find a refunded payment's account, count
// (http/metrics.h: tollgate_payment_*) and answer. The body is never logged (it holds the
// customer's details): one line names the event's id, type and outcome.
//
// Answers: 200 when the event was applied, was applied before, or is of a type tollgate ignores;
// 400 invalid_signature / invalid_request (nothing changed; a provider retries, so a pack added to
// the configuration meanwhile still credits); 404 when the account or payment is not known yet
// (the provider retries: create the account meanwhile).
#include <optional>
#include <string>

#include "config/config.h"
#include "core/checked.h"
#include "core/log.h"
#include "core/parse.h"
#include "http/routes.h"
#include "payments/signature.h"

namespace tollgate::http {
namespace {

using payments::Provider;

// Another provider's ids: payment:{payment_id}:refund:{webhook-id} must fit an id (128).
constexpr std::size_t kPaymentIdLengthMax = 64;
constexpr std::size_t kWebhookIdLengthMax = 48;

// What a provider's event asks of tollgate.
enum class Kind { payment, refund, dispute };

// A string member of `o` ("" when absent or not a string).
std::string_view text_of(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return {};
  return v->get_string();
}

// An id Stripe may send as a string or, expanded, as an object with an "id".
std::string_view id_of(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return {};
  if (v->is_string()) return v->get_string();
  if (v->is_object()) return text_of(v->get_object(), "id");
  return {};
}

std::optional<std::int64_t> int_of(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(v->get_uint64());
  }
  return std::nullopt;
}

Error bad_event(std::string detail) { return Error::make(Code::invalid_request, std::move(detail) + "; nothing changed"); }

// The credits a Stripe checkout session buys: metadata.tollgate_credits, or the pack named by
// metadata.tollgate_pack ([payments.stripe.packs]).
Result<std::int64_t> checkout_credits(const json::object& metadata, const StripePaymentsConfig& config) {
  const std::string_view credits = text_of(metadata, "tollgate_credits");
  const std::string_view pack = text_of(metadata, "tollgate_pack");
  if (!credits.empty() && !pack.empty()) return bad_event("metadata names both tollgate_credits and tollgate_pack");
  if (!credits.empty()) {
    const auto n = parse_int(credits, limits::kAmountMin, limits::kAmountMax);
    if (!n) return bad_event("metadata.tollgate_credits must be an integer from 1 to 9007199254740991");
    return *n;
  }
  if (pack.empty()) return bad_event("the session's metadata names neither tollgate_credits nor tollgate_pack");
  if (auto it = config.packs.find(std::string(pack)); it != config.packs.end()) return it->second;
  std::string known;
  for (const auto& [name, n] : config.packs) known += (known.empty() ? "" : ", ") + name;
  return bad_event("metadata.tollgate_pack " + std::string(pack) + " is not a configured pack ([payments.stripe.packs]: " +
                   (known.empty() ? std::string("none") : known) + ")");
}

// checkout.session.completed (paid) or async_payment_succeeded: the credit, or nullopt when the
// session is not paid yet.
// The lot a checkout's credits make: metadata.tollgate_expires_in_days (1..36500) from `now_ms` (the
// delivery's: a replay answers the first credit whatever it says), else none.
Result<LotTerms> checkout_lot(const json::object& metadata, std::int64_t now_ms) {
  LotTerms terms;
  const std::string_view days = text_of(metadata, "tollgate_expires_in_days");
  if (days.empty()) return terms;
  constexpr std::int64_t kDaysMax = 36'500;
  const auto n = parse_int(days, 1, kDaysMax);
  if (!n) return bad_event("metadata.tollgate_expires_in_days must be an integer from 1 to " + std::to_string(kDaysMax));
  terms.expires_at_ms = now_ms + *n * 86'400'000;  // ≤ 100 years: no overflow
  return terms;
}

Result<std::optional<CreditPaymentCommand>> checkout_command(const json::object& session, bool async_succeeded,
                                                             const StripePaymentsConfig& config, std::int64_t now_ms) {
  // Only money that arrived credits: "unpaid" waits for async_payment_succeeded, and
  // "no_payment_required" (a free trial, a setup session) is no payment.
  if (!async_succeeded && text_of(session, "payment_status") != "paid") return std::optional<CreditPaymentCommand>();
  const std::string_view session_id = text_of(session, "id");
  if (session_id.empty()) return bad_event("data.object.id (the checkout session's id) is missing");
  const json::value* m = session.if_contains("metadata");
  static const json::object kNone;
  const json::object& metadata = m != nullptr && m->is_object() ? m->get_object() : kNone;
  std::string_view account = text_of(session, "client_reference_id");
  if (account.empty()) account = text_of(metadata, "tollgate_account_id");
  if (account.empty()) return bad_event("the session names no account (client_reference_id or metadata.tollgate_account_id)");
  auto credits = checkout_credits(metadata, config);
  if (!credits) return credits.error();
  auto lot = checkout_lot(metadata, now_ms);
  if (!lot) return lot.error();
  std::optional<std::string> intent;
  if (auto pi = id_of(session, "payment_intent"); !pi.empty()) intent = std::string(pi);
  return std::optional<CreditPaymentCommand>(CreditPaymentCommand{"stripe:" + std::string(session_id), Provider::stripe,
                                                                  intent, std::string(account), *credits, *lot});
}

// The counter of (kind, outcome).
void count(Context& ctx, Kind kind, bool created) {
  auto& c = ctx.metrics.edge;
  switch (kind) {
    case Kind::payment: return created ? c.add<&EdgeCounts::payment_credited>() : c.add<&EdgeCounts::payment_replayed>();
    case Kind::refund: return created ? c.add<&EdgeCounts::refund_applied>() : c.add<&EdgeCounts::refund_replayed>();
    case Kind::dispute: return created ? c.add<&EdgeCounts::dispute_applied>() : c.add<&EdgeCounts::dispute_replayed>();
  }
}

void count_refusal(Context& ctx, Kind kind, const Error& e) {
  auto& c = ctx.metrics.edge;
  if (e.code != Code::not_found) return c.add<&EdgeCounts::payment_event_refused>();
  switch (kind) {
    case Kind::payment: return c.add<&EdgeCounts::payment_not_found>();
    case Kind::refund: return c.add<&EdgeCounts::refund_not_found>();
    case Kind::dispute: return c.add<&EdgeCounts::dispute_not_found>();
  }
}

std::string_view outcome_name(Kind kind, const PaymentOutcome& o) {
  if (!o.created) return "replayed";
  switch (kind) {
    case Kind::payment: return "credited";
    case Kind::refund: return "taken_back";
    case Kind::dispute: return "frozen";
  }
  return "";
}

void log_event(std::string_view provider, std::string_view id, std::string_view type, std::string_view outcome) {
  log("info", "payment event " + std::string(provider) + " " + std::string(id) + " (" + std::string(type) +
                  "): " + std::string(outcome));
}

// Queues the slice's command; answers {received, outcome, payment_id, account_id, credits, …}.
void apply(Context& ctx, Call& call, Kind kind, Command command, std::string provider, std::string event_id,
           std::string type) {
  ctx.ledger.submit(std::move(command), [ctx, kind, reply = std::move(call.reply), dispatch = call.dispatch,
                                         provider = std::move(provider), event_id = std::move(event_id),
                                         type = std::move(type)](CommandResult r) mutable {
    dispatch([ctx, kind, reply = std::move(reply), r = std::move(r), provider = std::move(provider),
              event_id = std::move(event_id), type = std::move(type)]() mutable {
      if (!r) {
        count_refusal(ctx, kind, r.error());
        log_event(provider, event_id, type, std::string("refused: ") + std::string(code_name(r.error().code)));
        return reply(problem(r.error()));
      }
      const PaymentOutcome& o = outcome<PaymentOutcome>(r);
      count(ctx, kind, o.created);
      const std::string_view outcome = outcome_name(kind, o);
      log_event(provider, event_id, type, outcome);
      json::object body;
      body["received"] = true;
      body["outcome"] = outcome;
      body["payment_id"] = o.payment.payment_id;
      body["account_id"] = o.payment.account_id;
      if (kind == Kind::payment) body["credits"] = o.payment.credits;
      if (kind == Kind::refund) {
        body["owed"] = o.owed;
        body["taken_back"] = o.moved;
      }
      body["account_frozen"] = o.account.frozen;
      reply(json_response(200, body));
    });
  });
}

void answer_without_change(Context& ctx, Call& call, std::string_view provider, std::string_view id,
                           std::string_view type, bool ignored) {
  if (ignored) {
    ctx.metrics.edge.add<&EdgeCounts::payment_event_ignored>();
  } else {
    ctx.metrics.edge.add<&EdgeCounts::payment_pending>();
  }
  log_event(provider, id, type, ignored ? "ignored" : "pending");
  json::object body;
  body["received"] = true;
  body[ignored ? "ignored" : "pending"] = true;
  call.reply(json_response(200, body));
}

// A refused signature: counted (unless the route is not configured at all: 404, a scanner's probe
// must not page anyone) and logged with its reason, never the body.
void refuse_signature(Context& ctx, Call& call, std::string_view provider, bool configured, const Error& e) {
  if (!configured) {
    return call.reply(problem(Error::make(Code::not_found, "payments from " + std::string(provider) +
                                                               " are not configured on this server")));
  }
  if (provider == "stripe") {
    ctx.metrics.edge.add<&EdgeCounts::payment_signature_failures_stripe>();
  } else {
    ctx.metrics.edge.add<&EdgeCounts::payment_signature_failures_webhook>();
  }
  log("warn", "payment event from " + std::string(provider) + " refused: " + e.detail);
  call.reply(problem(e));
}

void refuse(Context& ctx, Call& call, const Error& e) {
  ctx.metrics.edge.add<&EdgeCounts::payment_event_refused>();
  call.reply(problem(e));
}

// The payment a refund or dispute names (on a reader), then its command.
template <typename Make>
void for_payment(Context& ctx, Call& call, Kind kind, Result<payments::Payment> payment, Make make, std::string provider,
                 std::string id, std::string type) {
  if (!payment) {
    count_refusal(ctx, kind, payment.error());
    log_event(provider, id, type, "refused: " + std::string(code_name(payment.error().code)));
    return call.reply(problem(payment.error()));
  }
  apply(ctx, call, kind, make(*payment), std::move(provider), std::move(id), std::move(type));
}

}  // namespace

// POST /v1/payments/stripe (on a reader: a refund or dispute reads its payment first).
void stripe_payment(Context& ctx, Call& call) {
  const StripePaymentsConfig& config = ctx.options.payments.stripe;
  if (auto s = payments::verify_stripe(call.provider_signature.stripe, config.signing_secrets, call.body,
                                       ctx.clock.now_ms(), config.tolerance_ms);
      !s) {
    return refuse_signature(ctx, call, "stripe", !config.signing_secrets.empty(), s.error());
  }
  auto event = body_object(call);
  if (!event) return refuse(ctx, call, event.error());
  const std::string id(text_of(*event, "id"));
  const std::string type(text_of(*event, "type"));
  const json::value* data = event->if_contains("data");
  const json::value* object = data != nullptr && data->is_object() ? data->get_object().if_contains("object") : nullptr;
  if (id.empty() || type.empty() || object == nullptr || !object->is_object()) {
    return refuse(ctx, call, bad_event("a Stripe event has an id, a type and data.object"));
  }
  const json::object& o = object->get_object();
  if (type == "checkout.session.completed" || type == "checkout.session.async_payment_succeeded") {
    auto command = checkout_command(o, type == "checkout.session.async_payment_succeeded", config, ctx.clock.now_ms());
    if (!command) return refuse(ctx, call, command.error());
    if (!*command) return answer_without_change(ctx, call, "stripe", id, type, false);
    return apply(ctx, call, Kind::payment, std::move(**command), "stripe", id, type);
  }
  if (type != "charge.refunded" && type != "charge.dispute.created") {
    return answer_without_change(ctx, call, "stripe", id, type, true);
  }
  const std::string intent(id_of(o, "payment_intent"));
  const std::string object_id(text_of(o, "id"));
  if (intent.empty() || object_id.empty()) {
    return refuse(ctx, call, bad_event("data.object names no payment_intent or has no id"));
  }
  auto payment = ctx.ledger.payment_reads().find_payment(Provider::stripe, intent);
  if (type == "charge.dispute.created") {
    return for_payment(
        ctx, call, Kind::dispute, std::move(payment),
        [&](const payments::Payment& p) -> Command {
          return DisputePaymentCommand{p.payment_id, p.account_id, "stripe:" + object_id};
        },
        "stripe", id, type);
  }
  const auto refunded = int_of(o, "amount_refunded");
  const auto amount = int_of(o, "amount");
  if (!refunded || !amount || *amount < 1 || *refunded < 0 || *refunded > *amount) {
    return refuse(ctx, call, bad_event("a charge.refunded event's amount_refunded and amount must be integers, "
                                       "0 <= amount_refunded <= amount, amount >= 1"));
  }
  const bool into_debt = config.refund_shortfall == RefundShortfall::debt;
  for_payment(
      ctx, call, Kind::refund, std::move(payment),
      [&](const payments::Payment& p) -> Command {
        return TakeBackPaymentCommand{p.payment_id, p.account_id,
                                      "stripe:" + object_id + ":refunded:" + std::to_string(*refunded),
                                      payments::RefundShare{*refunded, *amount}, std::nullopt, into_debt};
      },
      "stripe", id, type);
}

// POST /v1/payments/webhook (on a reader: a refund reads its payment first).
void webhook_payment(Context& ctx, Call& call) {
  const PaymentWebhookConfig& config = ctx.options.payments.webhook;
  const auto& sig = call.provider_signature;
  if (auto s = payments::verify_standard({sig.webhook_id, sig.webhook_timestamp, sig.webhook_signature},
                                         config.secret.value_or(""), call.body, ctx.clock.now_ms(), config.tolerance_ms);
      !s) {
    return refuse_signature(ctx, call, "webhook", config.secret.has_value(), s.error());
  }
  auto body = body_object(call);
  if (!body) return refuse(ctx, call, body.error());
  FieldReader f(*body);
  auto type = f.required_string("type", 64);
  if (!type) return refuse(ctx, call, type.error());
  if (*type != "payment.succeeded" && *type != "payment.refunded") {
    return answer_without_change(ctx, call, "webhook", sig.webhook_id, *type, true);
  }
  auto payment_id = f.id("payment_id");
  if (!payment_id) return refuse(ctx, call, payment_id.error());
  // The references made of it must stay ids, and apart from each other (payment:{id},
  // payment:{id}:refund:{webhook-id}): no ':' in a payment_id, bounded lengths.
  if (payment_id->size() > kPaymentIdLengthMax || payment_id->find(':') != std::string::npos) {
    return refuse(ctx, call, bad_event("payment_id must be 1-" + std::to_string(kPaymentIdLengthMax) +
                                       " characters of [A-Za-z0-9._@-] (no ':')"));
  }
  if (!id_is_valid(sig.webhook_id) || sig.webhook_id.size() > kWebhookIdLengthMax) {
    return refuse(ctx, call, bad_event("webhook-id must be 1-" + std::to_string(kWebhookIdLengthMax) +
                                       " characters of [A-Za-z0-9._:@-]"));
  }
  auto account_id = f.id("account_id");
  if (!account_id) return refuse(ctx, call, account_id.error());
  auto credits = f.amount("credits");
  if (!credits) return refuse(ctx, call, credits.error());
  // Other fields (an adapter's currency, amount, timestamp) are ignored; the lot's are not.
  auto lot = lot_terms(f);
  if (!lot) return refuse(ctx, call, bad_event(lot.error().detail));
  const std::string payment = "payment:" + *payment_id;
  if (*type == "payment.succeeded") {
    return apply(ctx, call, Kind::payment,
                 CreditPaymentCommand{payment, Provider::webhook, *payment_id, *account_id, *credits, *lot}, "webhook",
                 std::string(sig.webhook_id), *type);
  }
  auto found = ctx.ledger.payment_reads().get_payment(payment);
  if (found && found->account_id != *account_id) {
    return refuse(ctx, call, bad_event("account_id " + *account_id + " is not the account payment " + *payment_id +
                                       " credited (" + found->account_id + ")"));
  }
  const std::string reference = payment + ":refund:" + std::string(sig.webhook_id);
  const bool into_debt = ctx.options.payments.stripe.refund_shortfall == RefundShortfall::debt;
  for_payment(
      ctx, call, Kind::refund, std::move(found),
      [&](const payments::Payment& p) -> Command {
        return TakeBackPaymentCommand{p.payment_id, p.account_id, reference, std::nullopt, *credits, into_debt};
      },
      "webhook", std::string(sig.webhook_id), *type);
}

}  // namespace tollgate::http
