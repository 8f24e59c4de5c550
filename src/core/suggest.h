// tollgate core: "did you mean …?" — the closest of the names a caller accepts to a name it does
// not know, by edit distance. One helper for every place that refuses a name: JSON fields, query
// parameters, configuration keys and the CLI's subcommands.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tollgate {

// The optimal-string-alignment distance (Levenshtein plus the swap of two neighbours, each one
// edit), ASCII letters compared without case: "amout"→"amount" 1, "ammount"→"amount" 1,
// "amuont"→"amount" 1. Names are short: a name longer than limits::kSuggestNameBytesMax is as far
// from anything as its length.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Whether `candidate` is close enough to `word` to suggest: at most max(2, length/3) edits (the
// length of the longer), or one a prefix of the other (at least 3 characters: "ttl" → "ttl_ms").
bool is_close(std::string_view word, std::string_view candidate);
// Whether one is a prefix of the other, the shorter of at least 3 characters (ASCII case ignored).
bool is_prefix_pair(std::string_view word, std::string_view candidate);

// The closest of `candidates` that is_close() to `word`, or nullopt: a prefix pair first
// ("hold_ttl_max" → "hold_ttl_max_ms", not "hold_ttl_ms"), then the fewest edits, then the first.
// A word that is itself a candidate has nothing to suggest.
template <typename Range>
std::optional<std::string> closest(std::string_view word, const Range& candidates) {
  std::optional<std::string> best;
  std::pair<bool, std::size_t> best_rank{};  // (not a prefix pair, edits): lower is closer
  for (const auto& c : candidates) {
    const std::string_view candidate(c);
    if (candidate == word) return std::nullopt;
    if (!is_close(word, candidate)) continue;
    const std::pair<bool, std::size_t> rank{!is_prefix_pair(word, candidate), edit_distance(word, candidate)};
    if (!best || rank < best_rank) {
      best = std::string(candidate);
      best_rank = rank;
    }
  }
  return best;
}

// " (did you mean X?)" for the closest candidate, or "" — to append to "unknown field amout".
template <typename Range>
std::string did_you_mean(std::string_view word, const Range& candidates) {
  auto best = closest(word, candidates);
  return best ? " (did you mean " + *best + "?)" : std::string();
}

}  // namespace tollgate
