// Test support for the credit-lot tests over HTTP (lots_*_test.cc): times as the API writes them,
// a lot as GET /v1/accounts/{id}/lots answers it, every lot of an account (paged), an account's
// events of one type, and the audit. Black-box: everything goes through the HTTP API.
//
// Header-only (see http_test_support.h): everything here is `inline`, in its own namespace so that
// the unity build may put these files beside any other of tests/http.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "http/http_test_support.h"

namespace tollgate::httptest::lotstest {

// The test's wall clock, in ms since the epoch: the server (and a PostgreSQL server on this machine)
// reads the same one.
inline std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline void sleep_until_wall_ms(std::int64_t t_ms) {
  const std::int64_t left = t_ms - wall_ms();
  if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(left));
}

// "2026-01-01T00:00:00.000Z"
inline std::string rfc3339(std::int64_t t_ms) { return format_rfc3339_ms(t_ms); }

// A lot as GET /v1/accounts/{id}/lots shows it.
struct LotView {
  std::string lot_id;
  std::optional<std::string> reference;  // null for the lot an upgrade made
  std::string category;
  std::int64_t priority = -1;
  std::int64_t amount = -1;
  std::int64_t available = -1;
  std::int64_t reserved = -1;
  std::int64_t used = -1;
  std::int64_t expired = -1;
  std::optional<std::int64_t> expires_at_ms;  // absent: never
  bool has_created_at = false;
  std::string status;

  bool operator==(const LotView&) const = default;
};

inline std::ostream& operator<<(std::ostream& out, const LotView& l) {
  out << "{" << l.lot_id << " ref=" << (l.reference ? *l.reference : "null") << " " << l.category << " p" << l.priority
      << " amount=" << l.amount << " available=" << l.available << " reserved=" << l.reserved << " used=" << l.used
      << " expired=" << l.expired << " expires_at=" << (l.expires_at_ms ? rfc3339(*l.expires_at_ms) : "none") << " "
      << l.status << "}";
  return out;
}
inline void PrintTo(const LotView& l, std::ostream* out) { *out << l; }

inline LotView lot_view(const json::object& o) {
  LotView l;
  l.lot_id = jstr(o, "lot_id");
  if (auto* r = o.if_contains("reference"); r && r->is_string()) {
    l.reference = std::string(r->as_string());
  } else if (!r || !r->is_null()) {
    ADD_FAILURE() << "reference is neither a string nor null in " << json::serialize(o);
  }
  l.category = jstr(o, "category");
  l.priority = jint(o, "priority");
  l.amount = jint(o, "amount");
  l.available = jint(o, "available");
  l.reserved = jint(o, "reserved");
  l.used = jint(o, "used");
  l.expired = jint(o, "expired");
  if (auto* e = o.if_contains("expires_at"); e && !e->is_null()) {
    const auto at = e->is_string() ? parse_rfc3339_ms(e->as_string()) : std::nullopt;
    if (!at) ADD_FAILURE() << "expires_at is not an RFC 3339 time in " << json::serialize(o);
    l.expires_at_ms = at;
  }
  if (auto* c = o.if_contains("created_at"); c && c->is_string() && parse_rfc3339_ms(c->as_string())) {
    l.has_created_at = true;
  } else {
    ADD_FAILURE() << "created_at is not an RFC 3339 time in " << json::serialize(o);
  }
  l.status = jstr(o, "status");
  return l;
}

// Every lot of `account` in the order the server lists them (pages of `limit`, following
// starting_after while has_more), or nullopt (and a failure) if a page was not 200.
inline std::optional<std::vector<LotView>> all_lots(HttpClient& client, const std::string& account,
                                                    const std::string& status = "", int limit = 1000) {
  std::vector<LotView> out;
  std::string after;
  for (int page = 0; page < 10'000; ++page) {
    std::string target = "/v1/accounts/" + account + "/lots?limit=" + std::to_string(limit);
    if (!status.empty()) target += "&status=" + status;
    if (!after.empty()) target += "&starting_after=" + after;
    const HttpResponse r = client.get(target);
    if (r.status != 200) {
      ADD_FAILURE() << "GET " << target << " → " << r;
      return std::nullopt;
    }
    const json::value* lots = r.object().if_contains("lots");
    const json::value* more = r.object().if_contains("has_more");
    if (!lots || !lots->is_array() || !more || !more->is_bool()) {
      ADD_FAILURE() << "GET " << target << ": no lots array or has_more in " << r;
      return std::nullopt;
    }
    for (const json::value& v : lots->as_array()) out.push_back(lot_view(v.as_object()));
    if (!more->as_bool()) return out;
    if (lots->as_array().empty()) {
      ADD_FAILURE() << "GET " << target << ": has_more with an empty page";
      return std::nullopt;
    }
    after = out.back().lot_id;
  }
  ADD_FAILURE() << "paging " << account << "'s lots did not end";
  return std::nullopt;
}

