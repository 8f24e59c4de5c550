#include "http/metrics.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "core/last_resort.h"
#include "core/result.h"

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

namespace {

// One sample line: name{labels} value.
void metric_line(std::string& out, std::string_view name, std::string_view suffix, std::string_view labels,
                 double value) {
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
  out += suffix;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += buf;
  out += '\n';
}

}  // namespace

Exposition::Entry& Exposition::entry(const metrics::Family& family) {
  TG_ASSERT(!family.name.empty());
  for (Entry& e : entries_) {
    if (e.family.name != family.name) continue;
    TG_ASSERT(e.family.type == family.type && e.family.help == family.help);  // one family, declared once
    return e;
  }
  return entries_.emplace_back(Entry{family, {}});
}

void Exposition::family(const metrics::Family& family) { entry(family); }

void Exposition::sample(const metrics::Family& family, std::string_view labels, double value, std::string_view suffix) {
  metric_line(entry(family).samples, family.name, suffix, labels, value);
}

void Exposition::histogram(const metrics::Family& family, const std::string& labels, std::span<const double> bounds_s,
                           std::span<const std::uint64_t> cumulative, std::uint64_t count, double sum) {
  TG_ASSERT(bounds_s.size() == cumulative.size());
  const std::string prefix = labels.empty() ? std::string() : labels + ",";
  for (std::size_t i = 0; i < bounds_s.size(); ++i) {
    char le[32];
    std::snprintf(le, sizeof le, "%g", bounds_s[i]);
    sample(family, prefix + "le=\"" + le + "\"", static_cast<double>(std::min(cumulative[i], count)), "_bucket");
  }
  sample(family, prefix + "le=\"+Inf\"", static_cast<double>(count), "_bucket");
  sample(family, labels, sum, "_sum");
  sample(family, labels, static_cast<double>(count), "_count");
}

std::string Exposition::text() const {
  std::size_t size = 0;
  for (const Entry& e : entries_) size += e.family.name.size() * 2 + e.family.help.size() + 32 + e.samples.size();
  std::string out;
  out.reserve(size);
  for (const Entry& e : entries_) {
    out += "# HELP ";
    out += e.family.name;
    out += ' ';
    out += e.family.help;
    out += "\n# TYPE ";
    out += e.family.name;
    out += ' ';
    out += metrics::type_name(e.family.type);
    out += '\n';
    out += e.samples;
  }
  return out;
}

void Metrics::render_requests(Exposition& out) const {
  static constexpr metrics::Family kRequests{"tollgate_http_requests_total", metrics::Type::counter,
                                             "HTTP requests answered, by route and status."};
  // The last-resort catch (core/last_resort.h): every one is a bug, answered 500 `internal`.
  static constexpr metrics::Family kUnhandled{
      "tollgate_http_unhandled_exceptions_total", metrics::Type::counter,
      "Exceptions that escaped a handler or a callback and reached the last-resort catch (a bug each)."};
  static constexpr metrics::Family kDuration{"tollgate_http_request_duration_seconds", metrics::Type::histogram,
                                             "Time from a request's last byte to its answer, by route and status."};
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
  out.family(kRequests);
  for (const Row& row : rows) out.sample(kRequests, row.labels, static_cast<double>(row.h->count.load()));
  out.sample(kUnhandled, "", static_cast<double>(unhandled_exceptions_total()));
  out.family(kDuration);
  for (const Row& row : rows) {
    const Histogram& h = *row.h;
    // Read the count first: a bucket incremented since is at most one ahead, never behind +Inf.
    const std::uint64_t count = h.count.load();
    std::array<std::uint64_t, kBuckets.size()> buckets{};
    for (std::size_t i = 0; i < kBuckets.size(); ++i) buckets[i] = h.buckets[i].load();
    out.histogram(kDuration, row.labels, kBuckets, buckets, count, static_cast<double>(h.sum_ns.load()) / 1e9);
  }
}

}  // namespace tollgate::http
