// tollgate store/sqlite: how the SQLite store writes a batch, on its writer connection.
//
// SqliteBatchIo is the batch path (store/batch_runner.h): inside BEGIN IMMEDIATE — the one writer
// holds the whole database, so every account it reads is exclusively its own — it loads the batch's
// rows with prepared statements (each a primary-key or index lookup), and after the in-memory
// decision writes each touched account once, then the holds, events, transfers and keys.
//
// It does not wait for durability: COMMIT runs with synchronous=NORMAL and the store's sync()
// flushes the WAL (see sqlite_store.h for the power-loss argument).
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/thread_annotations.h"
#include "slices.h"
#include "store/batch_runner.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

class SqliteBatchIo final : public BatchIo {
 public:
  SqliteBatchIo(Conn& db, const Clock& clock) : db_(db), clock_(clock) {}
  batch::Snapshot begin_and_load(const batch::Keys& keys) override;
  std::vector<std::int64_t> write_and_commit(const batch::Effects& effects) override;
  void rollback() noexcept override;
  FailureKind classify(const std::exception& failure) const override;
  Error to_error(const std::exception& failure) const override;

  // The largest event id this io committed (0: none yet).
  std::int64_t last_event_id() const { return last_event_id_; }

 private:
  // The credit lots of the snapshot (batch.h LedgerSnapshot::lots); `loaded`: the accounts in it.
  void load_lots(const batch::Keys& keys, batch::Snapshot& s, std::unordered_set<std::string>& loaded);
  void write_lots(const batch::Effects& e);

  Conn& db_;
  const Clock& clock_;
  std::int64_t last_event_id_ = 0;
};

// The statement just run changed exactly one row; otherwise a row the batch read changed behind the
// writer's lock, which cannot happen while it holds the database: an SqlError (SQLITE_CORRUPT).
void expect_one_change(Conn& db, const std::string& what);

// Binds an event's reason, overdraft_limit, max_active_holds, frozen, expires_at_ms and
// low_balance_threshold (NULL where
// unset) from parameter `first` on, in that order (the column order of kEventColumns after used_after).
void bind_event_details(Stmt& s, int first, const Event& e);
// Binds a hold's draws in their stored form (NULL for none: core/lots.h draws_text).
void bind_draws(Stmt& s, int index, const std::vector<LotDraw>& draws);

// Inserts rows with multi-row INSERT statements — a third cheaper per row than one statement per
// row, measured here — in chunks of 64, 16, 4 and 1 rows. `head` is "INSERT INTO t (c1, …, cN)";
// bind(stmt, first, row) binds the row's N values from parameter `first` on. Each chunk size's
// statement is built once per process and prepared once per connection (Conn caches by address).
template <typename Row, typename Bind>
void insert_rows(Conn& db, const char* head, int columns, const std::vector<Row>& rows, Bind&& bind) {
  static constexpr std::size_t kChunks[] = {64, 16, 4, 1};
  static Mutex mu;
  static std::map<std::pair<const char*, std::size_t>, std::string> sql GUARDED_BY(mu);  // nodes never move
  std::size_t at = 0;
  for (std::size_t chunk : kChunks) {
    while (rows.size() - at >= chunk) {
      const std::string* text = nullptr;
      {
        MutexLock lock(mu);
        std::string& s = sql[{head, chunk}];
        if (s.empty()) {
          s = std::string(head) + " VALUES ";
          for (std::size_t r = 0; r < chunk; ++r) {
            s += r ? ",(" : "(";
            for (int c = 0; c < columns; ++c) s += c ? ",?" : "?";
            s += ")";
          }
        }
        text = &s;
      }
      Stmt& stmt = db.stmt(text->c_str());
      for (std::size_t r = 0; r < chunk; ++r) bind(stmt, static_cast<int>(r) * columns + 1, rows[at + r]);
      Query q(stmt);  // binds nothing more; resets when done
      q.step();
      at += chunk;
    }
  }
}

// SqlError → what the caller does next: transient (busy, I/O, full) → unavailable, else internal.
Error sql_failure(const SqlError& e);

}  // namespace tollgate::sqlite
