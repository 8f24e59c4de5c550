// tollgate core: a batch of write commands decided in memory — what it reads, what it decides, what
// it writes. Pure: no I/O, no clock, no threads.
//
// A store applies a batch (group commit) in three steps, the same for every backend:
//   1. keys_of(commands): every row the batch may read or change — accounts, holds by id and by
//      request_id, transfers by reference, API keys, the reaper's overdue holds.
//   2. the backend loads those rows into a Snapshot while it holds every account the batch may
//      change exclusively (SQLite: the one writer inside BEGIN IMMEDIATE; PostgreSQL: the accounts'
//      rows locked FOR UPDATE in id order before any hold is read), and reads `now` once.
//   3. decide(commands, snapshot) runs every command in order against that in-memory state with
//      core/rules — each decision sees the effects of the ones before it — and answers each command
//      and the Effects: every touched account's final row once, the new and changed holds, the
//      events in order, transfers and keys. The backend writes the Effects set-based and commits.
// Deciding under the batch's exclusive lock on the account row is exactly as safe as one
// conditional UPDATE per command: nobody else can change the row between the read and the write.
//
// A refused command changes nothing (its result is the error); the one write a refused command may
// cause is the expiry of the account's overdue holds it found (the reaper's work done early, so
// that no caller waits on a zombie) — the same rule store/execute.cc follows.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "coord/coord_batch.h"
#include "core/commands.h"
#include "core/model.h"

namespace tollgate::batch {

// Every key a batch reads. Lists are sorted and free of duplicates.
struct Keys {
  // Accounts named by the commands. Together with the accounts of `hold_seqs`' holds, these are the
  // accounts the batch may change: a backend locks them (in id order) before it reads any hold.
  std::vector<std::string> accounts;
  std::vector<std::string> hold_ids;       // holds named by id (commit, release, extend)
  std::vector<std::int64_t> hold_seqs;     // their sequence numbers (well-formed ids only)
  std::vector<std::string> request_ids;    // holds looked up by request_id (reserve)
  std::vector<std::string> references;     // transfers looked up by reference (credit, debit)
  std::vector<std::string> key_ids;        // API keys (create, revoke)
  // Jobs by client_request_id (submit, claim, end). Every job command also names the account its
  // hold changes (submit: by account_id; claim and end: by hold id), so a job row is only changed
  // under its account's lock.
  std::vector<std::string> job_ids;
  // Accounts whose effective view an outcome reports (create_account, credit, debit): their
  // overdue totals and oldest live holds are loaded (AccountView).
  std::vector<std::string> view_accounts;
  std::int64_t new_holds_max = 0;     // reserve commands: the most hold sequence numbers needed
  std::int64_t overdue_max = 0;       // the reaper's passes: overdue holds of any account, at most
  std::int64_t live_holds_ending_max = 0;  // commits and releases: live holds that may end
  // Reserves, debits and commits: each may expire its account's overdue holds (at most
  // limits::kReaperBatchMaxDefault at a time) when the stored row refuses it.
  std::int64_t zombie_expiring_commands = 0;
  // Lock, idempotency-key and rate-limit rows (coord/coord_batch.h): no account involved.
  coord::CoordKeys coord;

