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

// The request_ids of holds a feature slice makes for its own rows: a job's hold has request_id
// "job:<client_request_id>" (jobs/job.h). The holds API's own request_ids may not begin with the
// prefix (core/validate.cc), so they never collide; every event of such a hold names its owner
// (Event::job_id), and the holds API may not end or extend it on its own (core/batch.cc).
inline constexpr std::string_view kJobHoldPrefix = "job:";

// The row that owns a hold (from its request_id), or nullopt for a hold made by the holds API.
inline std::optional<std::string> job_of_hold(std::string_view request_id) {
  if (!request_id.starts_with(kJobHoldPrefix)) return std::nullopt;
  return std::string(request_id.substr(kJobHoldPrefix.size()));
}

}  // namespace tollgate
