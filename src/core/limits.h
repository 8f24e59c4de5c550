// tollgate core: every bound in one place (TigerBeetle's constants.zig, in spirit).
//
// A limit that is not here is a bug. The static_asserts check the limits against each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

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
// A low_balance_threshold (balance notices), when set: an amount of credits, 1 to 2^53 − 1.
inline constexpr std::int64_t kLowBalanceThresholdMax = kAmountMax;
// max_active_holds, when set: at least 1.
inline constexpr std::int64_t kMaxActiveHoldsMax = 1'000'000'000;

// Client-chosen identifiers: 1–128 characters of [A-Za-z0-9._:@-].
inline constexpr std::size_t kIdLengthMax = 128;
// Free text (a debit's reason, a release's reason).
inline constexpr std::size_t kReasonLengthMax = 1024;
// A key's name (api.md "Keys with scopes"): a label, not a document.
inline constexpr std::size_t kKeyNameBytesMax = 100;
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

// Credit lots (core/lots.h): an account has at most this many live lots (credits available or
// reserved) — each write on the account loads them all, so an account that is credited far more
// often than it spends pays for it on every write; a credit that would make one more is refused
// (conflict) until some are spent or expire.
inline constexpr std::int64_t kLiveLotsPerAccountMax = 10'000;
inline constexpr std::int64_t kLotPriorityMax = 100;
inline constexpr std::int64_t kLotPriorityDefault = 50;
// GET …/lots answers at most this many per page (default kLotsPageDefault).
inline constexpr std::int64_t kLotsPageMax = 1'000;
inline constexpr std::int64_t kLotsPageDefault = 100;

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

// Webhook endpoints (webhooks/webhook.h): at most this many registered (a create past it is refused
// with invalid_request — delete one first); a URL, a description, a secret as stored.
inline constexpr std::int64_t kWebhookEndpointsMax = 100;
inline constexpr std::size_t kWebhookUrlBytesMax = 2'048;
inline constexpr std::size_t kWebhookDescriptionBytesMax = 1'024;
// An endpoint's event_types filter as a body may carry it: at most this many names (there are fewer
// event types; a longer list is refused before its names are checked), each read up to this many bytes
// (an unknown name is then refused with the nearest one suggested).
inline constexpr std::size_t kWebhookEventTypesMax = 64;
inline constexpr std::size_t kWebhookEventTypeBytesMax = 2 * kSuggestNameBytesMax;
inline constexpr std::size_t kWebhookSecretBytes = 32;  // random bytes of a signing secret (whsec_ + base64)
// A rotated secret keeps signing beside the new one this long (api.md, Webhooks).
inline constexpr std::int64_t kWebhookPreviousSecretMs = kDayMs;
static_assert(kWebhookEndpointsMax >= 1 && kWebhookEndpointsMax <= kListPageMax);
// Delivery (webhooks/delivery_worker.h; api.md, Webhooks). An attempt not answered 2xx within the
// time-out fails; an endpoint whose attempts have failed for 5 days without one delivered is disabled.
inline constexpr std::int64_t kWebhookDeliveryTimeoutMs = 10'000;
inline constexpr std::int64_t kWebhookDisableAfterFailingMs = 5 * kDayMs;
// One instance delivers at a time: it holds the lease lock kWebhookDeliveryLockKey, renewed every
// renew interval; a dead deliverer's lease runs out within the TTL and another instance takes over.
inline constexpr std::string_view kWebhookDeliveryLockKey = "tollgate:webhook-delivery";
inline constexpr std::int64_t kWebhookDeliveryLockTtlMs = 10'000;
inline constexpr std::int64_t kWebhookDeliveryLockRenewMs = 2'000;
// A round of one endpoint: at most this many feed events read after its cursor, and at most this many
// due retries; attempts in flight at most per endpoint and in total (every queue bounded).
inline constexpr std::int64_t kWebhookFeedEventsPerRoundMax = 256;
inline constexpr std::int64_t kWebhookRetriesPerRoundMax = 64;
inline constexpr std::size_t kWebhookInFlightPerEndpointMax = 16;
inline constexpr std::size_t kWebhookInFlightMax = 256;
// The answer body read from a receiver at most (it is not kept), and an attempt's error text kept.
inline constexpr std::size_t kWebhookAnswerBodyBytesMax = 64 * 1024;
inline constexpr std::size_t kWebhookDeliveryErrorBytesMax = 256;
// How often the deliverer re-reads the endpoints, and waits at most for new events when caught up.
inline constexpr std::int64_t kWebhookEndpointsRefreshMs = 1'000;
inline constexpr std::int64_t kWebhookIdleWaitMs = 1'000;
static_assert(kWebhookDeliveryLockRenewMs * 3 <= kWebhookDeliveryLockTtlMs);
static_assert(kWebhookInFlightPerEndpointMax <= kWebhookInFlightMax);

