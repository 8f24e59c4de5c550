// tollgate core: the shape of hold ids, shared by every backend.
//
// A hold id is "hold_<seq>_<random>": <seq> is the store's strictly increasing sequence number (the
// primary key of the holds table), <random> 16 hex digits that make ids unguessable. Lookups go by
// the seq and compare the whole id.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
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

// Holds a feature slice makes for rows of its own ("owned holds"): the hold's request_id is the
// slice's prefix followed by the owning row's id. A slice that owns holds declares its HoldOwner as
// `static constexpr HoldOwner kHoldOwner` (core/batch.h's seam; src/slices.h registers the slice).
// The holds API's own request_ids may not begin with any owner's prefix (core/validate.cc), so they
// never collide; every event of an owned hold names the owning row (Event::job_id), and the holds
// API may not commit, release or extend it on its own — its owner ends it (core/batch.cc).
struct HoldOwner {
  std::string_view request_id_prefix;  // ends with ':'; not empty
  std::string_view noun;               // the owning row's kind: "hold … belongs to <noun> <id>"
  std::string_view noun_plural;        // "that prefix names the holds of <noun_plural>"
  std::string_view how_to_end;         // "… cannot be committed on its own (<how_to_end>)"
};

// A hold's owner, and the owning row's id.
struct OwnedHold {
  const HoldOwner* owner = nullptr;
  std::string id;
};

// The owner among `owners` whose prefix `request_id` begins with, or nullopt for a hold made by the
// holds API.
inline std::optional<OwnedHold> owner_of_hold(std::span<const HoldOwner> owners, std::string_view request_id) {
  for (const HoldOwner& o : owners) {
    if (request_id.starts_with(o.request_id_prefix)) {
      return OwnedHold{&o, std::string(request_id.substr(o.request_id_prefix.size()))};
    }
  }
  return std::nullopt;
}

}  // namespace tollgate
