// tollgate store/postgres: how the PostgreSQL store writes a batch, on its writer connection.
//
// PgBatchIo is the batch path (store/batch_runner.h), two round trips per batch:
//   1. one pipeline: BEGIN; the clock, read once into the transaction (`tollgate.now`, which every
//      later statement uses); the accounts the batch may change locked FOR UPDATE in id order (the
//      named ones and those of the holds named); the reaper's accounts FOR UPDATE SKIP LOCKED (an
//      account another instance is writing is its work now, and a lock never waited for cannot
//      deadlock); then — each statement a fresh snapshot taken after the locks, so every hold read
//      is current — the holds by id and by request_id, the transfers by reference with their
//      events, each locked account's overdue holds, the views' figures, the keys, and the new
//      holds' sequence numbers. (A reaper pass adds one round trip: its accounts' overdue holds.)
//   2. one pipeline: every write set-based — unnest() arrays, one statement per table — each
//      changed row guarded by its `before` values (tollgate_assert() aborts the transaction if a
//      guard finds fewer rows, so a row changed behind the lock is a failure, never a lost write),
//      then COMMIT (synchronous_commit=on: durable when it answers; no statement time-out on it).
// Holds are never locked: every writer changes a hold only while it holds the hold's account.
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "slices.h"
#include "store/batch_runner.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"

namespace tollgate::pg {

class PgBatchIo final : public BatchIo {
 public:
  // `writer` is (re)connected when missing or broken.
  PgBatchIo(std::unique_ptr<Conn>& writer, const PgOptions& options) : writer_(writer), options_(options) {}
  batch::Snapshot begin_and_load(const batch::Keys& keys) override;
  std::vector<std::int64_t> write_and_commit(const batch::Effects& effects) override;
  void rollback() noexcept override;
  FailureKind classify(const std::exception& failure) const override;
  Error to_error(const std::exception& failure) const override;

 private:
  std::unique_ptr<Conn>& writer_;
  const PgOptions& options_;
};

// A column of `rows` (field(row) for each), for the unnest() arrays of set-based writes.
template <typename T, typename F>
auto column(const std::vector<T>& rows, F&& field) {
  std::vector<std::decay_t<decltype(field(rows.front()))>> out;
  out.reserve(rows.size());
  for (const T& row : rows) out.push_back(field(row));
  return out;
}

}  // namespace tollgate::pg