// --- Moved here from the files that used them (every limit lives here) --------------------------

// The group committer: committed batches waiting for the syncer, at most (a slow disk or a slow
// callback slows the writer instead of growing memory; ledger/group_commit.h).
inline constexpr std::size_t kCommittedBatchesMax = 8;
// The ledger's prune pass (finished idempotency keys, idle shared rate-limit rows) runs this often.
inline constexpr std::int64_t kCoordPruneIntervalMsDefault = 60'000;
// A full local rate-limit table (coord/local_limiter.h) looks at most this many idle keys to make
// room for a new one: a flood of new keys costs each check a bounded number of look-ups.
inline constexpr std::size_t kLocalRateScanKeysMax = 8;

// Jobs (jobs/runner.h): a claim or an end the database refused is tried again after
// kJobWriteRetryMs, at most kJobWriteTriesMax times (then the job is left to recovery: its lease
// expires). At a stop, aborted provider calls are waited for in steps of kJobStopPollMs, at most
// kJobStopPollsMax steps, and runs between steps at most kJobStopWaitMs.
inline constexpr std::int64_t kJobWriteRetryMs = 1'000;
inline constexpr int kJobWriteTriesMax = 30;
inline constexpr std::int64_t kJobStopPollMs = 10;
inline constexpr int kJobStopPollsMax = 500;
inline constexpr std::int64_t kJobStopWaitMs = 5'000;
// A provider's configuration (config/config.h) when it names none: its call's time-out, its
// expected duration, and how many attempts a job makes.
inline constexpr std::int64_t kProviderTimeoutMsDefault = 60'000;
inline constexpr std::int64_t kProviderExpectedDurationMsDefault = 20'000;
inline constexpr std::int64_t kProviderAttemptsDefault = 3;
// The provider client (jobs/provider_client.h): an exchange's time-out when none is given, the
// connect time-out, idle connections kept per host and how long, how often idle ones are swept,
// and the largest answer head and body read (larger: connection_lost).
inline constexpr std::int64_t kProviderExchangeTimeoutMsDefault = 60'000;
inline constexpr std::int64_t kProviderConnectTimeoutMsDefault = 5'000;
// A status question waits at most this long (or the provider's timeout_ms, if shorter): it is asked
// again later, so a slow status URL never holds a job for a whole call's time-out.
inline constexpr std::int64_t kProviderStatusTimeoutMsMax = 30'000;
inline constexpr std::size_t kProviderIdleConnectionsPerHostMaxDefault = 64;
inline constexpr std::int64_t kProviderIdleConnectionTtlMsDefault = 30'000;
inline constexpr std::int64_t kProviderIdleSweepIntervalMs = 5'000;
inline constexpr std::uint32_t kProviderAnswerHeadBytesMax = 64 * 1024;
inline constexpr std::size_t kProviderAnswerBodyBytesMaxDefault = 1 << 20;

