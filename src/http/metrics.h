// tollgate http: the counters and histograms behind GET /metrics (Prometheus text format 0.0.4).
//
// Labels are bounded: routes are templates ("POST /v1/holds/{hold_id}/commit"), never ids, and
// statuses are the HTTP codes the server answers — no per-account label explosion. Counting a
// request is a few relaxed atomic increments in a fixed table (route × status): no lock, no
// allocation on the request path.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::http {

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
  // happens (Ledger::outcomes()); the edge counts only requests and connections.
  std::atomic<std::uint64_t> connections_rejected{0};  // over the connection limit
  std::atomic<std::uint64_t> auth_failures{0};   // requests refused 401: missing, malformed, unknown or revoked key
  std::atomic<std::uint64_t> auth_throttled{0};  // requests refused 429 too_many_failed_auth (api.h)
  std::atomic<std::uint64_t> tls_handshake_failures{0};  // TLS handshakes that failed (plain HTTP, old versions)

  // Appends the request metrics in Prometheus text format (slots that counted nothing are left out).
  void render_requests(std::string& out) const;

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

// Appends one sample line: name{labels} value.
void metric_line(std::string& out, const std::string& name, const std::string& labels, double value);
void metric_header(std::string& out, const std::string& name, const char* type, const char* help);

}  // namespace tollgate::http
