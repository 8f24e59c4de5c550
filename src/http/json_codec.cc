#include "http/json_codec.h"

#include "core/checked.h"
#include "core/clock.h"
#include "core/limits.h"

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

Result<std::optional<std::int64_t>> FieldReader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
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

Result<std::int64_t> FieldReader::required_integer(std::string_view key, std::int64_t min, std::int64_t max) {
  auto v = integer(key, min, max);
  if (!v) return v.error();
  if (!*v) return invalid(std::string(key) + " is required");
  return **v;
}

Result<std::int64_t> FieldReader::amount(std::string_view key) {
  return required_integer(key, limits::kAmountMin, limits::kAmountMax);
}

Result<std::optional<std::int64_t>> FieldReader::optional_amount(std::string_view key) {
  return integer(key, limits::kAmountMin, limits::kAmountMax);
}

Result<std::optional<std::string>> FieldReader::string(std::string_view key, std::size_t max_bytes) {
  const json::value* v = find(key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return invalid(std::string(key) + " must be a string");
  const json::string& s = v->get_string();
  if (s.size() > max_bytes) return invalid(std::string(key) + " must be at most " + std::to_string(max_bytes) + " bytes");
  return std::optional<std::string>(std::string(s));
}

Result<std::string> FieldReader::required_string(std::string_view key, std::size_t max_bytes) {
  auto v = string(key, max_bytes);
  if (!v) return v.error();
  if (!*v) return invalid(std::string(key) + " is required");
  return std::move(**v);
}

Result<std::string> FieldReader::id(std::string_view key) {
  auto v = required_string(key, limits::kIdLengthMax + 1);
  if (!v) return v.error();
  if (auto s = check_id(*v, key); !s) return s.error();
  return std::move(v).value();
}

Result<std::optional<std::string>> FieldReader::object(std::string_view key, std::size_t max_bytes) {
  const json::value* v = find(key);
  if (!v) return std::optional<std::string>();
  if (!v->is_object()) return invalid(std::string(key) + " must be a JSON object");
  std::string text = json::serialize(*v);
  if (text.size() > max_bytes) return invalid(std::string(key) + " must be at most " + std::to_string(max_bytes) + " bytes");
  return std::optional<std::string>(std::move(text));
}

Status FieldReader::finish() const {
  for (const auto& [key, value] : object_) {
    if (!read_.count(std::string_view(key))) return invalid("unknown field " + std::string(key));
  }
  return ok_status();
}

json::object to_json(const Account& a) {
  json::object o;
  o["account_id"] = a.account_id;
  o["available"] = a.balances.available;
  o["reserved"] = a.balances.reserved;
  o["used"] = a.balances.used;
  o["purchased"] = a.balances.purchased;
  o["overdraft_limit"] = a.overdraft_limit;
  o["max_active_holds"] = a.max_active_holds ? json::value(*a.max_active_holds) : json::value(nullptr);
  o["active_holds"] = a.active_holds;
  o["oldest_active_hold_age_ms"] =
      a.oldest_active_hold_age_ms ? json::value(*a.oldest_active_hold_age_ms) : json::value(nullptr);
  o["created_at"] = format_rfc3339_ms(a.created_at_ms);
  return o;
}

json::object to_json(const Hold& h) {
  json::object o;
  o["hold_id"] = h.hold_id;
  o["account_id"] = h.account_id;
  o["request_id"] = h.request_id;
  o["amount"] = h.amount;
  o["committed_amount"] = h.committed_amount;
  o["status"] = hold_status_name(h.status);
  if (h.late_outcome != LateOutcome::none) o["late_outcome"] = late_outcome_name(h.late_outcome);
  o["created_at"] = format_rfc3339_ms(h.created_at_ms);
  o["expires_at"] = format_rfc3339_ms(h.expires_at_ms);
  if (h.closed_at_ms) o["closed_at"] = format_rfc3339_ms(*h.closed_at_ms);
  boost::system::error_code ec;
  json::value metadata = json::parse(h.metadata_json, ec);
  o["metadata"] = ec ? json::value(json::object()) : std::move(metadata);
  return o;
}

json::object to_json(const Event& e) {
  json::object o;
  o["event_id"] = e.event_id;
  o["account_id"] = e.account_id;
  o["type"] = event_type_name(e.type);
  o["amount"] = e.amount;
  if (e.hold_id) o["hold_id"] = *e.hold_id;
  if (e.job_id) o["job_id"] = *e.job_id;
  if (e.reference) o["reference"] = *e.reference;
  o["at"] = format_rfc3339_ms(e.at_ms);
  o["available_after"] = e.available_after;
  o["reserved_after"] = e.reserved_after;
  o["used_after"] = e.used_after;
  return o;
}

json::object to_json(const AuditReport& r) {
  json::object o;
  o["accounts_checked"] = r.accounts_checked;
  json::array violations;
  for (const auto& v : r.violations) violations.push_back(json::object{{"account_id", v.account_id}, {"message", v.message}});
  o["violations"] = std::move(violations);
  return o;
}



}  // namespace tollgate::http
