#include "store/batch_runner.h"

#include <string>

#include "core/log.h"

namespace tollgate {
namespace {

enum class Attempt : std::uint8_t { done, again };

// One attempt at the whole batch. Returns `again` when it must run once more (after a conflict or
// a lost connection, within the bounds); fills `failure` when the batch ends without committing.
Attempt attempt(BatchIo& io, std::span<const Command> commands, const batch::Keys& keys,
                std::vector<CommandResult>& results, int& conflicts, bool& reconnected, const BatchRunOptions& options,
                BatchRunCounters& counters, std::optional<Error>& failure, bool& isolate) {
  bool writing = false;  // write_and_commit() was called: the COMMIT may have been sent
  try {
    batch::Decision decision = batch::decide(commands, io.begin_and_load(keys));
    writing = true;
    const std::vector<std::int64_t> ids = io.write_and_commit(decision.effects);
    batch::fill_event_ids(decision, ids);
    results = std::move(decision.results);
    return Attempt::done;
  } catch (const std::exception& e) {
    io.rollback();
    switch (io.classify(e)) {
      case FailureKind::conflict:
        if (conflicts < options.conflict_retries_max) {
          ++conflicts;
          counters.conflict_reruns.fetch_add(1, std::memory_order_relaxed);
          return Attempt::again;
        }
        failure = Error::make(Code::unavailable, "database: the batch kept conflicting with other writers (" +
                                                     std::string(e.what()) + ")");
        return Attempt::done;
      case FailureKind::connection_lost:
        if (writing) {
          // The connection broke while the batch was being written and committed: it may have
          // committed (only its answer lost). Running it again would apply twice what has no id
          // of its own — an extend, a shared rate-limit check — so the batch answers `unavailable`
          // and each caller's retry with the same ids settles it (a replay where the id makes it
          // one). Found by the chaos soak: one extend request, two `extended` events.
          counters.unknown_commits.fetch_add(1, std::memory_order_relaxed);
          failure = Error::make(Code::unavailable,
                                "database: the connection was lost while the batch was committed, so whether it "
                                "was applied is unknown; retry with the same ids (" + std::string(e.what()) + ")");
          return Attempt::done;
        }
        if (!reconnected) {
          reconnected = true;
          counters.reconnect_reruns.fetch_add(1, std::memory_order_relaxed);
          return Attempt::again;
        }
        failure = io.to_error(e);
        return Attempt::done;
      case FailureKind::transient:
        log("warn", std::string("store: batch failed: ") + e.what());
        failure = io.to_error(e);
        return Attempt::done;
      case FailureKind::permanent:
        log("error", std::string("store: batch of ") + std::to_string(commands.size()) +
                         " failed unexpectedly: " + e.what());
        failure = io.to_error(e);
        isolate = true;
        return Attempt::done;
    }
  }
  TG_ASSERT(false && "unreachable failure kind");
}

}  // namespace

Status run_batch(BatchIo& io, std::span<const Command> commands, std::vector<CommandResult>& results,
                 const BatchRunOptions& options, BatchRunCounters& counters) {
  results.clear();
  counters.batches.fetch_add(1, std::memory_order_relaxed);
  const batch::Keys keys = batch::keys_of(commands);
  int conflicts = 0;
  bool reconnected = false;
  // Bounded: each `again` spends one conflict retry or the one reconnect.
  for (int round = 0; round <= options.conflict_retries_max + 1; ++round) {
    std::optional<Error> failure;
    bool isolate = false;
    if (attempt(io, commands, keys, results, conflicts, reconnected, options, counters, failure, isolate) ==
        Attempt::again) {
      continue;
    }
    if (!failure) {
      TG_ASSERT(results.size() == commands.size());
      return ok_status();
    }
    if (!isolate) return *failure;
    // A permanent failure: find the command at fault. Alone, a command that still fails answers
    // `internal` and the others are applied, each in its own transaction, in order.
    if (commands.size() == 1) {
      results.assign(1, *failure);
      return ok_status();
    }
    counters.isolated_batches.fetch_add(1, std::memory_order_relaxed);
    std::vector<CommandResult> all;
    all.reserve(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i) {
      std::vector<CommandResult> one;
      const Status s = run_batch(io, commands.subspan(i, 1), one, options, counters);
      if (!s) {
        all.push_back(s.error());
      } else {
        all.push_back(std::move(one.at(0)));
      }
    }
    results = std::move(all);
    return ok_status();
  }
  return Error::make(Code::unavailable, "database: the batch could not be applied");
}

}  // namespace tollgate
