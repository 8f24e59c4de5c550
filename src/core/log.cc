#include "core/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/clock.h"

namespace tollgate {

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void log(std::string_view level, std::string_view message) {
  std::string line = "{\"ts\":";
  append_json_string(line, format_rfc3339_ms(SystemClock().now_ms()));
  line += ",\"level\":";
  append_json_string(line, level);
  line += ",\"msg\":";
  append_json_string(line, message);
  line += "}\n";
  // One write(2) per line: lines from different threads never interleave.
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace tollgate
