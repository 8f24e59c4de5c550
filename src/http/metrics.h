// tollgate http: the counters and histograms behind GET /metrics (Prometheus text format 0.0.4).
//
// Labels are bounded: routes are templates ("POST /v1/holds/{hold_id}/commit"), never ids, and
// statuses are the HTTP codes the server answers — no per-account label explosion. Counting a
// request is a few relaxed atomic increments in a fixed table (route × status): no lock, no
// allocation on the request path.
//
// Every family on /metrics is written through an Exposition (below): a family's # HELP and # TYPE
// come from its metrics::Family (core/counters.h), once, and a counter kept in a field table (the
// edge's: kEdgeFields; the ledger's: ledger.h, group_commit.h) is shown from that table.
//
// Thread safety: Metrics: every method may be called from any thread. Exposition: one scrape's, on
// one thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/counters.h"

namespace tollgate::http {

// What the edge counts besides requests: connections and authentication.
struct EdgeCounts {
  std::uint64_t connections_rejected = 0;    // over the connection limit
  std::uint64_t tls_handshake_failures = 0;  // TLS handshakes that failed (plain HTTP, old versions)
  std::uint64_t auth_failures = 0;   // requests refused 401: missing, malformed, unknown or revoked key
  std::uint64_t auth_throttled = 0;  // requests refused 429 too_many_failed_auth (api.h)
  // Payment providers' events (routes_payments.cc): refused signatures by provider, and what each
  // signed event did — by what tollgate made of it (payment, refund, dispute, other) and outcome.
  std::uint64_t payment_signature_failures_stripe = 0;
  std::uint64_t payment_signature_failures_webhook = 0;
  std::uint64_t payment_credited = 0;         // a payment credited
  std::uint64_t payment_replayed = 0;         // a payment's event again: nothing moved
  std::uint64_t payment_pending = 0;          // a checkout not paid yet (its async event follows)
  std::uint64_t payment_not_found = 0;        // the account does not exist: 404, the provider retries
  std::uint64_t refund_applied = 0;           // a refund took credits back (or owed none more)
  std::uint64_t refund_replayed = 0;
  std::uint64_t refund_not_found = 0;         // no such payment (yet): 404, the provider retries
  std::uint64_t dispute_applied = 0;          // an account frozen for a dispute
  std::uint64_t dispute_replayed = 0;
  std::uint64_t dispute_not_found = 0;
  std::uint64_t payment_event_ignored = 0;    // an event type tollgate does not act on
  std::uint64_t payment_event_refused = 0;    // a signed event refused otherwise (bad body, mismatch, unavailable)
};

inline constexpr std::string_view kPaymentSignatureFailuresHelp =
    "Payment provider events refused 400 invalid_signature: a missing, malformed, stale or unknown signature.";
inline constexpr std::string_view kPaymentEventsHelp =
    "Signed payment provider events, by what tollgate made of them (payment, refund, dispute, other) and what "
    "happened.";

// Where each counter of EdgeCounts is kept and shown (core/counters.h).
inline constexpr auto kEdgeFields = std::to_array<metrics::Field<EdgeCounts>>({
    {&EdgeCounts::connections_rejected,
     {"tollgate_http_connections_rejected_total", metrics::Type::counter, "Connections closed: over the limit."},
     ""},
    {&EdgeCounts::tls_handshake_failures,
     {"tollgate_tls_handshake_failures_total", metrics::Type::counter,
      "TLS handshakes that failed: plain HTTP on the TLS port, an old protocol version, no common cipher."},
     ""},
    {&EdgeCounts::auth_failures,
     {"tollgate_auth_failures_total", metrics::Type::counter,
      "Requests refused 401: a missing, malformed, unknown or revoked key."},
     ""},
    {&EdgeCounts::auth_throttled,
     {"tollgate_auth_throttled_total", metrics::Type::counter,
      "Requests refused 429 too_many_failed_auth: their address failed authentication too often."},
     ""},
    {&EdgeCounts::payment_signature_failures_stripe,
     {"tollgate_payment_signature_failures_total", metrics::Type::counter, kPaymentSignatureFailuresHelp},
     "provider=\"stripe\""},
    {&EdgeCounts::payment_signature_failures_webhook,
     {"tollgate_payment_signature_failures_total", metrics::Type::counter, kPaymentSignatureFailuresHelp},
     "provider=\"webhook\""},
    {&EdgeCounts::payment_credited,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"payment\",outcome=\"applied\""},
    {&EdgeCounts::payment_replayed,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"payment\",outcome=\"replayed\""},
    {&EdgeCounts::payment_pending,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"payment\",outcome=\"pending\""},
    {&EdgeCounts::payment_not_found,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"payment\",outcome=\"not_found\""},
    {&EdgeCounts::refund_applied,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"refund\",outcome=\"applied\""},
    {&EdgeCounts::refund_replayed,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"refund\",outcome=\"replayed\""},
    {&EdgeCounts::refund_not_found,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"refund\",outcome=\"not_found\""},
    {&EdgeCounts::dispute_applied,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"dispute\",outcome=\"applied\""},
    {&EdgeCounts::dispute_replayed,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"dispute\",outcome=\"replayed\""},
    {&EdgeCounts::dispute_not_found,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"dispute\",outcome=\"not_found\""},
    {&EdgeCounts::payment_event_ignored,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"other\",outcome=\"ignored\""},
    {&EdgeCounts::payment_event_refused,
     {"tollgate_payment_events_total", metrics::Type::counter, kPaymentEventsHelp},
     "type=\"any\",outcome=\"refused\""},
});

// One scrape's text (Prometheus text format 0.0.4), family by family in the order they were first
// named: a family's # HELP and # TYPE are written once, before its samples, and a sample added to a
// family already begun joins it (the same name with another type or help is a bug: asserted).
class Exposition {
 public:
  // Names `family` (its HELP and TYPE are written even if no sample follows).
  void family(const metrics::Family& family);
  // One sample of `family`: its name and `suffix` ("_bucket", "_sum", "_count"), labels, value.
  void sample(const metrics::Family& family, std::string_view labels, double value, std::string_view suffix = {});
  // A histogram's samples for one label set: `cumulative[i]` observations ≤ `bounds_s[i]` (each
  // shown at most `count`), then +Inf, _sum and _count. `labels` may be empty.
  void histogram(const metrics::Family& family, const std::string& labels, std::span<const double> bounds_s,
                 std::span<const std::uint64_t> cumulative, std::uint64_t count, double sum);
  // Every row of a field table whose family has a name, with its value from `values`.
  template <typename Stats, std::size_t N>
  void fields(const std::array<metrics::Field<Stats>, N>& table, const Stats& values) {
    for (const auto& row : table) {
      if (!row.family.name.empty()) sample(row.family, row.labels, static_cast<double>(values.*(row.member)));
    }
  }

