// tollgate store: the one way every backend applies a batch of commands.
//
//   keys = batch::keys_of(commands)
//   snapshot = io.begin_and_load(keys)      the backend: open the transaction, lock, read
//   decision = batch::decide(commands, snapshot)   pure, in memory (core/batch.h)
//   ids = io.write_and_commit(decision.effects)    the backend: set-based writes, COMMIT
//
// What a failure means is decided here, once for every backend:
//   - conflict (another writer won a race: a unique key inserted first, a deadlock): the batch runs
//     again from the start — the reload sees the winner's rows, so a retried reserve is a replay;
//     at most conflict_retries_max times, then the batch answers `unavailable`;
//   - connection lost while loading (nothing written yet): once more on a new connection, then
//     `unavailable`;
//   - connection lost while writing and committing: `unavailable`, never run again here — the
//     COMMIT may have landed with only its answer lost, and not every command is idempotent (an
//     extend, a shared rate-limit check would apply twice). The caller's retry with the same ids
//     settles it: a replay for what has an id, a new request for what has none;
//   - transient (busy, out of space, a time-out): the whole batch answers `unavailable` — or
//     `storage_full` when the disk is full (the backend's to_error() tells) — nothing of it
//     happened, and a retry with the same ids is safe;
//   - permanent (a bug, a broken row, a constraint the decision should have ruled out): the batch is
//     run again one command per transaction, so only the command at fault answers `internal`.
//
// Thread safety: run_batch() uses `io` from the calling thread only; one batch at a time per io.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <span>
#include <vector>

#include "core/batch.h"
#include "core/limits.h"
#include "core/result.h"
#include "slices.h"

namespace tollgate {

enum class FailureKind : std::uint8_t { conflict, connection_lost, transient, permanent };

// A backend's half of a batch's transaction. Methods throw the backend's own exceptions;
// classify() and to_error() tell the runner what they mean.
class BatchIo {
 public:
  virtual ~BatchIo() = default;
  // Opens the transaction, locks every account the batch may change — Keys::accounts and the
  // accounts of the holds Keys::hold_seqs names, in id order, waiting for them; then the accounts
  // of the oldest overdue holds for the reaper's Keys::overdue_max, without waiting — reads the
  // clock once, and loads every row `keys` names (batch::Snapshot says which) — the ledger's, then
  // each slice's by its loader for the dialect (src/slices.h). Every hold is read after its account
  // is locked, so it is current for the rest of the transaction.
  virtual batch::Snapshot begin_and_load(const batch::Keys& keys) = 0;
  // Writes `effects` (accounts first, then holds, each slice's rows, events, transfers, keys; each
  // changed row guarded by its `before` values, so a row changed behind the batch's lock is a
  // failure, not a lost write) and commits. Returns the ids of effects.events, increasing in their
  // order.
  virtual std::vector<std::int64_t> write_and_commit(const batch::Effects& effects) = 0;
  // Rolls back whatever transaction is open. Never throws.
  virtual void rollback() noexcept = 0;
  virtual FailureKind classify(const std::exception& failure) const = 0;
  // The error a batch (or one command) answers for `failure` (unavailable or internal, with detail).
  virtual Error to_error(const std::exception& failure) const = 0;
};

struct BatchRunOptions {
  int conflict_retries_max = limits::kConflictRetriesMaxDefault;
};

// Counters of the runner's retries, for tests and metrics. Relaxed atomics: figures, not sync.
struct BatchRunCounters {
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> conflict_reruns{0};      // batches run again after losing a race
  std::atomic<std::uint64_t> reconnect_reruns{0};     // batches run again on a new connection
  std::atomic<std::uint64_t> unknown_commits{0};      // connection lost while committing: `unavailable`
  std::atomic<std::uint64_t> isolated_batches{0};     // batches split one command per transaction
};

// Applies `commands` in one transaction through `io`; `results` gets one entry per command. Returns
// an error only when the batch as a whole did not happen (then `results` must be ignored).
Status run_batch(BatchIo& io, std::span<const Command> commands, std::vector<CommandResult>& results,
                 const BatchRunOptions& options, BatchRunCounters& counters);

}  // namespace tollgate