// Every event of `account` of type `type` (all of them when `type` is empty), oldest first.
inline std::vector<json::object> account_events(HttpClient& client, const std::string& account,
                                                const std::string& type = "") {
  std::vector<json::object> out;
  std::int64_t after = 0;
  for (int page = 0; page < 10'000; ++page) {
    const HttpResponse r =
        client.get("/v1/accounts/" + account + "/events?limit=1000&after=" + std::to_string(after));
    if (r.status != 200) {
      ADD_FAILURE() << "events of " << account << ": " << r;
      return out;
    }
    const json::array& events = r.object().at("events").as_array();
    for (const json::value& e : events) {
      if (type.empty() || jstr(e.as_object(), "type") == type) out.push_back(e.as_object());
    }
    if (events.empty()) return out;
    after = jint(r.object(), "next_after");
  }
  return out;
}

// GET /v1/audit (of one account, or of all): success if it answered 200 with no violation.
inline ::testing::AssertionResult audit_clean(HttpClient& admin, const std::string& account = "") {
  const HttpResponse r = admin.get(account.empty() ? std::string("/v1/audit") : "/v1/audit?account_id=" + account);
  if (r.status != 200) return ::testing::AssertionFailure() << "GET /v1/audit → " << r;
  const json::value* violations = r.object().if_contains("violations");
  if (!violations || !violations->is_array()) return ::testing::AssertionFailure() << "no violations array: " << r;
  if (!violations->as_array().empty()) return ::testing::AssertionFailure() << "the audit found violations: " << r;
  return ::testing::AssertionSuccess() << r.body;
}

// A hold's `lots` (its draw: [{lot_id, amount}], in draw order) as pairs; a pair with amount -1 says
// what was malformed.
using Draws = std::vector<std::pair<std::string, std::int64_t>>;
inline Draws hold_draws(const json::object& hold) {
  Draws out;
  auto* lots = hold.if_contains("lots");
  if (!lots || !lots->is_array()) return {{"(no lots array)", -1}};
  for (const json::value& v : lots->as_array()) {
    if (!v.is_object()) return {{"(not an object)", -1}};
    const json::object& d = v.as_object();
    auto* id = d.if_contains("lot_id");
    auto* amount = d.if_contains("amount");
    out.emplace_back(id && id->is_string() ? std::string(id->as_string()) : "(no lot_id)",
                     amount && amount->is_int64() ? amount->as_int64() : -1);
  }
  return out;
}

// The account's balances and the identity available + reserved + used + expired == purchased.
struct AccountView {
  std::int64_t available = 0, reserved = 0, used = 0, expired = 0, purchased = 0;
  bool operator==(const AccountView&) const = default;
};
inline std::ostream& operator<<(std::ostream& out, const AccountView& a) {
  return out << "{available=" << a.available << " reserved=" << a.reserved << " used=" << a.used
             << " expired=" << a.expired << " purchased=" << a.purchased << "}";
}
inline void PrintTo(const AccountView& a, std::ostream* out) { *out << a; }

inline AccountView account_view(const json::object& o) {
  return {jint(o, "available"), jint(o, "reserved"), jint(o, "used"), jint(o, "expired"), jint(o, "purchased")};
}

inline ::testing::AssertionResult identity_holds(const AccountView& a) {
  if (a.available + a.reserved + a.used + a.expired == a.purchased) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "available + reserved + used + expired != purchased: " << a;
}

inline ::testing::AssertionResult lot_identity_holds(const LotView& l) {
  if (l.available < 0 || l.reserved < 0 || l.used < 0 || l.expired < 0) {
    return ::testing::AssertionFailure() << "a negative figure: " << l;
  }
  if (l.available + l.reserved + l.used + l.expired != l.amount) {
    return ::testing::AssertionFailure() << "available + reserved + used + expired != amount: " << l;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tollgate::httptest::lotstest
