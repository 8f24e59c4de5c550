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

// Every balance (available, reserved, used, purchased) stays within ±kBalanceMax, 2^53 − 1 like an
// amount, so that every JSON client represents it exactly (api.md); a movement that would take one
// past it is refused (overflow). Arithmetic on balances is checked besides: never a wrap.
inline constexpr std::int64_t kBalanceMax = kAmountMax;

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
// A job's input as stored (the request body is at most 64 KiB), and a provider's result kept.
inline constexpr std::size_t kJobInputBytesMax = 32 * 1024;
inline constexpr std::size_t kJobResultBytesMax = 64 * 1024;
// The most entries of a job's history answered (GET /v1/jobs/{id}/history), oldest first.
inline constexpr std::int64_t kJobHistoryMax = 1000;
// Provider calls one instance drives at once (jobs/runner.h), and accepted jobs waiting for a slot.
inline constexpr std::size_t kJobsInFlightMaxDefault = 10'000;
inline constexpr std::size_t kJobsInFlightMax = 100'000;  // the most `jobs_in_flight_max` may be
inline constexpr std::size_t kJobsQueuedMax = 100'000;
// A job's GET with wait_ms: at most this long (api.md).
inline constexpr std::int64_t kJobWaitMsMax = 60'000;

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
// Every paged list (accounts, holds, keys; api.md: `limit` ≤ 1000, default 100).
inline constexpr std::int64_t kListPageMax = 1000;
inline constexpr std::int64_t kListPageDefault = 100;

// Last use of an API key: remembered in memory and written at most once per key per this interval
// (ledger/key_use.h), at most this many keys per write command and this many remembered.
inline constexpr std::int64_t kKeyUseFlushIntervalMsDefault = 60'000;
// Jobs: the wait before asking a provider's status URL again about a lost answer — the first, and
// the most it doubles to (jobs/provider_protocol.h).
inline constexpr std::int64_t kStatusPollFirstMs = 250;
inline constexpr std::int64_t kStatusPollMaxMs = 10'000;
// Jobs: a worker's claim is a short lease, renewed while the worker lives (jobs/runner.h) — not the
// provider's time-out: a job whose worker died is taken over within a lease and a recovery scan.
// Renewed every kJobLeaseRenewIntervalMs (three renewals per lease: two may fail before it ends);
// handed back at a graceful stop as a lease of kJobHandBackLeaseMs (it ends now), waiting at most
// kJobHandBackWaitMs for those writes. Every instance looks for expired leases every
// kJobRecoveryIntervalMs (and at start).
inline constexpr std::int64_t kJobLeaseMs = 5'000;
inline constexpr std::int64_t kJobLeaseRenewIntervalMs = 1'500;
inline constexpr std::int64_t kJobHandBackLeaseMs = 1;
inline constexpr std::int64_t kJobHandBackWaitMs = 5'000;
inline constexpr std::int64_t kJobRecoveryIntervalMs = 1'000;
inline constexpr std::size_t kKeyUsesPerCommandMax = 1'000;
inline constexpr std::size_t kKeyUsesRememberedMax = 100'000;

// Group commit: how many operations may wait for the writer, and how many one transaction takes.
inline constexpr std::size_t kWriteQueueDefault = 16'384;
inline constexpr std::size_t kBatchMaxDefault = 2'048;
// The reaper expires at most this many holds in one pass (one transaction).
inline constexpr std::int64_t kReaperBatchMaxDefault = 1'000;

// A configuration file is read whole: at most this many bytes.
inline constexpr std::size_t kConfigFileBytesMax = 1024 * 1024;
// "did you mean …?" (core/suggest.h) compares names of at most this many bytes; longer ones are
// never close (the edit distance's table stays on the stack).
inline constexpr std::size_t kSuggestNameBytesMax = 64;
// Lists: the page size when a request names none.
inline constexpr std::int64_t kPageDefault = 100;

// Configuration bounds (src/config checks the file and environment against these).
inline constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
inline constexpr std::int64_t kReaperIntervalMsMin = 10;
inline constexpr std::int64_t kReaperIntervalMsMax = 3'600'000;  // 1 hour
inline constexpr std::int64_t kReaperIntervalMsDefault = 1'000;
inline constexpr std::int64_t kReaperBatchMax = 100'000;
// One reaper run makes at most this many passes (of reaper_batch_max holds); the next run continues.
inline constexpr int kReaperPassesMax = 100;
// The server's sampled audit: one account in turn, this often.
inline constexpr std::int64_t kAuditSampleIntervalMsDefault = 10'000;
inline constexpr std::int64_t kDatabasePoolSizeDefault = 8;
inline constexpr std::int64_t kDatabasePoolSizeMax = 256;
inline constexpr std::int64_t kDatabaseTimeoutMsDefault = 5'000;
inline constexpr std::int64_t kDatabaseTimeoutMsMin = 100;
inline constexpr std::int64_t kDatabaseTimeoutMsMax = 600'000;
inline constexpr std::size_t kAdminKeyLengthMin = 16;  // also a configured metrics_key
inline constexpr std::int64_t kProviderAttemptsMax = 100;
inline constexpr std::int64_t kProviderTimeoutMsMax = kDayMs;  // a provider call's time-out and expected duration
inline constexpr std::int64_t kRateLimitMax = 1'000'000'000;
inline constexpr std::int64_t kRateLimitPeriodMsMax = 366 * kDayMs;

// Reader connections: a read waits at most this long for a free one, then answers `unavailable`.
inline constexpr std::int64_t kConnLeaseWaitMsDefault = 5'000;

