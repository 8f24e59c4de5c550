// tollgate core: every bound in one place (TigerBeetle's constants.zig, in spirit).
//
// A limit that is not here is a bug. The static_asserts check the limits against each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace tollgate::limits {

// Amounts: 1 ≤ amount ≤ 2^53 − 1, so that every JSON client represents them exactly (api.md).
inline constexpr std::int64_t kAmountMin = 1;
inline constexpr std::int64_t kAmountMax = (std::int64_t{1} << 53) - 1;

// Balances live in int64; arithmetic on them is checked (overflow is an error, never a wrap).
inline constexpr std::int64_t kBalanceMax = std::numeric_limits<std::int64_t>::max();

// An overdraft limit is an amount of credits that `available` may go below zero; 0 is allowed.
inline constexpr std::int64_t kOverdraftLimitMax = kAmountMax;
// max_active_holds, when set: at least 1.
inline constexpr std::int64_t kMaxActiveHoldsMax = 1'000'000'000;

// Client-chosen identifiers: 1–128 characters of [A-Za-z0-9._:@-].
inline constexpr std::size_t kIdLengthMax = 128;
// Free text (a debit's reason, a release's reason).
inline constexpr std::size_t kReasonLengthMax = 1024;
// A hold's metadata: a JSON object, serialised, at most this many bytes.
inline constexpr std::size_t kMetadataBytesMax = 16 * 1024;

// Hold time-to-live bounds (the configured maximum may be lower, never higher).
inline constexpr std::int64_t kHoldTtlMsMin = 1;
inline constexpr std::int64_t kHoldTtlMsMax = 30LL * 24 * 3600 * 1000;  // 30 days
inline constexpr std::int64_t kHoldTtlMsDefault = 300'000;             // 5 minutes
inline constexpr std::int64_t kHoldTtlMsMaxDefault = 3'600'000;        // 1 hour

// Reading events: at most this many per page.
inline constexpr std::int64_t kEventsPageMax = 1000;
// The change feed (GET /v1/events): a read waits for something new at most this long (wait_ms),
// at most this many reads wait at once (one more answers overloaded), and while any waits the
// store's last event id is asked this often (writes of other instances on a shared database; this
// instance's own commits wake the waiters at once).
inline constexpr std::int64_t kEventsWaitMsMax = 60'000;
inline constexpr std::size_t kEventWaitersMax = 4'096;
inline constexpr std::int64_t kEventsPollIntervalMsDefault = 100;
// Listing holds: at most this many per page.
inline constexpr std::int64_t kHoldsPageMax = 1000;

// Group commit: how many operations may wait for the writer, and how many one transaction takes.
inline constexpr std::size_t kWriteQueueDefault = 16'384;
inline constexpr std::size_t kBatchMaxDefault = 2'048;
// The reaper expires at most this many holds in one pass (one transaction).
inline constexpr std::int64_t kReaperBatchMaxDefault = 1'000;

static_assert(kAmountMin >= 1);
static_assert(kAmountMax < kBalanceMax / 2, "two amounts must add without overflow");
static_assert(kHoldTtlMsDefault <= kHoldTtlMsMaxDefault);
static_assert(kHoldTtlMsMaxDefault <= kHoldTtlMsMax);
static_assert(kBatchMaxDefault <= kWriteQueueDefault);

}  // namespace tollgate::limits
