#include "store/postgres/pg_reads.h"

#include <string>

#include "store/postgres/pg_coord.h"
#include "store/postgres/pg_read.h"
#include "store/postgres/pg_rows.h"

namespace tollgate::pg {
namespace {

class Row final : public reads::ReadRow {
 public:
  Row(const Rows& r, int row) : r_(r), i_(row) {}
  std::int64_t int64(int column) const override { return r_.int64(i_, column); }
  std::optional<std::int64_t> optional_int64(int column) const override { return r_.optional_int64(i_, column); }
  std::string text(int column) const override { return r_.text(i_, column); }
  std::optional<std::string> optional_text(int column) const override { return r_.optional_text(i_, column); }

  Hold hold() const override { return read_hold(r_, i_); }
  Event event() const override { return read_event(r_, i_); }
  ApiKey key() const override { return read_key(r_, i_); }
  TransferRecord transfer() const override {
    auto [transfer, event] = read_transfer(r_, i_);
    return TransferRecord{std::move(transfer), std::move(event)};
  }
  jobs::Job job() const override { return read_job(r_, i_); }
  jobs::JobEntry job_entry() const override { return read_job_entry(r_, i_); }
  coord::Lock lock() const override { return read_lock(r_, i_); }
  coord::IdempotencyKey idempotency_key() const override { return read_idem(r_, i_); }
  Lot lot() const override { return read_lot(r_, i_); }

 private:
  const Rows& r_;
  const int i_;
};

class ReadConn final : public reads::ReadConn {
 public:
  explicit ReadConn(Conn& db) : db_(db) {}

  void each(const std::string& sql, reads::SqlValues values,
            const std::function<void(const reads::ReadRow&)>& on_row) override {
    std::vector<std::optional<std::string>> text;
    text.reserve(values.size());
    for (const reads::SqlValue& v : values) {
      if (const auto* i = v.integer()) {
        text.emplace_back(std::to_string(*i));
      } else if (const auto* t = v.text()) {
        text.emplace_back(*t);
      } else {
        text.emplace_back(std::nullopt);
      }
    }
    const Rows r = db_.query(sql, Params::of_text(std::move(text)));
    for (int i = 0; i < r.size(); ++i) on_row(Row(r, i));
  }

  std::optional<Account> account_row(std::string_view account_id) override {
    return pg::account_row(db_, account_id, /*for_update=*/false);
  }
  std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) override {
    return pg::account_view(db_, account_id, now_ms);
  }
  std::vector<Account> account_views(std::string_view after, std::int64_t limit, std::int64_t now_ms) override {
    static const std::string sql = kAccountViewSql + "WHERE a.account_id > $1 ORDER BY a.account_id LIMIT $3";
    const Rows r = db_.query(sql, after, now_ms, limit);
    std::vector<Account> out;
    out.reserve(static_cast<std::size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) out.push_back(read_account_view(r, i, now_ms));
    return out;
  }
  std::optional<Hold> hold_by_id(std::string_view hold_id) override {
    return pg::hold_by_id(db_, hold_id, /*for_update=*/false);
  }

 private:
  Conn& db_;
};

}  // namespace

Status PgReadSource::run(const std::function<void(reads::ReadConn&, std::int64_t)>& body) {
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t now_ms) -> Status {
    ReadConn conn(db);
    body(conn, now_ms);
    return ok_status();
  });
}

}  // namespace tollgate::pg
