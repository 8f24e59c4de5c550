// The coordination counters (http/api.h) count each decision by its enum value and label it by
// name: the labels must stay in the enums' order, or /metrics would report one outcome as another.
#include <gtest/gtest.h>

#include "coord/coord.h"
#include "http/api.h"

namespace tollgate::http {
namespace {

TEST(CoordCounters, EachDecisionIsCountedUnderItsOwnNameAndEachRefusalAfterThem) {
  CoordCounters c;
  for (std::size_t i = 0; i < CoordCounters::kLockDecisions; ++i) {
    const auto d = static_cast<coord::LockDecision>(i);
    EXPECT_EQ(CoordCounters::kLockOutcomes[i], coord::lock_decision_name(d));
    c.count(d);
    EXPECT_EQ(c.lock[i].load(), 1u);
  }
  for (std::size_t i = 0; i < CoordCounters::kIdemDecisions; ++i) {
    const auto d = static_cast<coord::IdemDecision>(i);
    EXPECT_EQ(CoordCounters::kIdemOutcomes[i], coord::idem_decision_name(d));
    c.count(d);
    EXPECT_EQ(c.idempotency[i].load(), 1u);
  }
  c.count(CoordCounters::LockRefusal::held);
  c.count(CoordCounters::LockRefusal::not_found);
  c.count(CoordCounters::LockRefusal::not_found);
  EXPECT_EQ(c.lock[CoordCounters::kLockDecisions].load(), 1u);
  EXPECT_EQ(CoordCounters::kLockOutcomes[CoordCounters::kLockDecisions], "held");
  EXPECT_EQ(c.lock[CoordCounters::kLockDecisions + 2].load(), 2u);
  EXPECT_EQ(CoordCounters::kLockOutcomes[CoordCounters::kLockDecisions + 2], "not_found");
  c.count(CoordCounters::IdemRefusal::mismatch);
  EXPECT_EQ(c.idempotency[CoordCounters::kIdemDecisions + 1].load(), 1u);
  EXPECT_EQ(CoordCounters::kIdemOutcomes[CoordCounters::kIdemDecisions + 1], "mismatch");
}

}  // namespace
}  // namespace tollgate::http
