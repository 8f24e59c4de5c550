#include "store/sqlite/sqlite_reads.h"

#include <string>

#include "store/sqlite/sqlite_coord.h"
#include "store/sqlite/sqlite_read.h"
#include "store/sqlite/sqlite_rows.h"

namespace tollgate::sqlite {
namespace {

class Row final : public reads::ReadRow {
 public:
  explicit Row(Stmt& s) : s_(s) {}
  std::int64_t int64(int column) const override { return s_.int64(column); }
  std::optional<std::int64_t> optional_int64(int column) const override { return s_.optional_int64(column); }
  std::string text(int column) const override { return s_.text(column); }
  std::optional<std::string> optional_text(int column) const override { return s_.optional_text(column); }

  Hold hold() const override { return read_hold(s_); }
  Event event() const override { return read_event(s_); }
  ApiKey key() const override { return read_key(s_); }
  TransferRecord transfer() const override {
    auto [transfer, event] = read_transfer(s_);
    return TransferRecord{std::move(transfer), std::move(event)};
  }
  jobs::Job job() const override { return read_job(s_); }
  jobs::JobEntry job_entry() const override { return read_job_entry(s_); }
  coord::Lock lock() const override { return read_lock(s_); }
  coord::IdempotencyKey idempotency_key() const override { return read_idem(s_); }
  Lot lot() const override { return read_lot(s_); }

 private:
  Stmt& s_;
};

class ReadConn final : public reads::ReadConn {
 public:
  explicit ReadConn(Conn& db) : db_(db) {}

  void each(const std::string& sql, reads::SqlValues values,
            const std::function<void(const reads::ReadRow&)>& on_row) override {
    Stmt& s = db_.stmt(sql.c_str());
    struct Reset {
      Stmt& s;
      ~Reset() { s.reset(); }
    } reset{s};
    int index = 1;
    for (const reads::SqlValue& v : values) {
      if (const auto* i = v.integer()) {
        s.bind(index, *i);
      } else if (const auto* t = v.text()) {
        s.bind(index, *t);
      } else {
        s.bind_null(index);
      }
      ++index;
    }
    const Row row(s);
    while (s.step()) on_row(row);
  }

  std::optional<Account> account_row(std::string_view account_id) override {
    return sqlite::account_row(db_, account_id);
  }
  std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) override {
    return sqlite::account_view(db_, account_id, now_ms);
  }
  std::vector<Account> account_views(std::string_view after, std::int64_t limit, std::int64_t now_ms) override {
    std::vector<std::string> ids;
    each(reads::read_sql(reads::Dialect::sqlite).account_ids_after, {after, limit},
         [&](const reads::ReadRow& r) { ids.push_back(r.text(0)); });
    std::vector<Account> out;
    out.reserve(ids.size());
    for (const std::string& id : ids) {
      auto a = sqlite::account_view(db_, id, now_ms);
      TG_ASSERT(a.has_value());  // read in the same snapshot; accounts are never deleted
      out.push_back(std::move(*a));
    }
    return out;
  }
  std::optional<Hold> hold_by_id(std::string_view hold_id) override { return sqlite::hold_by_id(db_, hold_id); }

 private:
  Conn& db_;
};

}  // namespace

Status SqliteReadSource::run(const std::function<void(reads::ReadConn&, std::int64_t)>& body) {
  return read_snapshot(readers_, [&](Conn& db) -> Status {
    ReadConn conn(db);
    body(conn, clock_.now_ms());
    return ok_status();
  });
}

}  // namespace tollgate::sqlite