  // The oldest live holds an AccountView must list: one more than the batch can end.
  std::int64_t oldest_live_needed() const { return live_holds_ending_max + 1; }
  // The overdue holds to load per locked account: as many as the batch's commands may expire.
  std::int64_t overdue_per_account_max() const;
  // The oldest overdue holds (of any account) the reaper's passes must see: their own maximum plus
  // every overdue hold the commands before them may expire first — those named by id, and the
  // `overdue_loaded` loaded for the locked accounts. 0 without a reaper pass.
  std::int64_t reaper_load_max(std::int64_t overdue_loaded) const;
  // An upper bound of reaper_load_max() known before anything is loaded (for locking the accounts
  // of those holds in the same round trip as the loads).
  std::int64_t reaper_load_bound() const;
};

// The keys of `commands` (exhaustive: a command kind without keys does not compile).
Keys keys_of(std::span<const Command> commands);

// What an account's effective view needs beyond its row: readers see overdue holds as expired
// (their amounts as available) and report the age of the oldest live hold.
struct AccountView {
  std::string account_id;
  std::int64_t overdue_count = 0;  // active holds past their deadline at now (all of them)
  std::int64_t overdue_sum = 0;
  // The oldest live (active, not overdue) holds as (created_at_ms, seq), ascending, at most
  // Keys::oldest_live_needed() of them — enough that the oldest survivor is known after the batch
  // ended as many live holds as it can.
  std::vector<std::pair<std::int64_t, std::int64_t>> oldest_live;
};

// The rows a batch decides on, as the backend read them under the batch's locks.
struct Snapshot {
  std::int64_t now_ms = 0;
  // Account rows as stored (no overdue adjustment). Every account here is locked for the batch:
  // the named ones, those of the holds named, and those whose overdue holds the reaper may expire.
  std::vector<Account> accounts;
  // Holds: named by id or request_id; each locked account's overdue holds (oldest deadline first,
  // then creation order; at most Keys::overdue_per_account_max() per account); the oldest overdue
  // holds for the reaper (at most Keys::reaper_load_max(), of locked accounts). Duplicates are
  // allowed (the same row twice).
  std::vector<Hold> holds;
  std::vector<std::pair<Transfer, Event>> transfers;  // by reference, with the event each wrote
  std::vector<ApiKey> keys;
  std::vector<jobs::Job> jobs;     // of Keys::job_ids that exist
  std::vector<AccountView> views;  // of Keys::view_accounts that exist
  // Sequence numbers for new holds, ascending, at least Keys::new_holds_max of them (SQLite: the
  // next ones after the largest; PostgreSQL: taken from its sequence — unused ones leave gaps).
  std::vector<std::int64_t> new_hold_seqs;
  coord::CoordSnapshot coord;  // of Keys::coord
};

// A row before and after the batch.
template <typename Row>
struct Change {
  Row before;
  Row after;
};

// What the batch writes. Every list is in a deterministic order.
struct Effects {
  std::vector<Account> new_accounts;                 // final rows, by account_id
  std::vector<Change<Account>> changed_accounts;     // by account_id; each account once
  std::vector<Hold> new_holds;                       // final rows, by request_id
  std::vector<Change<Hold>> changed_holds;           // by hold_id
  // In the order they happened; event_id 0: the backend assigns ids that increase in this order.
  std::vector<Event> events;
  // New transfers, by reference; event_id 0, `event_index` names their event in `events`.
  struct NewTransfer {
    Transfer transfer;
    std::size_t event_index = 0;
  };
  std::vector<NewTransfer> transfers;
  std::vector<ApiKey> new_keys;
  std::vector<Change<ApiKey>> changed_keys;
  std::vector<jobs::Job> new_jobs;                   // by client_request_id
  std::vector<Change<jobs::Job>> changed_jobs;       // by client_request_id
  std::vector<jobs::JobEntry> job_entries;           // appended to the jobs' histories, in order
  coord::CoordEffects coord;                         // lock, idempotency-key and rate-limit rows

  bool empty() const {
    return new_accounts.empty() && changed_accounts.empty() && new_holds.empty() && changed_holds.empty() &&
           events.empty() && transfers.empty() && new_keys.empty() && changed_keys.empty() && new_jobs.empty() &&
           changed_jobs.empty() && job_entries.empty() && coord.empty();
  }
};

struct Decision {
  std::vector<CommandResult> results;  // one per command
  Effects effects;
  // Results that carry a new event (a transfer's TransferOutcome): (result index, event index).
  // Once the backend assigned event ids, fill_event_ids() copies them in.
  std::vector<std::pair<std::size_t, std::size_t>> result_events;
};

// Decides `commands` in order against `snapshot` (which must hold the rows keys_of(commands)
// names). Refusals are results; a bug is an assertion.
Decision decide(std::span<const Command> commands, Snapshot snapshot);

// Copies the event ids the backend assigned (one per Effects::events, increasing) into the results
// that report their event.
void fill_event_ids(Decision& decision, std::span<const std::int64_t> event_ids);

}  // namespace tollgate::batch
