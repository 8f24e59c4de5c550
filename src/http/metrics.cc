#include "http/metrics.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "core/last_resort.h"

namespace tollgate::http {
namespace {

std::vector<std::string> with_unmatched(const std::vector<std::string>& routes) {
  std::vector<std::string> out{"unmatched"};
  out.insert(out.end(), routes.begin(), routes.end());
  return out;
}

std::size_t status_slot(unsigned status) {
  for (std::size_t i = 0; i < Metrics::kStatuses.size(); ++i) {
    if (Metrics::kStatuses[i] == status) return i;
  }
  return Metrics::kStatuses.size();
}

}  // namespace

Metrics::Metrics(const std::vector<std::string>& routes)
    : routes_(with_unmatched(routes)), histograms_(new Histogram[routes_.size() * kStatusSlots]) {}

std::string_view Metrics::route_name(std::size_t route_index) const {
  return route_index < routes_.size() ? std::string_view(routes_[route_index]) : std::string_view(routes_[0]);
}

void Metrics::observe_request(std::size_t route_index, unsigned status, double seconds) {
  if (route_index >= routes_.size()) route_index = 0;
  const std::size_t slot = status_slot(status);
  Histogram& h = histograms_[route_index * kStatusSlots + slot];
  if (slot == kStatuses.size()) {
    unsigned expected = 0;
    h.status.compare_exchange_strong(expected, status, std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) h.buckets[i].fetch_add(1, std::memory_order_relaxed);
  }
  h.count.fetch_add(1, std::memory_order_relaxed);
  h.sum_ns.fetch_add(static_cast<std::uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

void metric_header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void metric_line(std::string& out, const std::string& name, const std::string& labels, double value) {
  char buf[64];
  if (value == static_cast<double>(static_cast<std::int64_t>(value))) {
    std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<std::int64_t>(value));
  } else {
    // The shortest text that reads back as the same double (a start time in seconds since the
    // epoch with its fraction needs more than %g's six digits).
    const auto end = std::to_chars(buf, buf + sizeof buf - 1, value).ptr;
    *end = '\0';
  }
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " ";
  out += buf;
  out += "\n";
}

void Metrics::render_requests(std::string& out) const {
  struct Row {
    std::string labels;
    const Histogram* h;
  };
  std::vector<Row> rows;
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    for (std::size_t s = 0; s < kStatusSlots; ++s) {
      const Histogram& h = histograms_[r * kStatusSlots + s];
      if (h.count.load(std::memory_order_relaxed) == 0) continue;
      const unsigned status = s < kStatuses.size() ? kStatuses[s] : h.status.load(std::memory_order_relaxed);
      rows.push_back(Row{"route=\"" + routes_[r] + "\",status=\"" + std::to_string(status) + "\"", &h});
    }
  }
  metric_header(out, "tollgate_http_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (const Row& row : rows) {
    metric_line(out, "tollgate_http_requests_total", row.labels, static_cast<double>(row.h->count.load()));
  }
  // The last-resort catch (core/last_resort.h): every one is a bug, answered 500 `internal`.
  metric_header(out, "tollgate_http_unhandled_exceptions_total", "counter",
                "Exceptions that escaped a handler or a callback and reached the last-resort catch (a bug each).");
  metric_line(out, "tollgate_http_unhandled_exceptions_total", "", static_cast<double>(unhandled_exceptions_total()));
  metric_header(out, "tollgate_http_request_duration_seconds", "histogram",
                "Time from a request's last byte to its answer, by route and status.");
  for (const Row& row : rows) {
    const Histogram& h = *row.h;
    // Read the count first: a bucket incremented since is at most one ahead, never behind +Inf.
    const std::uint64_t count = h.count.load();
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", kBuckets[i]);
      metric_line(out, "tollgate_http_request_duration_seconds_bucket", row.labels + ",le=\"" + le + "\"",
                  static_cast<double>(std::min(h.buckets[i].load(), count)));
    }
    metric_line(out, "tollgate_http_request_duration_seconds_bucket", row.labels + ",le=\"+Inf\"",
                static_cast<double>(count));
    metric_line(out, "tollgate_http_request_duration_seconds_sum", row.labels, static_cast<double>(h.sum_ns.load()) / 1e9);
    metric_line(out, "tollgate_http_request_duration_seconds_count", row.labels, static_cast<double>(count));
  }
}

}  // namespace tollgate::http