// Storage: how many times a batch is run again after losing a race to another instance
// (store/batch_runner.h, PostgreSQL); PostgreSQL's reader connections (the writer is one more),
// its connect and statement time-outs (also any lock wait) when not configured.
inline constexpr int kConflictRetriesMaxDefault = 16;
inline constexpr int kPgReadersMaxDefault = static_cast<int>(kDatabasePoolSizeDefault);
inline constexpr int kPgConnectTimeoutMsDefault = static_cast<int>(kDatabaseTimeoutMsDefault);
inline constexpr int kPgStatementTimeoutMsDefault = static_cast<int>(kDatabaseTimeoutMsDefault);
// SQLite: a statement's wait for a lock another process holds; reader connections kept open; each
// connection's page cache (KiB); the background checkpoint's interval; the WAL pages past which the
// writer checkpoints by itself; the WAL batching layer's buffer, and the largest write it hands to
// the base VFS at once (the unix VFS truncates a write's size to 17 bits: pieces below 128 KiB).
inline constexpr int kSqliteBusyTimeoutMsDefault = 5'000;
inline constexpr int kSqliteReadersMaxDefault = 4;
inline constexpr int kSqliteCacheKibDefault = 64 * 1024;
inline constexpr int kSqliteCheckpointIntervalMsDefault = 100;
inline constexpr int kSqliteWalAutocheckpointPagesDefault = 20'000;
inline constexpr std::size_t kWalBufferBytesMax = 8 * 1024 * 1024;
inline constexpr std::size_t kWalWriteBytesMax = 31 * 4096;

// A rate-limit policy admits at most this many attempts per millisecond of its period (one per
// microsecond: the GCRA's emission interval is whole nanoseconds; config and coord check it).
inline constexpr std::int64_t kRateAttemptsPerMsMax = 1'000;
// LedgerOptions::events_poll_interval_ms: at most this.
inline constexpr std::int64_t kEventsPollIntervalMsMax = 60'000;

// An admin key file (service/admin_key_file.h) is read up to this many bytes (a generated key is 47).
inline constexpr std::size_t kAdminKeyFileBytesMax = 4096;

// The client library and the CLI (client/, app/cli/): the largest answer read (a page of 1000
// events or holds is well under 1 MiB) and answer head; --timeout-ms at most; `events --follow`
// polls this often and asks the server to hold an empty read this long (so an interrupt ends it
// within that); `job wait` asks the server to hold each long poll at most kJobWaitMsMax and gives
// its answer this long to arrive after that.
inline constexpr std::uint64_t kClientAnswerBytesMax = 32 * 1024 * 1024;
inline constexpr std::uint32_t kClientAnswerHeadBytesMax = 64 * 1024;
inline constexpr std::int64_t kCliTimeoutMsMax = 3'600'000;
inline constexpr std::int64_t kCliFollowIntervalMs = 500;
inline constexpr std::int64_t kCliFeedWaitMs = 1'000;
inline constexpr std::int64_t kCliJobWaitAnswerGraceMs = 1'000;

// Payments (api.md "Payments"): a provider's signature older (or newer) than this is refused; at most
// this many signing secrets configured; a pack's credits and metadata.tollgate_credits at most
// kAmountMax; a payment provider's event body at most the API's body limit.
inline constexpr std::int64_t kPaymentSignatureToleranceMsDefault = 300'000;
inline constexpr std::int64_t kPaymentSignatureToleranceMsMax = 86'400'000;
inline constexpr std::size_t kPaymentSigningSecretsMax = 16;
// [payments.webhook] secret: "whsec_" + base64 of at least this many bytes (a shorter key is refused
// at start-up).
inline constexpr std::size_t kPaymentWebhookSecretBytesMin = 24;

static_assert(kWalWriteBytesMax < 128 * 1024);
static_assert(kCliFeedWaitMs <= kEventsWaitMsMax);
static_assert(kEventsPollIntervalMsDefault <= kEventsPollIntervalMsMax);

}  // namespace tollgate::limits