// The HTTP edge.
inline constexpr std::size_t kBodyBytesMax = 64 * 1024;        // larger: 413
inline constexpr std::size_t kHeaderBytesMax = 16 * 1024;      // larger: 431
inline constexpr std::int64_t kIdleTimeoutMsDefault = 30'000;  // a kept-alive connection's wait for its next request
inline constexpr std::int64_t kRequestTimeoutMsDefault = 10'000;  // a request's first byte to its last
inline constexpr std::size_t kConnectionsMaxDefault = 4096;
inline constexpr int kHttpThreadsDefault = 2;
inline constexpr std::size_t kRequestIdLengthMax = 128;        // X-Request-Id
inline constexpr std::size_t kAuthorizationBytesMax = 512;     // the Authorization header
// The request log is buffered and written at least this often, or when the buffer is this large.
inline constexpr std::int64_t kRequestLogFlushMs = 200;
inline constexpr std::size_t kRequestLogBufferBytes = 64 * 1024;
// Keys found in the database are cached this long (a revoked key stops working within it), and at
// most this many.
inline constexpr std::int64_t kAuthCacheMs = 1'000;
inline constexpr std::size_t kAuthCacheEntriesMax = 100'000;
// Failed authentications per client address (http/api.h): at most this many per period, then 429
// too_many_failed_auth until the budget refills; the table remembers at most this many addresses.
inline constexpr std::int64_t kAuthFailuresLimitDefault = 20;
inline constexpr std::int64_t kAuthFailuresPeriodMsDefault = 60'000;
inline constexpr std::size_t kAuthFailuresAddressesMax = 100'000;
// trusted_proxies (config/proxies.h): at most this many CIDRs, and at most this many hops of a
// forwarding header are walked (a longer chain of trusted proxies ends at the last one walked).
inline constexpr std::size_t kTrustedProxiesMax = 256;
inline constexpr std::size_t kForwardedHopsMax = 32;
// Readiness: the reaper must have run within this many intervals (plus the slack).
inline constexpr std::int64_t kReaperIntervalsStaleMax = 3;
inline constexpr std::int64_t kReaperStaleSlackMs = 1'000;

// The reader executor (reads off the HTTP I/O threads): reads waiting, at most; more answer 503.
inline constexpr std::size_t kReadQueueMax = 1'024;
// A full audit runs in tasks of this many accounts, each queued behind the reads that wait, so it
// never holds a reader thread for long.
inline constexpr std::int64_t kAuditAccountsPerTask = 256;

static_assert(kAmountMin >= 1);
static_assert(kBalanceMax < std::numeric_limits<std::int64_t>::max() / 4,
              "balances, amounts and overdrafts add in int64 without overflow");
static_assert(kHoldTtlMsDefault <= kHoldTtlMsMaxDefault);
static_assert(kHoldTtlMsMaxDefault <= kHoldTtlMsMax);
static_assert(kBatchMaxDefault <= kWriteQueueDefault);
static_assert(kHoldTtlMsMax == 30 * kDayMs);
static_assert(kReaperIntervalMsMin <= kReaperIntervalMsDefault && kReaperIntervalMsDefault <= kReaperIntervalMsMax);
static_assert(kReaperBatchMaxDefault <= kReaperBatchMax);
static_assert(kDatabaseTimeoutMsMin <= kConnLeaseWaitMsDefault && kConnLeaseWaitMsDefault <= kDatabaseTimeoutMsMax);
static_assert(kRequestIdLengthMax == kIdLengthMax);
static_assert(kAuditAccountsPerTask >= 1 && kAuditAccountsPerTask <= kHoldsPageMax);
static_assert(kPageDefault <= kHoldsPageMax && kPageDefault <= kEventsPageMax);
static_assert(1 <= kListPageDefault && kListPageDefault <= kListPageMax);
static_assert(kListPageMax == kHoldsPageMax);
static_assert(kKeyUsesPerCommandMax <= kKeyUsesRememberedMax);
static_assert(0 < kStatusPollFirstMs && kStatusPollFirstMs <= kStatusPollMaxMs);
static_assert(0 < kJobLeaseRenewIntervalMs && 3 * kJobLeaseRenewIntervalMs <= kJobLeaseMs);
static_assert(0 < kJobHandBackLeaseMs && kJobHandBackLeaseMs < kJobLeaseRenewIntervalMs);
static_assert(0 < kJobRecoveryIntervalMs && kJobRecoveryIntervalMs <= kJobLeaseMs);

// Coordination (coord/coord.h): locks, idempotency keys, rate limits.
inline constexpr std::int64_t kLockTtlMsMax = 24LL * 3600 * 1000;             // a lease: at most a day
inline constexpr std::int64_t kIdempotencyTtlMsMax = 24LL * 3600 * 1000;      // a claim: at most a day
inline constexpr std::size_t kOwnerLengthMax = 128;                           // a lock owner: an id
inline constexpr std::size_t kFingerprintLengthMax = 256;
inline constexpr std::size_t kIdempotencyResponseBytesMax = 32 * 1024;       // a stored response
inline constexpr std::size_t kRatePoliciesMax = 1'000;
inline constexpr std::size_t kLocalRateKeysMaxDefault = 100'000;              // per local policy
inline constexpr std::size_t kLocalRateKeysMax = 10'000'000;                  // what `keys_max` may be
inline constexpr std::int64_t kIdempotencyRetentionMsDefault = 24LL * 3600 * 1000;
inline constexpr std::int64_t kIdempotencyRetentionMsMax = 366LL * 24 * 3600 * 1000;
inline constexpr std::int64_t kIdempotencyPruneBatchMax = 1'000;              // rows per prune pass
inline constexpr int kCoordPrunePassesMax = 20;                               // passes per prune interval

}  // namespace tollgate::limits
