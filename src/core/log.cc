#include "core/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/clock.h"

namespace tollgate {

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // the start of the run of characters that need no escape
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
  }
  out.append(text.data() + plain, text.size() - plain);
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
