#include "core/clock.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace tollgate {

std::string format_rfc3339_ms(std::int64_t t_ms) {
  char buf[32];
  return std::string(buf, format_rfc3339_ms(t_ms, buf));
}

std::size_t format_rfc3339_ms(std::int64_t t_ms, char (&buf)[32]) {
  std::int64_t seconds = t_ms / 1000;
  std::int64_t millis = t_ms % 1000;
  if (millis < 0) {  // floor division for times before the epoch
    millis += 1000;
    seconds -= 1;
  }
  const std::time_t tt = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                              tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
  return n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1) : 0;
}

namespace {

// The number of `n` digits at `text[at]`, or -1.
int digits(std::string_view text, std::size_t at, std::size_t n) {
  if (at + n > text.size()) return -1;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

}  // namespace

std::optional<std::int64_t> parse_rfc3339_ms(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' || t[16] != ':') {
    return std::nullopt;
  }
  const int year = digits(t, 0, 4), month = digits(t, 5, 2), day = digits(t, 8, 2);
  const int hour = digits(t, 11, 2), minute = digits(t, 14, 2), second = digits(t, 17, 2);
  if (year < 1970 || month < 1 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 ||
      second > 59) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok()) return std::nullopt;
  std::size_t at = 19;
  std::int64_t millis = 0;
  if (at < t.size() && t[at] == '.') {
    const std::size_t first = ++at;
    int scale = 100;
    while (at < t.size() && t[at] >= '0' && t[at] <= '9') {
      millis += (t[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == first || at - first > 9) return std::nullopt;
  }
  std::int64_t offset_min = 0;
  if (at < t.size() && (t[at] == 'Z' || t[at] == 'z')) {
    ++at;
  } else if (at + 6 == t.size() && (t[at] == '+' || t[at] == '-') && t[at + 3] == ':') {
    const int oh = digits(t, at + 1, 2), om = digits(t, at + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return std::nullopt;
    offset_min = (t[at] == '+' ? 1 : -1) * (oh * 60 + om);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != t.size()) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  const std::int64_t seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offset_min * 60;
  return seconds * 1000 + millis;
}

}  // namespace tollgate
