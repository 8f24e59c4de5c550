#include "core/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/clock.h"

namespace tollgate {

namespace {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at
// most U+10FFFF) that starts at text[i], whose first byte is ≥ 0x80; 0 when there is none.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c == 0xe0) { n = 3; lo = 0xa0; }
  else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) n = 3;
  else if (c == 0xed) { n = 3; hi = 0x9f; }
  else if (c == 0xf0) { n = 4; lo = 0x90; }
  else if (c >= 0xf1 && c <= 0xf3) n = 4;
  else if (c == 0xf4) { n = 4; hi = 0x8f; }
  else return 0;
  if (text.size() - i < n) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return 0;
  }
  return n;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // the start of the run of characters that need no escape
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if (const std::size_t n = utf8_sequence_length(text, i); n > 0) {
        i += n - 1;  // a whole character, kept as it is
        continue;
      }
      // Not UTF-8 (a client's bytes in a path or a header): U+FFFD, so the line stays valid JSON.
      out.append(text.data() + plain, i - plain);
      plain = i + 1;
      out += "\xef\xbf\xbd";
      continue;
    }
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
