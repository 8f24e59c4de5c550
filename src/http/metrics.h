// tollgate http: the counters and histograms behind GET /metrics (Prometheus text format 0.0.4).
//
// Labels are bounded: routes are templates ("POST /v1/holds/{hold_id}/commit"), never ids, and
// statuses are HTTP codes — no per-account label explosion.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace tollgate::http {

class Metrics {
 public:
  // Request latency buckets, seconds.
  static constexpr std::array<double, 12> kBuckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                   0.05,   0.1,   0.25,   0.5,   1.0,  2.5};

  void observe_request(const std::string& route, unsigned status, double seconds);

  // Holds ended through this instance's API (expiries are counted by the ledger's reaper).
  std::atomic<std::uint64_t> holds_committed{0}, holds_released{0}, holds_late_charged{0}, holds_late_forgiven{0};
  std::atomic<std::uint64_t> reservation_conflicts{0};  // insufficient_credits answers
  std::atomic<std::uint64_t> invariant_violations{0};   // found by GET /v1/audit (the sampler counts its own)
  std::atomic<std::uint64_t> connections_rejected{0};   // over the connection limit

  // Appends the request metrics in Prometheus text format.
  void render_requests(std::string& out) const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, unsigned>, Histogram> requests_;  // protected by mu_
};

// Appends one sample line: name{labels} value.
void metric_line(std::string& out, const std::string& name, const std::string& labels, double value);
void metric_header(std::string& out, const std::string& name, const char* type, const char* help);

}  // namespace tollgate::http
