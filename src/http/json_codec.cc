#include "http/json_codec.h"

#include "core/checked.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/suggest.h"
#include "webhooks/signature.h"

#include <charconv>

namespace tollgate::http {

Result<json::object> parse_object(std::string_view body) {
  if (body.empty()) return json::object();
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return invalid("the body is not valid JSON: " + ec.message());
  if (!v.is_object()) return invalid("the body must be a JSON object");
  return std::move(v.as_object());
}

const json::value* FieldReader::find(std::string_view key) {
  read_.emplace(key);
  const json::value* v = object_.if_contains(key);
  if (v && v->is_null()) return nullptr;  // null means absent
  return v;
}

template <typename T>
Result<T> FieldReader::failed(Error error, T placeholder) {
  if (!first_error_) first_error_ = std::move(error);
  for (const auto& [key, value] : object_) {
    if (!read_.count(std::string_view(key))) return placeholder;  // maybe unknown: finish() decides
  }
  return *first_error_;
}

Result<std::optional<std::int64_t>> FieldReader::read_integer(std::string_view key, std::int64_t min,
                                                              std::int64_t max) {
  const json::value* v = find(key);
  if (!v) return std::optional<std::int64_t>();
  std::int64_t n = 0;
  if (v->is_int64()) {
    n = v->get_int64();
  } else if (v->is_uint64()) {
    return invalid(std::string(key) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  } else {
    return invalid(std::string(key) + " must be an integer");
  }
  if (n < min || n > max) {
    return invalid(std::string(key) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                   ", got " + std::to_string(n));
  }
  return std::optional<std::int64_t>(n);
}

Result<std::optional<std::string>> FieldReader::read_string(std::string_view key, std::size_t max_bytes) {
  const json::value* v = find(key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return invalid(std::string(key) + " must be a string");
  const json::string& s = v->get_string();
  if (s.size() > max_bytes) return invalid(std::string(key) + " must be at most " + std::to_string(max_bytes) + " bytes");
  return std::optional<std::string>(std::string(s));
}

Result<std::optional<std::int64_t>> FieldReader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  auto v = read_integer(key, min, max);
  if (!v) return failed(v.error(), std::optional<std::int64_t>());
  return v;
}

Result<std::int64_t> FieldReader::required_integer(std::string_view key, std::int64_t min, std::int64_t max) {
  auto v = read_integer(key, min, max);
  if (!v) return failed(v.error(), std::int64_t{0});
  if (!*v) return failed(invalid(std::string(key) + " is required"), std::int64_t{0});
  return **v;
}

Result<std::optional<std::optional<std::int64_t>>> FieldReader::nullable_integer(std::string_view key,
                                                                                 std::int64_t min, std::int64_t max) {
  using Nullable = std::optional<std::optional<std::int64_t>>;
  const json::value* raw = object_.if_contains(key);
  if (raw && raw->is_null()) {
    read_.emplace(key);
    return Nullable(std::optional<std::int64_t>());
  }
  auto v = integer(key, min, max);
  if (!v) return v.error();
  if (!*v) return Nullable();
  return Nullable(*v);
}

Result<std::optional<std::optional<std::vector<std::string>>>> FieldReader::nullable_strings(std::string_view key,
                                                                                             std::size_t max_items,
                                                                                             std::size_t max_bytes) {
  using Nullable = std::optional<std::optional<std::vector<std::string>>>;
  const json::value* raw = object_.if_contains(key);
  read_.emplace(key);
  if (!raw) return Nullable();
  if (raw->is_null()) return Nullable(std::optional<std::vector<std::string>>());
  const auto wrong = [&] {
    return failed(invalid(std::string(key) + " must be an array of at most " + std::to_string(max_items) +
                          " strings (or null)"),
                  Nullable());
  };
  if (!raw->is_array() || raw->get_array().size() > max_items) return wrong();
  std::vector<std::string> out;
  for (const json::value& item : raw->get_array()) {
    if (!item.is_string() || item.get_string().size() > max_bytes) return wrong();
    out.emplace_back(item.get_string());
  }
  return Nullable(std::move(out));
}

Result<std::optional<bool>> FieldReader::boolean(std::string_view key) {
  const json::value* v = find(key);
  if (!v) return std::optional<bool>();
  if (!v->is_bool()) return failed(invalid(std::string(key) + " must be true or false"), std::optional<bool>());
  return std::optional<bool>(v->get_bool());
}

Result<std::int64_t> FieldReader::amount(std::string_view key) {
  return required_integer(key, limits::kAmountMin, limits::kAmountMax);
}

Result<std::optional<std::int64_t>> FieldReader::optional_amount(std::string_view key) {
  return integer(key, limits::kAmountMin, limits::kAmountMax);
}

Result<std::optional<std::string>> FieldReader::string(std::string_view key, std::size_t max_bytes) {
  auto v = read_string(key, max_bytes);
  if (!v) return failed(v.error(), std::optional<std::string>());
  return v;
}

Result<std::string> FieldReader::required_string(std::string_view key, std::size_t max_bytes) {
  auto v = read_string(key, max_bytes);
  if (!v) return failed(v.error(), std::string());
  if (!*v) return failed(invalid(std::string(key) + " is required"), std::string());
  return std::move(**v);
}

Result<std::string> FieldReader::id(std::string_view key) {
  auto v = read_string(key, limits::kIdLengthMax + 1);
  if (!v) return failed(v.error(), std::string());
  if (!*v) return failed(invalid(std::string(key) + " is required"), std::string());
  if (auto s = check_id(**v, key); !s) return failed(s.error(), std::string());
  return std::move(**v);
}

Result<std::optional<std::string>> FieldReader::optional_id(std::string_view key) {
  auto v = string(key, limits::kIdLengthMax + 1);
  if (!v) return v.error();
  if (*v) {
    if (auto s = check_id(**v, key); !s) return failed(s.error(), std::optional<std::string>());
  }
  return std::move(v).value();
}

Result<std::optional<std::string>> FieldReader::object(std::string_view key, std::size_t max_bytes) {
  const json::value* v = find(key);
  if (!v) return std::optional<std::string>();
  if (!v->is_object()) return failed(invalid(std::string(key) + " must be a JSON object"), std::optional<std::string>());
  std::string text = json::serialize(*v);
  if (text.size() > max_bytes) {
    return failed(invalid(std::string(key) + " must be at most " + std::to_string(max_bytes) + " bytes"),
                  std::optional<std::string>());
  }
  return std::optional<std::string>(std::move(text));
}

Result<std::optional<std::string>> FieldReader::any(std::string_view key, std::size_t max_bytes) {
  const json::value* v = find(key);
  if (!v) return std::optional<std::string>();
  std::string text = json::serialize(*v);
  if (text.size() > max_bytes) {
    return failed(invalid(std::string(key) + " must be at most " + std::to_string(max_bytes) + " bytes"),
                  std::optional<std::string>());
  }
  return std::optional<std::string>(std::move(text));
}

Status FieldReader::finish() const {
  for (const auto& [key, value] : object_) {
    const std::string_view name(key);
    if (read_.count(name)) continue;
    if (read_.empty()) return invalid("unknown field " + std::string(name) + " (this call takes no fields)");
    return invalid("unknown field " + std::string(name) + did_you_mean(name, read_));
  }
  if (first_error_) return *first_error_;
  return ok_status();
}

void append_json_int(std::string& out, std::int64_t value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  TG_ASSERT(ec == std::errc());
  out.append(buf, static_cast<std::size_t>(end - buf));
}

void append_json_time(std::string& out, std::int64_t t_ms) {
  char buf[32];
  const std::size_t n = format_rfc3339_ms(t_ms, buf);
  out += '"';
  out.append(buf, n);
  out += '"';
}

namespace {

// Field writers: `first` tells whether a comma goes before the key.
struct ObjectWriter {
  std::string& out;
  bool first = true;
  explicit ObjectWriter(std::string& o) : out(o) { out += '{'; }
  ~ObjectWriter() { out += '}'; }
  void key(std::string_view k) {
    if (!first) out += ',';
    first = false;
    out += '"';
    out += k;  // keys are the API's own names: nothing to escape
    out += "\":";
  }
  void str(std::string_view k, std::string_view v) { key(k); append_json_string(out, v); }
  void num(std::string_view k, std::int64_t v) { key(k); append_json_int(out, v); }
  void time(std::string_view k, std::int64_t t_ms) { key(k); append_json_time(out, t_ms); }
  void null(std::string_view k) { key(k); out += "null"; }
  void boolean(std::string_view k, bool v) { key(k); out += v ? "true" : "false"; }
};

void append_settings(std::string& out, const AccountSettings& s) {
  ObjectWriter o(out);
  o.num("overdraft_limit", s.overdraft_limit);
  if (s.max_active_holds) o.num("max_active_holds", *s.max_active_holds); else o.null("max_active_holds");
  o.boolean("frozen", s.frozen);
  if (s.low_balance_threshold) o.num("low_balance_threshold", *s.low_balance_threshold); else o.null("low_balance_threshold");
}

}  // namespace

void append_json(std::string& out, const Account& a) {
  ObjectWriter o(out);
  o.str("account_id", a.account_id);
  o.num("available", a.balances.available);
  o.num("reserved", a.balances.reserved);
  o.num("used", a.balances.used);
  o.num("expired", a.balances.expired);
  o.num("purchased", a.balances.purchased);
  o.num("overdraft_limit", a.overdraft_limit);
  if (a.max_active_holds) o.num("max_active_holds", *a.max_active_holds); else o.null("max_active_holds");
  o.boolean("frozen", a.frozen);
  if (a.frozen_reason) o.str("frozen_reason", *a.frozen_reason); else o.null("frozen_reason");
  if (a.low_balance_threshold) o.num("low_balance_threshold", *a.low_balance_threshold); else o.null("low_balance_threshold");
  o.num("active_holds", a.active_holds);
  if (a.oldest_active_hold_age_ms) {
    o.num("oldest_active_hold_age_ms", *a.oldest_active_hold_age_ms);
  } else {
    o.null("oldest_active_hold_age_ms");
  }
  o.time("created_at", a.created_at_ms);
}

void append_json(std::string& out, const webhooks::Endpoint& e) {
  ObjectWriter o(out);
  o.str("endpoint_id", e.endpoint_id);
  o.str("url", e.url);
  if (e.event_types.empty()) {
    o.null("event_types");
  } else {
    o.key("event_types");
    out += '[';
    for (std::size_t i = 0; i < e.event_types.size(); ++i) {
      if (i > 0) out += ',';
      append_json_string(out, e.event_types[i]);
    }
    out += ']';
  }
  if (e.account_id) o.str("account_id", *e.account_id); else o.null("account_id");
  o.str("description", e.description);
  o.str("status", webhooks::endpoint_status_name(e.status));
  if (e.previous_secret_until_ms) {
    o.time("previous_secret_expires_at", *e.previous_secret_until_ms);
  } else {
    o.null("previous_secret_expires_at");
  }
  o.time("created_at", e.created_at_ms);
  o.time("updated_at", e.updated_at_ms);
  o.num("delivery_cursor", e.delivery_cursor);
  if (e.failing_since_ms) o.time("failing_since", *e.failing_since_ms); else o.null("failing_since");
}

void append_json(std::string& out, const webhooks::Delivery& d) {
  ObjectWriter o(out);
  o.str("webhook_id", webhooks::webhook_id(d.event_id));
  o.str("endpoint_id", d.endpoint_id);
  o.num("event_id", d.event_id);
  o.str("event_type", d.event_type);
  o.str("account_id", d.account_id);
  o.time("event_at", d.event_at_ms);
  o.str("status", webhooks::delivery_status_name(d.status));
  o.num("attempts", d.attempts);
  o.time("last_attempt_at", d.last_attempt_at_ms);
  if (d.last_status_code) o.num("last_status_code", *d.last_status_code); else o.null("last_status_code");
  if (d.last_error.empty()) o.null("last_error"); else o.str("last_error", d.last_error);
  if (d.next_attempt_at_ms) o.time("next_attempt_at", *d.next_attempt_at_ms); else o.null("next_attempt_at");
  o.time("created_at", d.created_at_ms);
}

std::string webhook_body(const Event& e) {
  std::string out = "{\"type\":";
  append_json_string(out, event_type_name(e.type));
  out += ",\"timestamp\":";
  append_json_time(out, e.at_ms);
  out += ",\"data\":";
  append_json(out, e);
  out += '}';
  return out;
}

// A key as listed: never its secret nor its hash. Times that never happened are null.
void append_json(std::string& out, const KeySummary& k) {
  ObjectWriter o(out);
  o.str("key_id", k.key_id);
  if (k.account_id) o.str("account_id", *k.account_id); else o.null("account_id");
  o.str("kind", k.account_id ? "account" : "admin");
  o.key("scopes");
  out += '[';
  for (std::string_view name : scope_names(k.scopes)) {
    if (out.back() != '[') out += ',';
    append_json_string(out, name);
  }
  out += ']';
  if (k.name) o.str("name", *k.name); else o.null("name");
  if (k.expires_at_ms) o.time("expires_at", *k.expires_at_ms); else o.null("expires_at");
  o.time("created_at", k.created_at_ms);
  if (k.last_used_at_ms) o.time("last_used_at", *k.last_used_at_ms); else o.null("last_used_at");
  o.boolean("revoked", k.revoked_at_ms.has_value());
  if (k.revoked_at_ms) o.time("revoked_at", *k.revoked_at_ms); else o.null("revoked_at");
}

void append_json(std::string& out, const TransferRecord& t) {
  ObjectWriter o(out);
  o.str("reference", t.transfer.reference);
  o.str("account_id", t.transfer.account_id);
  o.str("kind", t.transfer.kind == EventType::credited ? "credit" : "debit");
  o.num("amount", t.transfer.amount);
  o.num("event_id", t.event.event_id);
  o.time("at", t.event.at_ms);
}

namespace {
// A hold's fields, and what it was priced at (`priced`: nullptr for a hold made by amount).
void append_hold(std::string& out, const Hold& h, const prices::PricedHold* priced);
}  // namespace

void append_json(std::string& out, const Hold& h) { append_hold(out, h, nullptr); }
void append_json(std::string& out, const PricedHoldView& v) { append_hold(out, v.hold, v.priced ? &*v.priced : nullptr); }

void append_json(std::string& out, const HoldCheck& c) {
  ObjectWriter o(out);
  o.boolean("allowed", !c.refusal);
  o.str("account_id", c.account_id);
  o.num("available", c.available);
  o.num("requested", c.requested);
  if (c.price) {
    o.str("feature", c.price->feature);
    o.num("quantity", c.quantity);
    o.num("unit_price", c.price->credits_per_unit);
  }
  if (c.refusal) {
    o.str("reason", code_name(c.refusal->code));
    o.str("detail", c.refusal->detail);
  }
}

void append_json(std::string& out, const prices::Price& p) {
  ObjectWriter o(out);
  o.str("feature", p.feature);
  o.num("credits_per_unit", p.credits_per_unit);
  o.num("version", p.version);
  o.time("updated_at", p.updated_at_ms);
}

namespace {
void append_hold(std::string& out, const Hold& h, const prices::PricedHold* priced) {
  ObjectWriter o(out);
  o.str("hold_id", h.hold_id);
  o.str("account_id", h.account_id);
  o.str("request_id", h.request_id);
  o.num("amount", h.amount);
  o.num("committed_amount", h.committed_amount);
  o.num("refunded_amount", h.refunded_amount);
  o.str("status", hold_status_name(h.status));
  if (h.late_outcome != LateOutcome::none) o.str("late_outcome", late_outcome_name(h.late_outcome));
  o.time("created_at", h.created_at_ms);
  o.time("expires_at", h.expires_at_ms);
  if (h.closed_at_ms) o.time("closed_at", *h.closed_at_ms);
  if (h.release_reason) o.str("release_reason", *h.release_reason);
  if (priced != nullptr) {
    o.str("feature", priced->feature);
    o.num("quantity", priced->quantity);
    o.num("unit_price", priced->unit_price);
    o.num("price_version", priced->price_version);
  }
  o.key("lots");
  out += '[';
  for (std::size_t i = 0; i < h.lots.size(); ++i) {
    if (i > 0) out += ',';
    ObjectWriter d(out);
    d.str("lot_id", lot_id(h.lots[i].lot_seq));
    d.num("amount", h.lots[i].amount);
  }
  out += ']';
  o.key("metadata");
  const bool object_text = h.metadata_json.size() >= 2 && h.metadata_json.front() == '{' && h.metadata_json.back() == '}';
  out += object_text ? std::string_view(h.metadata_json) : std::string_view("{}");
}
}  // namespace

void append_json(std::string& out, const jobs::Job& j) {
  ObjectWriter o(out);
  o.str("client_request_id", j.client_request_id);
  o.str("account_id", j.account_id);
  o.num("cost", j.cost);
  o.str("provider", j.provider);
  o.str("status", jobs::job_status_name(j.status));
  o.str("hold_id", j.hold_id);
  o.num("attempts", j.attempts);
  if (j.result_json) {
    o.key("result");
    out += *j.result_json;  // stored as the provider's result was serialized (valid JSON)
  }
  if (j.error) o.str("error", *j.error);
  o.boolean("charged", j.charged);
  o.time("created_at", j.created_at_ms);
  o.time("updated_at", j.updated_at_ms);
}

void append_json(std::string& out, const jobs::JobEntry& e) {
  ObjectWriter o(out);
  o.time("at", e.at_ms);
  o.str("kind", e.kind);
  if (e.attempt) o.num("attempt", *e.attempt);
  o.str("detail", e.detail);
}

void append_json(std::string& out, const Event& e) {
  ObjectWriter o(out);
  o.num("event_id", e.event_id);
  o.str("account_id", e.account_id);
  o.str("type", event_type_name(e.type));
  o.num("amount", e.amount);
  if (e.hold_id) o.str("hold_id", *e.hold_id);
  if (e.job_id) o.str("job_id", *e.job_id);
  if (e.reference) o.str("reference", *e.reference);
  if (e.reason) o.str("reason", *e.reason);
  if (e.settings) {
    o.key("settings");
    append_settings(out, *e.settings);
  }
  if (e.expires_at_ms) o.time("expires_at", *e.expires_at_ms);
  if (e.lot_seq) o.str("lot_id", lot_id(*e.lot_seq));
  o.time("at", e.at_ms);
  o.num("available_after", e.available_after);
  o.num("reserved_after", e.reserved_after);
  o.num("used_after", e.used_after);
  o.num("expired_after", e.expired_after);
}

void append_json(std::string& out, const lots::LotView& v) {
  const Lot& l = v.lot;
  ObjectWriter o(out);
  o.str("lot_id", lot_id(l.seq));
  if (l.reference) {
    o.str("reference", *l.reference);
  } else {
    o.null("reference");
  }
  o.str("category", lot_category_name(l.terms.category));
  o.num("priority", l.terms.priority);
  o.num("amount", l.amount);
  o.num("available", l.available);
  o.num("reserved", l.reserved);
  o.num("used", l.used);
  o.num("expired", l.expired);
  if (l.terms.expires_at_ms) o.time("expires_at", *l.terms.expires_at_ms);
  o.time("created_at", l.created_at_ms);
  o.str("status", lots::lot_status_name(v.status));
}

void append_json(std::string& out, const AuditReport& r) {
  ObjectWriter o(out);
  o.num("accounts_checked", r.accounts_checked);
  o.key("violations");
  out += '[';
  for (std::size_t i = 0; i < r.violations.size(); ++i) {
    if (i > 0) out += ',';
    ObjectWriter v(out);
    v.str("account_id", r.violations[i].account_id);
    v.str("message", r.violations[i].message);
  }
  out += ']';
}

}  // namespace tollgate::http
