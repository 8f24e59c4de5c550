// The provider contract's decisions (provider_protocol.h).
#include "jobs/provider_protocol.h"

#include <algorithm>

#include <boost/json.hpp>

#include "core/limits.h"
#include "core/result.h"
#include "tollgate/client.h"

namespace tollgate::jobs {
namespace json = boost::json;

namespace {

// The body parsed as a JSON object, or nullopt.
std::optional<json::object> object_of(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

std::string status_text(const Exchange& e) {
  switch (e.kind) {
    case Exchange::Kind::answered: return "HTTP " + std::to_string(e.status);
    case Exchange::Kind::timed_out: return "no answer within the time-out";
    case Exchange::Kind::connection_lost: return "the connection was lost";
    case Exchange::Kind::not_connected: return "the provider could not be reached";
  }
  TG_ASSERT(false);
}

// The outcome is unknown (or nothing was sent): ask, send again, or give up.
Decision unknown(const Exchange& e, bool has_status_url, int attempt, int attempts_max, std::string seen) {
  const bool never_sent = e.kind == Exchange::Kind::not_connected;
  if (has_status_url && !never_sent) return Decision{Next::ask_status, "", seen + ": outcome unknown, asking the status URL"};
  if (attempt < attempts_max) return Decision{Next::send_again, "", seen + ": sending again with the same key"};
  return Decision{Next::fail, "",
                  seen + " after " + std::to_string(attempt) + " attempt" + (attempt == 1 ? "" : "s") + ": giving up"};
}

}  // namespace

std::string request_body(std::string_view client_request_id, std::string_view input_json) {
  json::value input = json::parse(input_json);  // stored by tollgate after validation: a bug if not JSON
  return json::serialize(json::object{{"id", client_request_id}, {"input", std::move(input)}});
}

std::string status_url_for(std::string_view url_template, std::string_view client_request_id) {
  constexpr std::string_view kId = "{id}";
  const std::string id = client::Client::encode_component(client_request_id);
  std::string out;
  std::size_t from = 0;
  for (std::size_t at = url_template.find(kId); at != std::string_view::npos; at = url_template.find(kId, from)) {
    out.append(url_template.substr(from, at - from));
    out += id;
    from = at + kId.size();
  }
  out.append(url_template.substr(from));
  return out;
}

Decision after_send(const Exchange& e, bool has_status_url, int attempt, int attempts_max) {
  TG_ASSERT(attempt >= 1 && attempts_max >= 1 && attempt <= attempts_max);
  const std::string seen = status_text(e);
  if (e.kind == Exchange::Kind::answered && e.status >= 200 && e.status < 300) {
    if (auto body = object_of(e.body)) {
      if (const json::value* result = body->if_contains("result"); result != nullptr && result->is_object()) {
        return Decision{Next::complete, json::serialize(*result), seen + ": completed"};
      }
    }
    // It answered success, so it may have done (and billed) the work: not a failure to release.
    return unknown(e, has_status_url, attempt, attempts_max, seen + " without a readable result");
  }
  if (e.kind == Exchange::Kind::answered && e.status >= 400 && e.status < 500) {
    return Decision{Next::fail, "", seen + ": the provider refused the request (not charged)"};
  }
  return unknown(e, has_status_url, attempt, attempts_max, seen);
}

Decision after_status(const Exchange& e, int attempt, int attempts_max) {
  TG_ASSERT(attempt >= 1 && attempts_max >= 1 && attempt <= attempts_max);
  const std::string seen = "status: " + status_text(e);
  if (e.kind == Exchange::Kind::answered && e.status == 404) {
    if (attempt < attempts_max) return Decision{Next::send_again, "", seen + ": never received, sending again"};
    return Decision{Next::fail, "", seen + ": never received, and no attempts left"};
  }
  if (e.kind == Exchange::Kind::answered && e.status == 200) {
    if (auto body = object_of(e.body)) {
      const json::value* status = body->if_contains("status");
      if (status != nullptr && status->is_string()) {
        const json::string& s = status->get_string();
        const json::value* result = body->if_contains("result");
        if (s == "completed" && result != nullptr && result->is_object()) {
          return Decision{Next::complete, json::serialize(*result), seen + ": completed"};
        }
        if (s == "failed") {
          const json::value* error = body->if_contains("error");
          return Decision{Next::fail, "",
                          seen + ": failed" + (error != nullptr ? " (" + json::serialize(*error) + ")" : std::string())};
        }
        if (s == "running") return Decision{Next::ask_status, "", seen + ": still running"};
      }
    }
    return Decision{Next::ask_status, "", seen + " with an unreadable answer: asking again"};
  }
  // 5xx, another status, a time-out: the status URL does not know yet.
  return Decision{Next::ask_status, "", seen + ": asking again"};
}

std::chrono::milliseconds status_poll_delay(int question, double jitter) {
  TG_ASSERT(question >= 1 && jitter >= 0.0 && jitter < 1.0);
  std::int64_t ms = limits::kStatusPollFirstMs;
  for (int i = 1; i < question && ms < limits::kStatusPollMaxMs; ++i) ms *= 2;
  ms = std::min(ms, limits::kStatusPollMaxMs);
  return std::chrono::milliseconds(ms / 2 + static_cast<std::int64_t>(static_cast<double>(ms / 2) * jitter));
}

}  // namespace tollgate::jobs
