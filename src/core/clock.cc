#include "core/clock.h"

#include <algorithm>
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

}  // namespace tollgate
