// tollgate core: metric families and the counters behind them, each declared once.
//
// A metric family is what GET /metrics shows under one name: its name, type and help
// (metrics::Family). A counter that a component keeps (the group committer's batches, the ledger's
// audit violations, the edge's refused connections) is one std::uint64_t field of that component's
// stats struct and one row of its field table (metrics::Field): the field, the family it is a
// sample of, and its labels. From that table, and nothing else:
//
//  - metrics::Counters<Stats, kFields> keeps one relaxed atomic per row: add<&Stats::f>() counts,
//    snapshot() fills the stats struct (the component's stats(), read by tests and the CLI);
//  - /metrics renders every row under its family (http::Exposition::fields): names, types,
//    help and labels come from the table.
//
// So a new counter is a field in the stats struct and a row in its table (a family of several
// samples, such as one per outcome, is one named Family constant that its rows share). A row whose
// family has an empty name is kept and counted but not shown on /metrics.
//
// Thread safety: Family and Field are constants. Counters: add() and snapshot() may be called from
// any thread (relaxed atomics: figures, not synchronisation); a snapshot is not one instant across
// fields.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tollgate::metrics {

enum class Type { counter, gauge, histogram };

// As Prometheus's text format names it ("counter", "gauge", "histogram").
constexpr std::string_view type_name(Type type) {
  switch (type) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::histogram: return "histogram";
  }
  return "untyped";
}

// One metric family. `name` is the whole name ("tollgate_group_commit_batches_total"); `help` one
// line, without a newline.
struct Family {
  std::string_view name;
  Type type = Type::counter;
  std::string_view help;
};

// One counter of `Stats`: its field, the family it is a sample of (an empty name: not on /metrics)
// and the sample's labels, as the text format writes them ("outcome=\"committed\""; "" for none).
template <typename Stats>
struct Field {
  std::uint64_t Stats::*member;
  Family family;
  std::string_view labels;
};

// The live counters of a field table `kFields` (a constexpr std::array of Field<Stats> with static
// storage duration): one atomic per row, in the table's order.
template <typename Stats, const auto& kFields>
class Counters {
 public:
  static constexpr std::size_t kSize = kFields.size();

  // Counts `n` on the counter of `Member` (a row of kFields: checked at compile time).
  template <std::uint64_t Stats::*Member>
  void add(std::uint64_t n = 1) {
    values_[index_of<Member>()].fetch_add(n, std::memory_order_relaxed);
  }
  template <std::uint64_t Stats::*Member>
  std::uint64_t get() const {
    return values_[index_of<Member>()].load(std::memory_order_relaxed);
  }
  // Every counter of the table into its field; fields no row names keep their initial value.
  Stats snapshot() const {
    Stats out{};
    for (std::size_t i = 0; i < kSize; ++i) out.*(kFields[i].member) = values_[i].load(std::memory_order_relaxed);
    return out;
  }

 private:
  template <std::uint64_t Stats::*Member>
  static constexpr std::size_t index_of() {
    constexpr std::size_t index = [] {
      std::size_t found = kSize;
      for (std::size_t i = 0; i < kSize; ++i) {
        if (kFields[i].member == Member) found = i;
      }
      return found;
    }();
    static_assert(index < kSize, "this field has no row in the field table");
    return index;
  }

  std::array<std::atomic<std::uint64_t>, kSize> values_{};
};

}  // namespace tollgate::metrics
