// Tests of validate() (core/validate.h): every invalid field of every Command is invalid_request
// and the detail names the field; every valid bound passes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "slices.h"
#include "core/limits.h"
#include "core/validate.h"

namespace tollgate {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kAmountMax = (std::int64_t{1} << 53) - 1;
constexpr std::int64_t kTwoPow53 = std::int64_t{1} << 53;

const ValidationLimits kLimits{60'000};  // a configured maximum TTL of one minute

const std::vector<std::int64_t> kBadAmounts = {0, -1, kTwoPow53, kMax, kMin};
const std::vector<std::string> kBadIds = {"", std::string(129, 'a'), "a b", "a/b", "caf\xc3\xa9", "a\nb", ".", ".."};

// Asserts that `command` is refused as invalid_request with a detail that names `field`.
void expect_invalid(const Command& command, const std::string& field) {
  const Status s = validate(command, kLimits);
  ASSERT_FALSE(s.ok()) << "expected " << field << " to be refused";
  EXPECT_EQ(s.code(), Code::invalid_request);
  EXPECT_THAT(s.error().detail, HasSubstr(field));
}

void expect_valid(const Command& command) {
  const Status s = validate(command, kLimits);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().detail);
}

// --- create account ---------------------------------------------------------------------------

CreateAccountCommand good_create() { return {"acct-1", 0, std::nullopt}; }

TEST(ValidateCreateAccount, AGoodCommandPasses) {
  expect_valid(good_create());
  expect_valid(CreateAccountCommand{"acct-1", kAmountMax, 1});
  expect_valid(CreateAccountCommand{"acct-1", 0, limits::kMaxActiveHoldsMax});
}

TEST(ValidateCreateAccount, BadAccountIdNamesAccountId) {
  for (const auto& id : kBadIds) {
    auto c = good_create();
    c.account_id = id;
    expect_invalid(c, "account_id");
  }
}

TEST(ValidateCreateAccount, BadOverdraftLimitNamesOverdraftLimit) {
  for (std::int64_t bad : {std::int64_t{-1}, kTwoPow53, kMax, kMin}) {
    auto c = good_create();
    c.overdraft_limit = bad;
    expect_invalid(c, "overdraft_limit");
  }
}

TEST(ValidateCreateAccount, BadMaxActiveHoldsNamesMaxActiveHolds) {
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, limits::kMaxActiveHoldsMax + 1, kMax, kMin}) {
    auto c = good_create();
    c.max_active_holds = bad;
    expect_invalid(c, "max_active_holds");
  }
}

// --- credit -----------------------------------------------------------------------------------

CreditCommand good_credit() { return {"acct-1", 10, "ref-1"}; }

TEST(ValidateCredit, AGoodCommandPasses) {
  expect_valid(good_credit());
  expect_valid(CreditCommand{"a", 1, "r"});
  expect_valid(CreditCommand{std::string(128, 'a'), kAmountMax, std::string(128, 'r')});
}

TEST(ValidateCredit, BadAccountIdNamesAccountId) {
  for (const auto& id : kBadIds) {
    auto c = good_credit();
    c.account_id = id;
    expect_invalid(c, "account_id");
  }
}

TEST(ValidateCredit, BadAmountNamesAmount) {
  for (std::int64_t bad : kBadAmounts) {
    auto c = good_credit();
    c.amount = bad;
    expect_invalid(c, "amount");
  }
}

TEST(ValidateCredit, BadReferenceNamesReference) {
  for (const auto& id : kBadIds) {
    auto c = good_credit();
    c.reference = id;
    expect_invalid(c, "reference");
  }
}

// --- debit ------------------------------------------------------------------------------------

DebitCommand good_debit() { return {"acct-1", 10, "ref-1", "refund"}; }

TEST(ValidateDebit, AGoodCommandPasses) {
  expect_valid(good_debit());
  auto c = good_debit();
  c.reason = "";  // a reason is free text and may be empty
  expect_valid(c);
  c.reason = std::string(limits::kReasonLengthMax, 'x');
  expect_valid(c);
  c.reason = "any text / with spaces, é and \"quotes\"";
  expect_valid(c);
}

TEST(ValidateDebit, BadAccountIdNamesAccountId) {
  for (const auto& id : kBadIds) {
    auto c = good_debit();
    c.account_id = id;
    expect_invalid(c, "account_id");
  }
}

TEST(ValidateDebit, BadAmountNamesAmount) {
  for (std::int64_t bad : kBadAmounts) {
    auto c = good_debit();
    c.amount = bad;
    expect_invalid(c, "amount");
  }
}

TEST(ValidateDebit, BadReferenceNamesReference) {
  for (const auto& id : kBadIds) {
    auto c = good_debit();
    c.reference = id;
    expect_invalid(c, "reference");
  }
}

