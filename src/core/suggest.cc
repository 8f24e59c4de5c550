#include "core/suggest.h"

#include <algorithm>
#include <array>

#include "core/limits.h"

namespace tollgate {
namespace {

char fold(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_folded(std::string_view text, std::string_view prefix) {
  if (prefix.size() > text.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (fold(text[i]) != fold(prefix[i])) return false;
  }
  return true;
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  if (a.size() > limits::kSuggestNameBytesMax || b.size() > limits::kSuggestNameBytesMax) return std::max(a.size(), b.size());
  // Three rows of the dynamic programme: i-2, i-1, i.
  constexpr std::size_t kWidth = limits::kSuggestNameBytesMax + 1;
  std::array<std::size_t, kWidth> before{}, previous{}, current{};
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) && fold(a[i - 2]) == fold(b[j - 1])) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before = previous;
    previous = current;
  }
  return previous[b.size()];
}

bool is_prefix_pair(std::string_view word, std::string_view candidate) {
  const std::string_view shorter = word.size() < candidate.size() ? word : candidate;
  const std::string_view longer = word.size() < candidate.size() ? candidate : word;
  return shorter.size() >= 3 && starts_with_folded(longer, shorter);
}

bool is_close(std::string_view word, std::string_view candidate) {
  if (word.empty() || candidate.empty()) return false;
  if (is_prefix_pair(word, candidate)) return true;
  const std::size_t edits = edit_distance(word, candidate);
  const std::size_t shorter = std::min(word.size(), candidate.size());
  const std::size_t longer = std::max(word.size(), candidate.size());
  // Two edits in a name of two or three characters make another name.
  if (shorter <= 3) return edits <= 1;
  return edits <= std::max<std::size_t>(2, longer / 3);
}

}  // namespace tollgate
