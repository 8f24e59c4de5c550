// fuzz_json_codec: a request body through the edge's JSON codec, as every POST handler reads it —
// parse_object, then FieldReader reads of every kind and finish() — and the log's string escaper.
//
// Properties checked beyond "no crash, no sanitizer report":
//   - append_json_string(anything) is one valid JSON string (a log line stays parseable JSON
//     whatever bytes a client put in a path or a header), and for valid UTF-8 it round-trips;
//   - a body that parse_object accepts is an object, and a reader's finish() is ok or names a code.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "core/log.h"
#include "core/result.h"
#include "http/json_codec.h"

namespace {

namespace json = boost::json;
using tollgate::http::FieldReader;

// RFC 3629's well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF): the oracle the
// escaper is held to, written here independently of it.
bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80) { ++i; continue; }
    else if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c == 0xe0) { n = 2; lo = 0xa0; }
    else if (c >= 0xe1 && c <= 0xec) n = 2;
    else if (c == 0xed) { n = 2; hi = 0x9f; }
    else if (c >= 0xee && c <= 0xef) n = 2;
    else if (c == 0xf0) { n = 3; lo = 0x90; }
    else if (c >= 0xf1 && c <= 0xf3) n = 3;
    else if (c == 0xf4) { n = 3; hi = 0x8f; }
    else return false;
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto b = static_cast<unsigned char>(s[i + k]);
      const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
      if (b < l || b > h) return false;
    }
    i += n + 1;
  }
  return true;
}

void check_escaper(std::string_view bytes) {
  std::string out;
  tollgate::append_json_string(out, bytes);
  boost::system::error_code ec;
  const json::value v = json::parse(out, ec);
  if (ec || !v.is_string()) __builtin_trap();  // the escaper wrote something that is not a JSON string
  if (is_utf8(bytes) && std::string_view(v.as_string()) != bytes) __builtin_trap();  // valid text round-trips
}

void read_all(const json::object& object) {
  FieldReader reader(object);
  (void)reader.integer("ttl_ms", 1, 86'400'000);
  (void)reader.nullable_integer("max_active_holds", 0, 1'000'000);
  (void)reader.boolean("frozen");
  (void)reader.optional_amount("overdraft_limit");
  (void)reader.string("reason", 512);
  (void)reader.optional_id("hold_id");
  (void)reader.object("metadata", 4096);
  (void)reader.any("input", 65536);
  (void)reader.required_integer("cost", 1, 1'000'000);
  (void)reader.amount("amount");
  (void)reader.required_string("owner", 128);
  (void)reader.id("request_id");
  const auto status = reader.finish();
  if (!status && status.error().detail.empty()) __builtin_trap();  // every refusal says what was wrong
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check_escaper(bytes);
  auto parsed = tollgate::http::parse_object(bytes);
  if (parsed) read_all(*parsed);
  else if (parsed.error().detail.empty()) __builtin_trap();
  return 0;
}