  std::string text() const;

 private:
  struct Entry {
    metrics::Family family;
    std::string samples;
  };
  Entry& entry(const metrics::Family& family);
  std::vector<Entry> entries_;  // a scrape names about 60: found by a linear search
};

class Metrics {
 public:
  // Request latency buckets, seconds.
  static constexpr std::array<double, 12> kBuckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                   0.05,   0.1,   0.25,   0.5,   1.0,  2.5};
  // The statuses counted apart; any other is counted as the last slot's ("other", rendered with the
  // status it first saw there). The server answers no other status today.
  static constexpr std::array<unsigned, 15> kStatuses{200, 201, 400, 401, 403, 404, 405, 409,
                                                      413, 415, 422, 429, 431, 500, 503};

  // `routes`: the route templates requests are counted by; index 0 is for requests that matched
  // none ("unmatched"), added here.
  explicit Metrics(const std::vector<std::string>& routes);

  // Counts a request of route `route_index` (0: unmatched; an index out of range is counted there).
  void observe_request(std::size_t route_index, unsigned status, double seconds);
  // The name of a route index, as the logs and the labels show it.
  std::string_view route_name(std::size_t route_index) const;

  // What the ledger decided (holds ended, conflicts, violations) is counted by the ledger where it
  // happens (Ledger::outcomes()); the edge counts only requests, connections and authentication.
  metrics::Counters<EdgeCounts, kEdgeFields> edge;

  // Adds the request metrics (slots that counted nothing are left out); the edge's counters are
  // out.fields(kEdgeFields, edge.snapshot()).
  void render_requests(Exposition& out) const;

 private:
  struct Histogram {
    std::array<std::atomic<std::uint64_t>, kBuckets.size()> buckets{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_ns{0};
    std::atomic<unsigned> status{0};  // the "other" slot: the status it counts
  };
  static constexpr std::size_t kStatusSlots = kStatuses.size() + 1;

  const std::vector<std::string> routes_;  // [0] = "unmatched"; constant after construction
  std::unique_ptr<Histogram[]> histograms_;  // routes_.size() × kStatusSlots
};

}  // namespace tollgate::http