TEST(ValidateDebit, OversizedReasonNamesReason) {
  auto c = good_debit();
  c.reason = std::string(limits::kReasonLengthMax + 1, 'x');
  expect_invalid(c, "reason");
}

// --- reserve ----------------------------------------------------------------------------------

ReserveCommand good_reserve() { return {"acct-1", 10, "req-1", std::nullopt, "", ""}; }

TEST(ValidateReserve, AGoodCommandPasses) {
  expect_valid(good_reserve());
  auto c = good_reserve();
  c.ttl_ms = 1;
  expect_valid(c);
  c.ttl_ms = kLimits.hold_ttl_ms_max;
  expect_valid(c);
  c.metadata_json = std::string(limits::kMetadataBytesMax, ' ');
  expect_valid(c);
}

TEST(ValidateReserve, BadAccountIdNamesAccountId) {
  for (const auto& id : kBadIds) {
    auto c = good_reserve();
    c.account_id = id;
    expect_invalid(c, "account_id");
  }
}

TEST(ValidateReserve, BadAmountNamesAmount) {
  for (std::int64_t bad : kBadAmounts) {
    auto c = good_reserve();
    c.amount = bad;
    expect_invalid(c, "amount");
  }
}

TEST(ValidateReserve, BadRequestIdNamesRequestId) {
  for (const auto& id : kBadIds) {
    auto c = good_reserve();
    c.request_id = id;
    expect_invalid(c, "request_id");
  }
}

TEST(ValidateReserve, BadTtlNamesTtlMs) {
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kLimits.hold_ttl_ms_max + 1, kMax, kMin}) {
    auto c = good_reserve();
    c.ttl_ms = bad;
    expect_invalid(c, "ttl_ms");
  }
}

TEST(ValidateReserve, TtlAboveTheConfiguredMaximumIsRefusedEvenIfBelowTheHardLimit) {
  auto c = good_reserve();
  c.ttl_ms = limits::kHoldTtlMsMaxDefault;  // 1 hour: fine by default, too long for these limits
  expect_invalid(c, "ttl_ms");
  EXPECT_TRUE(validate(c, ValidationLimits{}).ok());
}

TEST(ValidateReserve, OversizedMetadataNamesMetadata) {
  auto c = good_reserve();
  c.metadata_json = std::string(limits::kMetadataBytesMax + 1, ' ');
  expect_invalid(c, "metadata");
}

// --- commit -----------------------------------------------------------------------------------

CommitCommand good_commit() { return {"hold_0123abcd", std::nullopt}; }

TEST(ValidateCommit, AGoodCommandPasses) {
  expect_valid(good_commit());
  auto c = good_commit();
  c.amount = 1;
  expect_valid(c);
  c.amount = kAmountMax;
  expect_valid(c);
}

TEST(ValidateCommit, BadHoldIdNamesHoldId) {
  for (const auto& id : kBadIds) {
    auto c = good_commit();
    c.hold_id = id;
    expect_invalid(c, "hold_id");
  }
}

TEST(ValidateCommit, BadAmountNamesAmount) {
  for (std::int64_t bad : kBadAmounts) {
    auto c = good_commit();
    c.amount = bad;
    expect_invalid(c, "amount");
  }
}

// --- release ----------------------------------------------------------------------------------

TEST(ValidateRelease, AGoodCommandPasses) { expect_valid(ReleaseCommand{"hold_0123abcd"}); }

TEST(ValidateRelease, BadHoldIdNamesHoldId) {
  for (const auto& id : kBadIds) expect_invalid(ReleaseCommand{id}, "hold_id");
}

// --- extend -----------------------------------------------------------------------------------

TEST(ValidateExtend, AGoodCommandPasses) {
  expect_valid(ExtendCommand{"hold_0123abcd", 1});
  expect_valid(ExtendCommand{"hold_0123abcd", kLimits.hold_ttl_ms_max});
}

TEST(ValidateExtend, BadHoldIdNamesHoldId) {
  for (const auto& id : kBadIds) expect_invalid(ExtendCommand{id, 1000}, "hold_id");
}

TEST(ValidateExtend, BadTtlNamesTtlMs) {
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kLimits.hold_ttl_ms_max + 1, kMax, kMin}) {
    expect_invalid(ExtendCommand{"hold_0123abcd", bad}, "ttl_ms");
  }
}

// --- the reaper's pass ------------------------------------------------------------------------

TEST(ValidateExpireOverdue, AtLeastOneHoldPerPass) {
  expect_valid(ExpireOverdueCommand{1});
  expect_valid(ExpireOverdueCommand{limits::kReaperBatchMaxDefault});
  expect_invalid(ExpireOverdueCommand{0}, "max_holds");
  expect_invalid(ExpireOverdueCommand{-1}, "max_holds");
}

}  // namespace
}  // namespace tollgate
