// tollgate core: the shape of hold ids, shared by every backend.
//
// A hold id is "hold_<seq>_<random>": <seq> is the store's strictly increasing sequence number (the
// primary key of the holds table), <random> 16 hex digits that make ids unguessable. Lookups go by
// the seq and compare the whole id.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

// The sequence number inside a hold id; nullopt when it has none (then no hold has that id).
inline std::optional<std::int64_t> hold_id_seq(std::string_view hold_id) {
  constexpr std::string_view prefix = "hold_";
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  if (hold_id.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::size_t i = prefix.size();
  if (i >= hold_id.size() || hold_id[i] == '_') return std::nullopt;
  std::int64_t seq = 0;
  for (; i < hold_id.size() && hold_id[i] != '_'; ++i) {
    const char c = hold_id[i];
    if (c < '0' || c > '9' || seq > (max - 9) / 10) return std::nullopt;
    seq = seq * 10 + (c - '0');
  }
  return seq;
}

inline std::string make_hold_id(std::int64_t seq, std::string_view random) {
  std::string id = "hold_" + std::to_string(seq);
  if (!random.empty()) {
    id += '_';
    id += random;
  }
  return id;
}

}  // namespace tollgate
