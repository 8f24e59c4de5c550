// tollgate http: strict JSON in (Boost.JSON), JSON out written straight into the answer's string.
//
// Reading is strict, so that a typo never silently changes what happens: a body must be a JSON
// object; an unknown field, a wrong type, a fractional or out-of-range amount is an invalid_request
// whose detail names the field. Amounts must be JSON integers (1.0, "1" and 1e3 are refused).
//
// Thread safety: stateless functions; a FieldReader belongs to one thread.
#pragma once

#include <boost/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.h"  // append_json_string
#include "core/model.h"
#include "jobs/job.h"
#include "core/result.h"
#include "prices/price_batch.h"
#include "ledger/ledger.h"  // the values the ledger answers with (pages, audit reports, keys)

namespace tollgate::http {

namespace json = boost::json;

// Parses a request body into an object. An empty body is an empty object.
Result<json::object> parse_object(std::string_view body);

// Reads the fields of one request object. Every read names a field the route accepts, so by
// finish() the reader knows them all; finish() then answers, in this order: an unknown field
// ("unknown field amout (did you mean amount?)", the suggestion among the fields read), else the
// first read that failed (a missing required field, a wrong type, a value out of range), else ok.
// So that a misspelled field is reported as such rather than as the missing field it was meant to
// be, a read that fails while the body still holds fields not read does not fail at once: it keeps
// its error and returns a placeholder (absent, 0 or "") so that the handler reads on. A handler
// therefore calls finish() after its reads and uses no value before finish() succeeded. (A read
// that fails when every field of the body has been read fails at once: nothing can come before.)
class FieldReader {
 public:
  explicit FieldReader(const json::object& object) : object_(object) {}

  // An integer in [min, max]; `what` describes the range in the error.
  Result<std::optional<std::int64_t>> integer(std::string_view key, std::int64_t min, std::int64_t max);
  Result<std::int64_t> required_integer(std::string_view key, std::int64_t min, std::int64_t max);
  // Where null means something (PATCH: "no limit"): unset when absent, set to nullopt for null.
  Result<std::optional<std::optional<std::int64_t>>> nullable_integer(std::string_view key, std::int64_t min,
                                                                      std::int64_t max);
  Result<std::optional<bool>> boolean(std::string_view key);
  // An array of at most `max_items` strings of at most `max_bytes` each, or null: unset when absent,
  // set to nullopt for null (PATCH: "back to the default").
  Result<std::optional<std::optional<std::vector<std::string>>>> nullable_strings(std::string_view key,
                                                                                  std::size_t max_items,
                                                                                  std::size_t max_bytes);
  // An amount of credits: an integer from 1 to 2^53 − 1.
  Result<std::int64_t> amount(std::string_view key);
  Result<std::optional<std::int64_t>> optional_amount(std::string_view key);
  Result<std::optional<std::string>> string(std::string_view key, std::size_t max_bytes);
  Result<std::string> required_string(std::string_view key, std::size_t max_bytes);
  // A client-chosen id: 1–128 of [A-Za-z0-9._:@-].
  Result<std::string> id(std::string_view key);
  Result<std::optional<std::string>> optional_id(std::string_view key);
  // A JSON object, returned serialized; unset when absent.
  Result<std::optional<std::string>> object(std::string_view key, std::size_t max_bytes);
  // Any JSON value (a job's input), returned serialized; unset when absent.
  Result<std::optional<std::string>> any(std::string_view key, std::size_t max_bytes);
  Status finish() const;

 private:
  const json::value* find(std::string_view key);
  // A failed read: `error` at once when nothing unread is left to report first, else kept.
  template <typename T>
  Result<T> failed(Error error, T placeholder);
  Result<std::optional<std::int64_t>> read_integer(std::string_view key, std::int64_t min, std::int64_t max);
  Result<std::optional<std::string>> read_string(std::string_view key, std::size_t max_bytes);

  const json::object& object_;
  std::set<std::string, std::less<>> read_;
  std::optional<Error> first_error_;  // of the reads that failed, the first
};

// Appends the JSON form of a value to `out`: the API's field names and order, strings escaped as
// Boost.JSON escapes them, times as RFC 3339 strings. No intermediate tree: an answer is one string
// grown in place. A hold's metadata is inserted as stored — it is kept as Boost.JSON serialized it
// at the edge (FieldReader::object), so it is valid JSON.
void append_json(std::string& out, const Account& account);
void append_json(std::string& out, const Hold& hold);
// A hold with what it was priced at when it was reserved by feature (prices/price_batch.h): the
// hold's fields and feature, quantity, unit_price and price_version.
struct PricedHoldView {
  Hold hold;
  std::optional<prices::PricedHold> priced;  // unset: a hold made by amount
};
void append_json(std::string& out, const PricedHoldView& view);
void append_json(std::string& out, const prices::Price& price);
// The answer of POST /v1/holds/check: what a reservation would meet now.
struct HoldCheck {
  std::string account_id;
  std::int64_t available = 0;  // as readers see it now
  std::int64_t requested = 0;
  std::optional<prices::Price> price;  // a check by feature: its current price
  std::int64_t quantity = 0;           // and the units asked for
  std::optional<Error> refusal;        // unset: allowed
};
void append_json(std::string& out, const HoldCheck& check);
void append_json(std::string& out, const Event& event);
void append_json(std::string& out, const lots::LotView& lot);
void append_json(std::string& out, const jobs::Job& job);
void append_json(std::string& out, const jobs::JobEntry& entry);
void append_json(std::string& out, const KeySummary& key);
void append_json(std::string& out, const TransferRecord& transfer);
void append_json(std::string& out, const AuditReport& report);
// A webhook endpoint as read: never its secret (nor the previous one), only until when the previous
// one still signs. event_types and account_id are null when the endpoint takes every one.
void append_json(std::string& out, const webhooks::Endpoint& endpoint);
// One event's delivery to one endpoint (api.md: GET …/deliveries).
void append_json(std::string& out, const webhooks::Delivery& delivery);
// The body of an event's delivery (api.md, Webhooks): {"type", "timestamp" (the event's time), "data" (the event)}.
std::string webhook_body(const Event& event);
void append_json_int(std::string& out, std::int64_t value);
void append_json_time(std::string& out, std::int64_t t_ms);  // "2026-01-01T00:00:00.000Z"

}  // namespace tollgate::http
