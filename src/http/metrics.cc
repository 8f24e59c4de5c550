#include "http/metrics.h"

#include <cinttypes>
#include <cstdio>

namespace tollgate::http {

void Metrics::observe_request(const std::string& route, unsigned status, double seconds) {
  std::lock_guard lock(mu_);
  Histogram& h = requests_[{route, status}];
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++h.buckets[i];
  }
  ++h.count;
  h.sum += seconds;
}

void metric_header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void metric_line(std::string& out, const std::string& name, const std::string& labels, double value) {
  char buf[64];
  if (value == static_cast<double>(static_cast<std::int64_t>(value))) {
    std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<std::int64_t>(value));
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", value);
  }
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " ";
  out += buf;
  out += "\n";
}

void Metrics::render_requests(std::string& out) const {
  std::lock_guard lock(mu_);
  metric_header(out, "tollgate_http_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (const auto& [key, h] : requests_) {
    metric_line(out, "tollgate_http_requests_total",
                "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"", static_cast<double>(h.count));
  }
  metric_header(out, "tollgate_http_request_duration_seconds", "histogram",
                "Time from a request's last byte to its answer, by route and status.");
  for (const auto& [key, h] : requests_) {
    const std::string labels = "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"";
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", kBuckets[i]);
      metric_line(out, "tollgate_http_request_duration_seconds_bucket", labels + ",le=\"" + le + "\"",
                  static_cast<double>(h.buckets[i]));
    }
    metric_line(out, "tollgate_http_request_duration_seconds_bucket", labels + ",le=\"+Inf\"", static_cast<double>(h.count));
    metric_line(out, "tollgate_http_request_duration_seconds_sum", labels, h.sum);
    metric_line(out, "tollgate_http_request_duration_seconds_count", labels, static_cast<double>(h.count));
  }
}

}  // namespace tollgate::http
