// The differential test of the batch write path (core/batch.cc + SqliteBatchIo / PgBatchIo): a
// seeded random but valid sequence of commands mixing every command kind, on one hot account and
// on many accounts, applied to
//   NEW     the batch path, each round as ONE apply() (one transaction, decided in memory),
//   ORACLE  the per-statement path (store/execute.cc), ONE command per apply() — each command its
//           own transaction: exactly "applied one per transaction",
//   ORACLE2 the per-statement path, each round as ONE apply() (the old group-commit behaviour; it
//           tells a batch-path bug from a difference of batching itself),
// and compared after every round: every result (ok or error code and detail text, every field of
// every outcome), every table row (accounts, holds, transfers, events, api_keys, read raw from the
// database) and every read of the Store API (accounts as readers see them, holds, events, stats,
// keys), and a clean audit on every store.
//
// Ids. On SQLite every id must be identical (both paths take max(seq) + 1 and max(event_id) + 1).
// On PostgreSQL the batch path takes a hold sequence number for every reserve of the batch up front
// (unused ones leave gaps) and event ids come from a sequence: there hold ids are compared through
// the request_id that made them ("H<request_id>") and event ids by their rank in the global event
// order (the order must be the same), in results, rows and detail texts alike.
//
// Rounds. Hold ids are only known once a reserve has been applied, so commands are generated in
// rounds: a round is a batch built from what the ORACLE knew after the rounds before it (the other
// stores must agree, or the test has already failed). Between rounds a ManualClock moves on, so
// holds expire: zombies (overdue, not reaped), late commits under each policy, the reaper's passes.
//
// Honesty: every run counts each kind of command by its outcome and asserts that each kind of
// success and each kind of refusal occurred (and replays of what the same batch made), so a
// generator that stopped producing (say) late commits fails instead of comparing trivia; and the
// batch path must neither have re-run nor isolated a batch (a batch split into one command per
// transaction would hide a bug from this test). A run stops at its first differing round (later
// rounds would only repeat the difference) and prints that round's batch.
//
// Seeds: a fixed list per backend (bounded: the whole file runs in well under a minute on
// PostgreSQL, whose oracle pays a durable commit per command), or TOLLGATE_DIFFERENTIAL_SEEDS=1,2,3
// to run others. Every failure names its seed.
//
// Also here: hand-picked cases for what random rounds reach rarely (DifferentialHandPicked), and
// refusals in the middle of a set-based batch (RefusalsInABatch).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "core/hold_id.h"
#include "core/limits.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

enum class BackendKind { sqlite, postgres };

std::string backend_name(BackendKind kind) { return kind == BackendKind::sqlite ? "sqlite" : "postgres"; }

// ================================================================================================
// canonical text of everything compared

std::string opt(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : "null"; }
std::string opt(const std::optional<std::string>& v) { return v ? "'" + *v + "'" : "null"; }

// Maps a store's hold ids and event ids to names both stores share (see the file comment). Exact
// (SQLite): every id is its own name.
struct Canon {
  bool exact = true;
  std::map<std::string, std::string> holds;     // hold id → "H<request_id>"
  std::map<std::int64_t, std::int64_t> events;  // event id → rank in the global order (1-based)

  std::string hold(const std::string& id) const {
    if (exact) return id;
    auto it = holds.find(id);
    return it == holds.end() ? id : it->second;  // ids no hold has (malformed, unknown) are the same on both
  }
  std::string hold(const std::optional<std::string>& id) const { return id ? "'" + hold(*id) + "'" : "null"; }
  std::string event(std::int64_t id) const {
    if (exact) return std::to_string(id);
    auto it = events.find(id);
    return it == events.end() ? "E?" + std::to_string(id) : "E" + std::to_string(it->second);
  }
  // Hold ids inside a text (error details name them).
  std::string text(const std::string& s) const {
    if (exact) return s;
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
      const std::size_t at = s.find("hold_", i);
      if (at == std::string::npos) {
        out += s.substr(i);
        break;
      }
      out += s.substr(i, at - i);
      std::size_t end = at;
      while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) ++end;
      out += hold(s.substr(at, end - at));
      i = end;
    }
    return out;
  }
};

std::string show(const Account& a) {
  std::ostringstream o;
  o << "account " << a.account_id << " available=" << a.balances.available << " reserved=" << a.balances.reserved
    << " used=" << a.balances.used << " purchased=" << a.balances.purchased << " overdraft=" << a.overdraft_limit
    << " max_holds=" << opt(a.max_active_holds) << " frozen=" << a.frozen << " active_holds=" << a.active_holds
    << " oldest_age=" << opt(a.oldest_active_hold_age_ms) << " created_at=" << a.created_at_ms;
  return o.str();
}

std::string show(const Hold& h, const Canon& c) {
  std::ostringstream o;
  o << "hold " << c.hold(h.hold_id) << " account=" << h.account_id << " request=" << h.request_id
    << " amount=" << h.amount << " committed=" << h.committed_amount << " status=" << hold_status_name(h.status)
    << " late=" << late_outcome_name(h.late_outcome) << " created_at=" << h.created_at_ms
    << " expires_at=" << h.expires_at_ms << " closed_at=" << opt(h.closed_at_ms) << " metadata=" << h.metadata_json
    << " release_reason=" << opt(h.release_reason);
  return o.str();
}

std::string show(const Event& e, const Canon& c) {
  std::ostringstream o;
  o << "event " << c.event(e.event_id) << " account=" << e.account_id << " " << event_type_name(e.type)
    << " amount=" << e.amount << " hold=" << c.hold(e.hold_id) << " job=" << opt(e.job_id)
    << " reference=" << opt(e.reference) << " reason=" << opt(e.reason) << " at=" << e.at_ms
    << " after=" << e.available_after << "/" << e.reserved_after << "/" << e.used_after;
  if (e.settings) {
    o << " settings=" << e.settings->overdraft_limit << "/" << opt(e.settings->max_active_holds) << "/"
      << e.settings->frozen;
  }
  return o.str();
}

std::string show(const ApiKey& k) {
  return "key " + k.key_id + " account=" + opt(k.account_id) + " secret=" + k.secret_sha256 +
         " created_at=" + std::to_string(k.created_at_ms) + " revoked_at=" + opt(k.revoked_at_ms) +
         " last_used_at=" + opt(k.last_used_at_ms);
}

std::string show(const Error& e, const Canon& c) {
  return std::string("error ") + std::string(code_name(e.code)) + " '" + c.text(e.detail) +
         "' available=" + opt(e.available) + " requested=" + opt(e.requested);
}

std::string show(const CommandResult& r, const Canon& c) {
  if (!r.ok()) return show(r.error(), c);
  return std::visit(
      [&](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, ExpireOutcome>) {
          return "ok expired=" + std::to_string(o.expired);
        } else if constexpr (std::is_same_v<T, KeyUseOutcome>) {
          return "ok recorded=" + std::to_string(o.recorded);
        } else if constexpr (std::is_same_v<T, LockOutcome> || std::is_same_v<T, IdempotencyOutcome> ||
                             std::is_same_v<T, RateLimitOutcome> || std::is_same_v<T, PruneOutcome>) {
          return "ok coordination";  // not generated here: the coordination conformance suite covers them
        } else {
          const std::string created = o.created ? " created " : " replay ";
          if constexpr (std::is_same_v<T, AccountOutcome>) return "ok" + created + show(o.account);
          if constexpr (std::is_same_v<T, TransferOutcome>) return "ok" + created + show(o.event, c) + " | " + show(o.account);
          if constexpr (std::is_same_v<T, HoldOutcome>) return "ok" + created + show(o.hold, c);
          if constexpr (std::is_same_v<T, KeyOutcome>) return "ok" + created + show(o.key);
          if constexpr (std::is_same_v<T, JobOutcome>) return "ok" + created + "job " + o.job.client_request_id;
        }
      },
      r.value());
}


// ================================================================================================
// a store of one backend and write path, opened fresh, owning its home

class Side {
 public:
  Side(BackendKind kind, bool per_statement, const Clock& clock, std::string label) : label_(std::move(label)) {
    if (kind == BackendKind::sqlite) {
      dir_ = std::make_unique<testing::TempDir>();
      SqliteOptions options;
      options.path = dir_->file("tollgate.db");
      options.write_path = per_statement ? SqliteWritePath::per_statement : SqliteWritePath::batch;
      auto opened = SqliteStore::open(options, clock);
      if (!opened) throw std::runtime_error("open sqlite: " + opened.error().detail);
      sqlite_ = std::move(opened).value();
      // A connection of our own for the raw rows (SQLite shares the file's locks between the
      // connections of one process, so this is safe next to the store's).
      if (sqlite3_open_v2(options.path.c_str(), &raw_sqlite_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        throw std::runtime_error("open sqlite for raw rows");
      }
    } else {
      schema_ = std::make_unique<testing::PgSchema>(*testing::postgres_server_uri());
      PgOptions options;
      options.uri = schema_->uri();
      options.clock = &clock;
      options.readers_max = 2;
      options.statement_timeout_ms = 30'000;  // a hang detector (see tests/support/backends.cc)
      options.write_path = per_statement ? PgWritePath::per_statement : PgWritePath::batch;
      auto opened = PgStore::open(options);
      if (!opened) throw std::runtime_error("open postgres: " + opened.error().detail);
      pg_ = std::move(opened).value();
      raw_pg_ = pg::Conn::connect(schema_->uri(), pg::ConnectOptions{});
    }
    canon_.exact = kind == BackendKind::sqlite;
  }
  ~Side() {
    if (raw_sqlite_) sqlite3_close(raw_sqlite_);
    raw_pg_.reset();
    sqlite_.reset();
    pg_.reset();
  }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  const std::string& label() const { return label_; }
  Store& store() { return sqlite_ ? static_cast<Store&>(*sqlite_) : static_cast<Store&>(*pg_); }
  const BatchRunCounters& counters() const { return sqlite_ ? sqlite_->counters() : pg_->counters(); }
  const Canon& canon() const { return canon_; }

  // Raw rows of a query selecting `columns` columns, every value as text (NULL: nullopt).
  using Row = std::vector<std::optional<std::string>>;
  std::vector<Row> rows(const std::string& sql, int columns) {
    std::vector<Row> out;
    if (raw_sqlite_) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(raw_sqlite_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
        throw std::runtime_error(std::string("raw sqlite: ") + sqlite3_errmsg(raw_sqlite_));
      }
      int rc;
      while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        Row row;
        for (int i = 0; i < columns; ++i) {
          if (sqlite3_column_type(stmt, i) == SQLITE_NULL) {
            row.emplace_back(std::nullopt);
          } else {
            row.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, i)));
          }
        }
        out.push_back(std::move(row));
      }
      sqlite3_finalize(stmt);
      if (rc != SQLITE_DONE) throw std::runtime_error(std::string("raw sqlite: ") + sqlite3_errmsg(raw_sqlite_));
    } else {
      pg::Rows r = raw_pg_->exec(sql);
      for (int i = 0; i < r.size(); ++i) {
        Row row;
        for (int j = 0; j < columns; ++j) row.push_back(r.optional_text(i, j));
        out.push_back(std::move(row));
      }
    }
    return out;
  }

  // Re-reads the holds and events tables: this store's request_id → hold id map, and the canon.
  void refresh_ids() {
    hold_of_request_.clear();
    canon_.holds = extra_holds_;
    canon_.events.clear();
    for (const Row& r : rows("SELECT hold_id, request_id FROM holds ORDER BY seq", 2)) {
      hold_of_request_[*r[1]] = *r[0];
      canon_.holds[*r[0]] = "H<" + *r[1] + ">";
    }
    std::int64_t rank = 0;
    for (const Row& r : rows("SELECT event_id FROM events ORDER BY event_id", 1)) canon_.events[std::stoll(*r[0])] = ++rank;
  }

  // The hold id this store gave `request_id` ("" if none).
  std::string hold_of(const std::string& request_id) const {
    auto it = hold_of_request_.find(request_id);
    return it == hold_of_request_.end() ? "" : it->second;
  }
  void name_extra_hold(const std::string& id, const std::string& name) {
    extra_holds_[id] = name;
    canon_.holds[id] = name;
  }

 private:
  std::string label_;
  std::unique_ptr<testing::TempDir> dir_;
  std::unique_ptr<testing::PgSchema> schema_;
  std::unique_ptr<SqliteStore> sqlite_;
  std::unique_ptr<PgStore> pg_;
  sqlite3* raw_sqlite_ = nullptr;
  std::unique_ptr<pg::Conn> raw_pg_;
  Canon canon_;
  std::map<std::string, std::string> hold_of_request_;
  std::map<std::string, std::string> extra_holds_;  // ids no hold has but the test made from one
};

// Every table, row by row, in canonical form.
std::vector<std::string> table_lines(Side& side) {
  const Canon& c = side.canon();
  std::vector<std::string> out;
  const auto join = [](const Side::Row& r) {
    std::string s;
    for (const auto& v : r) s += (v ? *v : std::string("NULL")) + "|";
    return s;
  };
  for (const auto& r : side.rows("SELECT account_id, available, reserved, used, purchased, overdraft_limit, "
                                 "max_active_holds, active_holds, created_at_ms, frozen FROM accounts "
                                 "ORDER BY account_id",
                                 10)) {
    out.push_back("accounts: " + join(r));
  }
  std::int64_t rank = 0;
  for (auto r : side.rows("SELECT seq, hold_id, account_id, request_id, amount, committed_amount, status, "
                          "late_outcome, created_at_ms, expires_at_ms, closed_at_ms, metadata, release_reason "
                          "FROM holds ORDER BY seq",
                          13)) {
    ++rank;
    if (!c.exact) r[0] = "#" + std::to_string(rank);
    r[1] = c.hold(*r[1]);
    out.push_back("holds: " + join(r));
  }
  for (auto r : side.rows("SELECT reference, account_id, kind, amount, reason, event_id FROM transfers "
                          "ORDER BY reference",
                          6)) {
    r[5] = c.event(std::stoll(*r[5]));
    out.push_back("transfers: " + join(r));
  }
  for (auto r : side.rows("SELECT event_id, account_id, type, amount, hold_id, job_id, reference, at_ms, "
                          "available_after, reserved_after, used_after, reason, overdraft_limit, max_active_holds, "
                          "frozen FROM events ORDER BY event_id",
                          15)) {
    r[0] = c.event(std::stoll(*r[0]));
    if (r[4]) r[4] = c.hold(*r[4]);
    out.push_back("events: " + join(r));
  }
  for (const auto& r : side.rows("SELECT key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms FROM api_keys "
                                 "ORDER BY key_id",
                                 5)) {
    out.push_back("api_keys: " + join(r));
  }
  return out;
}

// Everything the Store API reads, in canonical form.
std::vector<std::string> read_lines(Side& side, const std::set<std::string>& account_ids,
                                    const std::vector<std::string>& request_ids,
                                    const std::vector<std::string>& secrets) {
  const Canon& c = side.canon();
  Store& store = side.store();
  std::vector<std::string> out;
  for (const std::string& id : account_ids) {
    auto a = store.get_account(id);
    out.push_back(a.ok() ? show(*a) : "account " + id + ": " + show(a.error(), c));
    std::int64_t after = 0;
    for (;;) {
      // A small first page, so that paging (next_after) is compared too; then large ones.
      auto page = store.read_events(id, after, after == 0 ? 7 : limits::kEventsPageMax);
      if (!page.ok()) {
        out.push_back("events of " + id + ": " + show(page.error(), c));
        break;
      }
      for (const Event& e : page->events) out.push_back(show(e, c));
      if (page->events.empty()) break;
      out.push_back("next_after " + c.event(page->next_after));
      after = page->next_after;
    }
    auto holds = store.lists().list_holds(HoldQuery{id, std::nullopt}, PageRequest{limits::kListPageMax});
    if (!holds.ok()) {
      out.push_back("holds of " + id + ": " + show(holds.error(), c));
    } else {
      for (const Hold& h : holds->items) out.push_back("of " + id + ": " + show(h, c));
    }
  }
  for (const std::optional<HoldStatus> status :
       {std::optional<HoldStatus>{}, std::optional<HoldStatus>{HoldStatus::active},
        std::optional<HoldStatus>{HoldStatus::expired}, std::optional<HoldStatus>{HoldStatus::committed},
        std::optional<HoldStatus>{HoldStatus::released}}) {
    auto holds = store.lists().list_holds(HoldQuery{std::nullopt, status}, PageRequest{limits::kListPageMax});
    const std::string name = status ? std::string(hold_status_name(*status)) : "all";
    if (!holds.ok()) {
      out.push_back("holds " + name + ": " + show(holds.error(), c));
      continue;
    }
    for (const Hold& h : holds->items) out.push_back(name + ": " + show(h, c));
  }
  for (const std::string& request_id : request_ids) {
    const std::string id = side.hold_of(request_id);
    if (id.empty()) {
      out.push_back("no hold for " + request_id);
      continue;
    }
    auto h = store.get_hold(id);
    out.push_back(h.ok() ? "get " + show(*h, c) : "get " + request_id + ": " + show(h.error(), c));
  }
  auto stats = store.stats();
  out.push_back(stats.ok() ? "stats active_holds=" + std::to_string(stats->active_holds) + " oldest_age=" +
                                 opt(stats->oldest_active_hold_age_ms) + " accounts=" + std::to_string(stats->accounts)
                           : "stats: " + show(stats.error(), c));
  auto ids = store.list_account_ids("", limits::kHoldsPageMax);
  if (ids.ok()) {
    for (const std::string& id : *ids) out.push_back("account id " + id);
  }
  for (const std::string& secret : secrets) {
    auto k = store.find_key(secret);
    out.push_back(!k.ok() ? "find_key: " + show(k.error(), c) : *k ? "find_key " + show(**k) : "find_key none");
  }
  auto admin = store.has_admin_key();
  out.push_back(admin.ok() ? std::string("has_admin_key ") + (*admin ? "yes" : "no") : "has_admin_key: error");
  return out;
}

// Lines of `oracle` and `actual` that differ, described (empty when they are equal).
void diff_lines(const std::string& what, const std::vector<std::string>& oracle, const std::vector<std::string>& actual,
                std::vector<std::string>& diffs) {
  if (oracle == actual) return;
  std::multiset<std::string> a(oracle.begin(), oracle.end()), b(actual.begin(), actual.end());
  int shown = 0;
  for (const std::string& line : oracle) {
    if (b.count(line) == 0 && shown++ < 12) diffs.push_back(what + ": only in the oracle: " + line);
  }
  shown = 0;
  for (const std::string& line : actual) {
    if (a.count(line) == 0 && shown++ < 12) diffs.push_back(what + ": only here:        " + line);
  }
  if (a == b) {
    for (std::size_t i = 0; i < oracle.size(); ++i) {
      if (oracle[i] != actual[i]) {
        diffs.push_back(what + ": same lines in another order, first at " + std::to_string(i) + ": oracle " +
                        oracle[i] + " / here " + actual[i]);
        break;
      }
    }
  }
}

// ================================================================================================
// the seeded generator

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL) {}
  std::uint64_t next() {  // splitmix64: the same sequence on every platform
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
  std::int64_t between(std::int64_t lo, std::int64_t hi) { return lo + below(hi - lo + 1); }
  bool chance(int percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v.at(static_cast<std::size_t>(below(static_cast<std::int64_t>(v.size()))));
  }
  std::string hex16() {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(next()));
    return buf;
  }

 private:
  std::uint64_t state_;
};

// A command as generated: hold ids are placeholders each store resolves to its own id
// ("@req:R": the hold request R made; "@wrong:R": that hold's sequence number with a wrong random part).
struct Step {
  Command command;
  std::string kind;  // for counting outcomes
  std::string note;  // counted too: "same_batch" for a command naming something made earlier in its batch
};

constexpr const char* kReq = "@req:";
constexpr const char* kWrong = "@wrong:";

std::string describe(const Command& command) {
  return std::visit(
      [](const auto& c) -> std::string {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, CreateAccountCommand>) {
          return "create_account " + c.account_id + " overdraft=" + std::to_string(c.overdraft_limit) +
                 " max_holds=" + opt(c.max_active_holds);
        }
        if constexpr (std::is_same_v<T, CreditCommand>) {
          return "credit " + c.account_id + " " + std::to_string(c.amount) + " ref=" + c.reference;
        }
        if constexpr (std::is_same_v<T, DebitCommand>) {
          return "debit " + c.account_id + " " + std::to_string(c.amount) + " ref=" + c.reference + " reason=" + c.reason;
        }
        if constexpr (std::is_same_v<T, ReserveCommand>) {
          return "reserve " + c.account_id + " " + std::to_string(c.amount) + " request=" + c.request_id +
                 " ttl=" + opt(c.ttl_ms);
        }
        if constexpr (std::is_same_v<T, CommitCommand>) {
          return "commit " + c.hold_id + " amount=" + opt(c.amount) + " late=" +
                 std::string(late_commit_policy_name(c.late_commit));
        }
        if constexpr (std::is_same_v<T, ReleaseCommand>) return "release " + c.hold_id + " reason=" + opt(c.reason);
        if constexpr (std::is_same_v<T, UpdateAccountCommand>) {
          return "update_account " + c.account_id + " overdraft=" + opt(c.overdraft_limit) + " max_holds=" +
                 (c.max_active_holds ? opt(*c.max_active_holds) : std::string("unchanged")) + " frozen=" +
                 (c.frozen ? std::to_string(*c.frozen) : std::string("unchanged"));
        }
        if constexpr (std::is_same_v<T, ExtendCommand>) return "extend " + c.hold_id + " ttl=" + std::to_string(c.ttl_ms);
        if constexpr (std::is_same_v<T, ExpireOverdueCommand>) return "expire_overdue max=" + std::to_string(c.max_holds);
        if constexpr (std::is_same_v<T, CreateKeyCommand>) {
          return "create_key " + c.key_id + " account=" + opt(c.account_id) + " secret=" + c.secret_sha256.substr(0, 8);
        }
        if constexpr (std::is_same_v<T, RevokeKeyCommand>) return "revoke_key " + c.key_id;
        if constexpr (std::is_same_v<T, RecordKeyUseCommand>) {
          std::string out = "record_key_use";
          for (const auto& use : c.uses) out += " " + use.key_id + "@" + std::to_string(use.used_at_ms);
          return out;
        }
        // Jobs are not generated here (the job conformance suite tests them).
        if constexpr (std::is_same_v<T, SubmitJobCommand>) return "submit_job " + c.client_request_id;
        if constexpr (std::is_same_v<T, ClaimJobCommand>) return "claim_job " + c.client_request_id;
        if constexpr (std::is_same_v<T, EndJobCommand>) return "end_job " + c.client_request_id;
        if constexpr (std::is_same_v<T, LockCommand>) return "lock " + c.key;
        if constexpr (std::is_same_v<T, IdempotencyCommand>) return "idempotency " + c.key;
        if constexpr (std::is_same_v<T, RateLimitCommand>) return "ratelimit " + c.policy + "/" + c.key;
        if constexpr (std::is_same_v<T, PruneCoordCommand>) return "prune_coord";
      },
      command);
}

// The command as `side` gets it: placeholders replaced by that store's hold ids.
Command instantiate(const Command& command, Side& side) {
  Command out = command;
  const auto resolve = [&side](std::string& hold_id) {
    if (hold_id.rfind(kReq, 0) == 0) {
      const std::string request = hold_id.substr(std::string(kReq).size());
      hold_id = side.hold_of(request);
      if (hold_id.empty()) hold_id = "hold_0_missing";  // this store has no such hold: the results will differ
    } else if (hold_id.rfind(kWrong, 0) == 0) {
      const std::string request = hold_id.substr(std::string(kWrong).size());
      const auto seq = hold_id_seq(side.hold_of(request));
      hold_id = make_hold_id(seq.value_or(0), "0000000000000000");
      side.name_extra_hold(hold_id, "H<" + request + ">~wrong");
    }
  };
  std::visit(
      [&](auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, CommitCommand> || std::is_same_v<T, ReleaseCommand> ||
                      std::is_same_v<T, ExtendCommand>) {
          resolve(c.hold_id);
        }
      },
      out);
  return out;
}

enum class Shape { hot, spread };

// What the oracle knows after each round, and the next round's commands from it.
class Generator {
 public:
  Generator(std::uint64_t seed, Shape shape) : rng_(seed), settings_rng_(seed ^ 0x5e77196u), shape_(shape) {}

  // The commands of round `round` (a batch).
  std::vector<Step> round(int round) {
    std::vector<Step> steps;
    pending_accounts_.clear();
    pending_transfers_.clear();
    pending_reserves_.clear();
    pending_keys_.clear();
    if (round == 0) {
      if (shape_ == Shape::hot) {
        add_create(steps, "hot", 25, 8);
        add(steps, CreditCommand{"hot", 300, next_ref()}, "credit");
      } else {
        for (int i = 0; i < 20; ++i) {
          char id[16];
          std::snprintf(id, sizeof id, "acct-%02d", i);
          const std::optional<std::int64_t> max_holds =
              i % 5 == 0 ? std::optional<std::int64_t>(2) : i % 5 == 1 ? std::optional<std::int64_t>(4) : std::nullopt;
          add_create(steps, id, i % 4 == 0 ? 40 : 0, max_holds);
          add(steps, CreditCommand{id, rng_.between(20, 120), next_ref()}, "credit");
        }
      }
      add(steps, CreateKeyCommand{"key-admin", std::nullopt, next_secret()}, "create_key");
    }
    const int n = shape_ == Shape::hot ? static_cast<int>(rng_.between(24, 40)) : static_cast<int>(rng_.between(30, 50));
    if (rng_.chance(40)) add(steps, ExpireOverdueCommand{rng_.between(1, 3)}, "expire");  // the reaper's turn first
    for (int i = 0; i < n; ++i) one(steps);
    return steps;
  }

  // The clock's step before the next round: often none or a little, sometimes past every TTL.
  std::int64_t advance_ms() {
    static const std::vector<std::int64_t> steps = {0, 0, 150, 700, 1'600, 3'000, 8'000, 70'000};
    return rng_.pick(steps);
  }

  // Learns the round's outcome from the oracle: its results, and every hold as a reader sees it.
  void learn(const std::vector<Step>& steps, const std::vector<CommandResult>& results, const std::vector<Hold>& holds,
             const std::vector<Account>& views) {
    views_.clear();
    for (const Account& a : views) views_[a.account_id] = a;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (!results[i].ok()) continue;
      std::visit(
          [&](const auto& c) {
            using T = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<T, CreateAccountCommand>) {
              accounts_.try_emplace(c.account_id, Settings{c.overdraft_limit, c.max_active_holds});
            }
            if constexpr (std::is_same_v<T, CreditCommand>) {
              transfers_.try_emplace(c.reference, TransferInfo{c.account_id, true, c.amount, ""});
            }
            if constexpr (std::is_same_v<T, DebitCommand>) {
              transfers_.try_emplace(c.reference, TransferInfo{c.account_id, false, c.amount, c.reason});
            }
            if constexpr (std::is_same_v<T, ReserveCommand>) {
              reserves_.try_emplace(c.request_id, std::make_pair(c.account_id, c.amount));
            }
            if constexpr (std::is_same_v<T, CreateKeyCommand>) {
              keys_.try_emplace(c.key_id, KeyInfo{c.account_id, c.secret_sha256});
            }
            if constexpr (std::is_same_v<T, UpdateAccountCommand>) {
              const Account& a = std::get<AccountOutcome>(results[i].value()).account;
              accounts_.insert_or_assign(c.account_id, Settings{a.overdraft_limit, a.max_active_holds});
            }
          },
          steps[i].command);
    }
    holds_.clear();
    for (const Hold& h : holds) holds_[h.request_id] = h;
  }

  std::set<std::string> account_ids() const {
    std::set<std::string> out(named_accounts_.begin(), named_accounts_.end());
    for (const auto& [id, s] : accounts_) out.insert(id);
    return out;
  }
  std::vector<std::string> secrets() const { return secrets_; }

 private:
  struct Settings {
    std::int64_t overdraft = 0;
    std::optional<std::int64_t> max_holds;
  };
  struct TransferInfo {
    std::string account;
    bool credit = true;
    std::int64_t amount = 0;
    std::string reason;
  };
  struct KeyInfo {
    std::optional<std::string> account;
    std::string secret;
  };

  void add(std::vector<Step>& steps, Command command, std::string kind, std::string note = "") {
    std::visit(
        [&](const auto& c) {
          if constexpr (requires { c.account_id; }) {
            if constexpr (std::is_same_v<std::decay_t<decltype(c.account_id)>, std::string>) {
              named_accounts_.insert(c.account_id);
            } else {
              if (c.account_id) named_accounts_.insert(*c.account_id);
            }
          }
        },
        command);
    steps.push_back(Step{std::move(command), std::move(kind), std::move(note)});
  }
  void add_create(std::vector<Step>& steps, const std::string& id, std::int64_t overdraft,
                  std::optional<std::int64_t> max_holds) {
    pending_accounts_[id] = Settings{overdraft, max_holds};
    add(steps, CreateAccountCommand{id, overdraft, max_holds}, "create_account");
  }

  std::string next_ref() { return "ref-" + std::to_string(++counter_); }
  std::string next_request() { return "req-" + std::to_string(++counter_); }
  std::string next_secret() {
    std::string s;
    for (int i = 0; i < 4; ++i) s += rng_.hex16();
    secrets_.push_back(s);
    return s;
  }

  // Accounts that exist (or are created earlier in this round).
  std::vector<std::string> live_accounts() const {
    std::vector<std::string> out;
    for (const auto& [id, s] : accounts_) out.push_back(id);
    for (const auto& [id, s] : pending_accounts_) {
      if (accounts_.count(id) == 0) out.push_back(id);
    }
    return out;
  }
  std::string account() {
    const auto live = live_accounts();
    if (shape_ == Shape::hot && accounts_.count("hot") != 0 && rng_.chance(90)) return "hot";
    // Spread: a few accounts get more of the traffic (acct-00: overdraft and at most 2 holds,
    // acct-01: at most 4, acct-04: overdraft), so their limits are reached too.
    static const std::vector<std::string> busy = {"acct-00", "acct-01", "acct-04"};
    if (shape_ == Shape::spread && accounts_.count("acct-00") != 0 && rng_.chance(30)) return rng_.pick(busy);
    return rng_.pick(live);
  }
  std::string ghost() { return rng_.chance(50) ? "ghost-1" : "ghost-2"; }
  std::int64_t amount() {
    const auto r = rng_.below(100);
    if (r < 70) return rng_.between(1, 25);
    if (r < 90) return rng_.between(26, 120);
    return rng_.between(200, 2'000);
  }
  std::int64_t ttl() {
    static const std::vector<std::int64_t> ttls = {400, 1'500, 5'000, 60'000};
    return rng_.pick(ttls);
  }

  // A hold to name: a live one most of the time, else any hold made so far.
  std::optional<std::string> known_hold() {
    if (holds_.empty()) return std::nullopt;
    std::vector<std::string> live, ended, all;
    for (const auto& [request, h] : holds_) {
      all.push_back(request);
      (h.status == HoldStatus::active ? live : ended).push_back(request);
    }
    const auto r = rng_.below(100);
    if (!live.empty() && r < 50) return rng_.pick(live);
    if (!ended.empty() && r < 80) return rng_.pick(ended);
    return rng_.pick(all);
  }
  std::string bogus_hold() {
    static const std::vector<std::string> bogus = {"hold_987654321_00000000deadbeef", "hold_", "hold_x1_abc",
                                                   "not-a-hold", "hold_1", "hold__1", "hold_99999999999999999999_1"};
    if (!holds_.empty() && rng_.chance(40)) {
      std::vector<std::string> all;
      for (const auto& [request, h] : holds_) all.push_back(request);
      return kWrong + rng_.pick(all);
    }
    return rng_.pick(bogus);
  }

  void one(std::vector<Step>& steps) {
    if (settings_rng_.chance(5)) return update_account(steps);
    const auto r = rng_.below(100);
    if (r < 5) return create_account(steps);
    if (r < 16) return transfer(steps, true);
    if (r < 24) return transfer(steps, false);
    if (r < 46) return reserve(steps);
    if (r < 61) return commit(steps);
    if (r < 69) return release(steps);
    if (r < 79) return extend(steps);
    if (r < 83) return add(steps, ExpireOverdueCommand{rng_.pick(std::vector<std::int64_t>{1, 2, 3, 1'000})}, "expire");
    if (r < 90) return create_key(steps);
    if (r < 96) return revoke_key(steps);
    return bogus(steps);
  }

  // One of the earlier entries of `made` (before this round) or `pending` (earlier in this round:
  // then `same_batch` is set), or nullopt if there is none.
  template <typename Map>
  std::optional<typename Map::value_type> earlier(const Map& made, const Map& pending, bool& same_batch) {
    same_batch = !pending.empty() && (made.empty() || rng_.chance(50));
    const Map& from = same_batch ? pending : made;
    if (from.empty()) return std::nullopt;
    auto it = from.begin();
    std::advance(it, rng_.below(static_cast<std::int64_t>(from.size())));
    return *it;
  }
  static std::string note(bool same_batch) { return same_batch ? "same_batch" : ""; }

  void create_account(std::vector<Step>& steps) {
    const auto r = rng_.below(100);
    bool same = false;
    const auto existing = earlier(accounts_, pending_accounts_, same);
    if (r < 35 || !existing) {
      const std::string id = (shape_ == Shape::hot ? "hot-late-" : "late-") + std::to_string(++counter_);
      // Each draw in its own statement: the order of a call's arguments is unspecified (gcc and clang
      // differ), and the seeds must mean the same runs with either. Last argument first, as gcc did.
      const auto max_holds = rng_.chance(60) ? std::nullopt : std::optional<std::int64_t>(rng_.between(1, 5));
      const auto overdraft = rng_.pick(std::vector<std::int64_t>{0, 0, 10, 100});
      add_create(steps, id, overdraft, max_holds);
      return;
    }
    Settings s = existing->second;
    if (r >= 75) {  // other settings: a conflict
      if (rng_.chance(50)) {
        s.overdraft += 1;
      } else {
        s.max_holds = s.max_holds ? std::nullopt : std::optional<std::int64_t>(3);
      }
    }
    add(steps, CreateAccountCommand{existing->first, s.overdraft, s.max_holds}, "create_account", note(same));
  }

  void transfer(std::vector<Step>& steps, bool credit) {
    const std::string kind = credit ? "credit" : "debit";
    const auto make = [&](const std::string& account, std::int64_t amount, const std::string& reference,
                          const std::string& reason, const std::string& note = "") {
      pending_transfers_.try_emplace(reference, TransferInfo{account, credit, amount, reason});
      if (credit) return add(steps, CreditCommand{account, amount, reference}, kind, note);
      add(steps, DebitCommand{account, amount, reference, reason}, kind, note);
    };
    const auto r = rng_.below(100);
    // An earlier reference (of this round or before) of the same kind: replayed, or mismatched.
    std::map<std::string, TransferInfo> made, pending;
    for (const auto& [ref, t] : transfers_) {
      if (t.credit == credit) made.emplace(ref, t);
    }
    for (const auto& [ref, t] : pending_transfers_) {
      if (t.credit == credit) pending.emplace(ref, t);
    }
    bool same = false;
    const auto e = earlier(made, pending, same);
    if (r < 16 && e) return make(e->second.account, e->second.amount, e->first, e->second.reason, note(same));
    if (r < 30 && e) {
      const auto& [ref, t] = *e;
      switch (rng_.below(4)) {
        case 0: return make(t.account, t.amount + 1, ref, t.reason, note(same));
        case 1: return make(t.account == "hot" ? ghost() : account(), t.amount, ref, t.reason, note(same));
        case 2:  // the same reference used by the other kind
          if (credit) return add(steps, DebitCommand{t.account, t.amount, ref, ""}, "debit", note(same));
          return add(steps, CreditCommand{t.account, t.amount, ref}, "credit", note(same));
        default: return make(t.account, t.amount, ref, credit ? "" : t.reason + "-other", note(same));
      }
    }
    if (r < 40) {
      const auto ref = next_ref();
      const auto n = amount();
      return make(ghost(), n, ref, "");
    }
    if (!credit && r < 50 && !views_.empty()) {  // just past what is available: refused, or fits after expiries
      auto it = views_.begin();
      std::advance(it, rng_.below(static_cast<std::int64_t>(views_.size())));
      return make(it->first, std::max<std::int64_t>(1, it->second.balances.available + rng_.between(0, 3)), next_ref(), "");
    }
    const std::string reason = credit || rng_.chance(50) ? "" : "reason-" + std::to_string(rng_.below(3));
    const auto ref = next_ref();
    const auto n = credit ? rng_.between(1, 150) : amount();
    make(account(), n, ref, reason);
  }

  void reserve(std::vector<Step>& steps) {
    const auto make = [&](const std::string& account, std::int64_t amount, const std::string& request,
                          const std::string& note = "") {
      pending_reserves_.try_emplace(request, std::make_pair(account, amount));
      ReserveCommand c{account, amount, request, ttl(), "", rng_.hex16()};
      if (rng_.chance(20)) c.metadata_json = "{\"n\":" + std::to_string(rng_.below(1000)) + "}";
      add(steps, std::move(c), "reserve", note);
    };
    bool same = false;
    const auto e = earlier(reserves_, pending_reserves_, same);
    const auto r = rng_.below(100);
    if (r < 14 && e) return make(e->second.first, e->second.second, e->first, note(same));
    if (r < 23 && e) {
      const auto& [request, ra] = *e;
      if (rng_.chance(50)) return make(ra.first, ra.second + rng_.between(1, 3), request, note(same));
      return make(ra.first == "hot" || rng_.chance(30) ? ghost() : account(), ra.second, request, note(same));
    }
    if (r < 27) {
      const auto request = next_request();
      const auto n = amount();
      return make(ghost(), n, request);
    }
    if (r < 38 && !views_.empty()) {
      // Aimed at a limit: into the overdraft (or just past it), or on an account at its most holds.
      std::vector<const Account*> overdraft, full;
      for (const auto& [id, a] : views_) {
        if (a.overdraft_limit > 0) overdraft.push_back(&a);
        if (a.max_active_holds && a.active_holds >= *a.max_active_holds) full.push_back(&a);
      }
      if (!full.empty() && rng_.chance(50)) {
        const auto request = next_request();
        const auto n = rng_.between(1, 5);
        return make(rng_.pick(full)->account_id, n, request);
      }
      std::vector<const Account*> limited;
      for (const auto& [id, a] : views_) {
        if (a.max_active_holds && *a.max_active_holds <= 4) limited.push_back(&a);
      }
      if (!limited.empty() && rng_.chance(25)) {  // a burst of one more than the account may hold
        const Account& a = *rng_.pick(limited);
        for (std::int64_t i = 0; i <= *a.max_active_holds; ++i) make(a.account_id, 1, next_request());
        return;
      }
      if (!overdraft.empty()) {
        const Account& a = *rng_.pick(overdraft);
        const std::int64_t amount = std::max<std::int64_t>(1, a.balances.available + rng_.between(1, a.overdraft_limit + 6));
        return make(a.account_id, amount, next_request());
      }
    }
    const auto request = next_request();
    const auto n = amount();
    make(account(), n, request);
  }

  void commit(std::vector<Step>& steps) {
    const auto request = known_hold();
    if (!request) return reserve(steps);
    const Hold& h = holds_.at(*request);
    std::optional<std::int64_t> amount;
    const auto r = rng_.below(100);
    if (r < 40) {
      amount = std::nullopt;
    } else if (r < 65) {
      amount = rng_.between(1, h.amount);
    } else if (r < 75) {
      amount = h.amount;
    } else if (r < 85) {
      amount = h.amount + rng_.between(1, 5);  // more than the hold
    } else {
      amount = h.committed_amount > 0 ? std::optional<std::int64_t>(h.committed_amount) : std::nullopt;
    }
    const auto policy = static_cast<LateCommitPolicy>(rng_.below(3));
    add(steps, CommitCommand{kReq + *request, amount, policy}, "commit");
  }

  void release(std::vector<Step>& steps) {
    const auto request = known_hold();
    if (!request) return reserve(steps);
    std::optional<std::string> reason;
    if (rng_.chance(50)) reason = "why-" + std::to_string(rng_.below(3));
    add(steps, ReleaseCommand{kReq + *request, reason}, "release");
  }

  // Settings: each field, several at once, nothing (a replay), an unknown account; a lower
  // overdraft limit aimed at what an account has overdrawn (a conflict); freezes that mostly thaw
  // again soon, so that frozen accounts are refused without starving the run.
  void update_account(std::vector<Step>& steps) {
    const auto r = settings_rng_.below(100);
    if (r < 8) {
      UpdateAccountCommand c{settings_rng_.chance(50) ? "ghost-1" : "ghost-2", {}, {}, {}};
      c.frozen = true;
      return add(steps, std::move(c), "update_account");
    }
    const auto live = live_accounts();
    if (live.empty()) return;
    std::string id = shape_ == Shape::hot && accounts_.count("hot") != 0 && settings_rng_.chance(80)
                         ? std::string("hot")
                         : settings_rng_.pick(live);
    if (r >= 20 && r < 50 && settings_rng_.chance(70)) {  // aimed at an overdrawn account, if there is one
      std::vector<std::string> overdrawn;
      for (const auto& [account_id, a] : views_) {
        if (a.balances.available < 0) overdrawn.push_back(account_id);
      }
      if (!overdrawn.empty()) {
        id = settings_rng_.pick(overdrawn);
      } else {
        // None overdrawn: reserve one into its whole overdraft first (same batch), then lower it.
        for (const auto& [account_id, a] : views_) {
          const std::int64_t amount = a.balances.available + a.overdraft_limit;
          if (a.overdraft_limit < 2 || a.frozen || amount < 1 || amount > 2'000 ||
              (a.max_active_holds && a.active_holds >= *a.max_active_holds)) {
            continue;
          }
          const std::string request = "settings-req-" + std::to_string(++counter_);
          pending_reserves_.try_emplace(request, std::make_pair(account_id, amount));
          add(steps, ReserveCommand{account_id, amount, request, 60'000, "", settings_rng_.hex16()}, "reserve");
          UpdateAccountCommand lower{account_id, {}, {}, {}};
          lower.overdraft_limit = a.overdraft_limit - 1;
          return add(steps, std::move(lower), "update_account");
        }
      }
    }
    UpdateAccountCommand c{id, {}, {}, {}};
    const auto view = views_.find(id);
    if (view != views_.end() && view->second.frozen && settings_rng_.chance(85)) {
      c.frozen = false;
      return add(steps, std::move(c), "update_account");
    }
    if (r < 20) {  // the settings it has (or no field at all)
      if (view != views_.end() && settings_rng_.chance(50)) c.overdraft_limit = view->second.overdraft_limit;
      return add(steps, std::move(c), "update_account");
    }
    if (r < 50) {
      if (view != views_.end() && view->second.balances.available < 0 && settings_rng_.chance(60)) {
        c.overdraft_limit = -view->second.balances.available - settings_rng_.between(1, 2);
        if (*c.overdraft_limit < 0) c.overdraft_limit = 0;
      } else {
        c.overdraft_limit = settings_rng_.pick(std::vector<std::int64_t>{0, 5, 40, 100});
      }
    } else if (r < 75) {
      c.max_active_holds = settings_rng_.chance(30) ? std::optional<std::int64_t>() : std::optional<std::int64_t>(settings_rng_.between(1, 4));
    } else {
      c.frozen = true;
    }
    if (settings_rng_.chance(20)) c.frozen = settings_rng_.chance(30);
    add(steps, std::move(c), "update_account");
  }

  void extend(std::vector<Step>& steps) {
    const auto request = known_hold();
    if (!request) return reserve(steps);
    add(steps, ExtendCommand{kReq + *request, rng_.pick(std::vector<std::int64_t>{300, 3'000, 60'000})}, "extend");
  }

  void bogus(std::vector<Step>& steps) {
    const std::string id = bogus_hold();
    switch (rng_.below(3)) {
      case 0: return add(steps, CommitCommand{id, std::nullopt, static_cast<LateCommitPolicy>(rng_.below(3))}, "commit");
      case 1: return add(steps, ReleaseCommand{id}, "release");
      default: return add(steps, ExtendCommand{id, 1'000}, "extend");
    }
  }

  void create_key(std::vector<Step>& steps) {
    bool same = false;
    const auto e = earlier(keys_, pending_keys_, same);
    const auto r = rng_.below(100);
    if (r < 25 && e) {  // the same again
      return add(steps, CreateKeyCommand{e->first, e->second.account, e->second.secret}, "create_key", note(same));
    }
    if (r < 45 && e) {  // the same id with another secret or account: a conflict
      const auto& [id, k] = *e;
      if (rng_.chance(50)) return add(steps, CreateKeyCommand{id, k.account, next_secret()}, "create_key", note(same));
      return add(steps, CreateKeyCommand{id, k.account ? std::nullopt : std::optional<std::string>(account()), k.secret},
                 "create_key", note(same));
    }
    const std::string id = "key-" + std::to_string(++counter_);
    std::optional<std::string> owner;
    if (r < 55) {
      owner = ghost();  // not_found
    } else if (r < 62) {
      owner = std::nullopt;  // another admin key
    } else {
      owner = account();
    }
    KeyInfo info{owner, next_secret()};
    pending_keys_.try_emplace(id, info);
    add(steps, CreateKeyCommand{id, info.account, info.secret}, "create_key");
  }

  void revoke_key(std::vector<Step>& steps) {
    const auto r = rng_.below(100);
    if (r < 12) return add(steps, RevokeKeyCommand{"key-unknown"}, "revoke_key");
    if (r < 27) return add(steps, RevokeKeyCommand{"key-admin"}, "revoke_key");  // the admin key: a conflict
    bool same = false;
    const auto e = earlier(keys_, pending_keys_, same);
    if (r < 45) {  // the last use of keys: newer, or another instance's older one; an unknown key is skipped
      const std::int64_t at = 1'767'225'600'000 + 1000 * ++counter_ - (rng_.chance(30) ? 5'000 : 0);
      RecordKeyUseCommand c;
      if (e) c.uses.push_back({e->first, at});
      c.uses.push_back({"key-unknown", at});
      return add(steps, std::move(c), "record_key_use", note(same));
    }
    if (!e) return add(steps, RevokeKeyCommand{"key-unknown"}, "revoke_key");
    add(steps, RevokeKeyCommand{e->first}, "revoke_key", note(same));
  }

  Rng rng_;
  // Draws of the settings commands, apart: adding them left the other commands' draws as they were.
  Rng settings_rng_;
  const Shape shape_;
  std::int64_t counter_ = 0;
  // Known to the oracle after the rounds so far.
  std::map<std::string, Settings> accounts_;
  std::map<std::string, TransferInfo> transfers_;
  std::map<std::string, std::pair<std::string, std::int64_t>> reserves_;  // request → (account, amount) made
  std::map<std::string, Hold> holds_;                                     // request → hold as read now
  std::map<std::string, Account> views_;                                  // account → as read now
  std::map<std::string, KeyInfo> keys_;
  std::vector<std::string> secrets_;
  std::set<std::string> named_accounts_;  // every account id a command named (ghosts too)
  // Issued in the round being generated (their outcome is not known yet).
  std::map<std::string, Settings> pending_accounts_;
  std::map<std::string, TransferInfo> pending_transfers_;
  std::map<std::string, std::pair<std::string, std::int64_t>> pending_reserves_;
  std::map<std::string, KeyInfo> pending_keys_;
};

// ================================================================================================
// counting what a run exercised

// The outcome of one command, as counted: "<kind>:<what happened>".
std::string outcome_label(const Step& step, const CommandResult& r) {
  if (!r.ok()) return step.kind + ":" + std::string(code_name(r.code()));
  return std::visit(
      [&](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, ExpireOutcome>) {
          return step.kind + (o.expired > 0 ? ":expired_some" : ":expired_none");
        } else if constexpr (std::is_same_v<T, KeyUseOutcome>) {
          return step.kind + (o.recorded > 0 ? ":recorded" : ":recorded_none");
        } else if constexpr (std::is_same_v<T, HoldOutcome>) {
          if (!o.created) return step.kind + ":replay";
          if (step.kind != "commit") return step.kind + ":created";
          const auto& c = std::get<CommitCommand>(step.command);
          if (o.hold.status == HoldStatus::committed) {
            return o.hold.committed_amount < o.hold.amount ? "commit:partial" : "commit:full";
          }
          if (o.hold.late_outcome == LateOutcome::charged) return "commit:late_charged";
          return c.late_commit == LateCommitPolicy::forgive ? "commit:late_forgiven" : "commit:late_forgiven_no_funds";
        } else if constexpr (std::is_same_v<T, LockOutcome> || std::is_same_v<T, IdempotencyOutcome> ||
                             std::is_same_v<T, RateLimitOutcome> || std::is_same_v<T, PruneOutcome>) {
          return step.kind + ":coordination";  // not generated by this test
        } else {
          return step.kind + (o.created ? ":created" : ":replay");
        }
      },
      r.value());
}

// What a run must have exercised (counted on the oracle, which the other stores matched).
const std::vector<std::string>& required_labels() {
  static const std::vector<std::string> labels = {
      "create_account:created", "create_account:replay", "create_account:conflict",
      "credit:created", "credit:replay", "credit:idempotency_mismatch", "credit:not_found",
      "debit:created", "debit:replay", "debit:idempotency_mismatch", "debit:insufficient_credits", "debit:not_found",
      "reserve:created", "reserve:replay", "reserve:idempotency_mismatch", "reserve:insufficient_credits",
      "reserve:too_many_holds", "reserve:not_found",
      "commit:full", "commit:partial", "commit:replay", "commit:invalid_request", "commit:hold_committed",
      "commit:hold_released", "commit:hold_expired", "commit:late_charged", "commit:late_forgiven",
      "commit:not_found",
      "release:created", "release:replay", "release:hold_committed", "release:not_found",
      "extend:created", "extend:hold_expired", "extend:hold_committed", "extend:hold_released", "extend:not_found",
      "expire:expired_some", "expire:expired_none",
      "create_key:created", "create_key:replay", "create_key:conflict", "create_key:not_found",
      "revoke_key:created", "revoke_key:replay", "revoke_key:conflict", "revoke_key:not_found",
      "update_account:created", "update_account:replay", "update_account:conflict", "update_account:not_found",
      "reserve:account_frozen", "debit:account_frozen",
      // states, read from the oracle's tables after a round
      "state:zombie", "state:reserved_into_overdraft", "state:expired_event",
      // replays of what an earlier command of the same batch made
      "reserve:replay/same_batch", "reserve:idempotency_mismatch/same_batch", "transfer:replay/same_batch",
  };
  return labels;
}

// ================================================================================================
// the differential test

// The test server, or a failure/skip as the run demands (a missing server is a failure in CI).
#define REQUIRE_POSTGRES_IF(needed)                                                                  \
  if ((needed) && !testing::postgres_server_uri()) {                                                 \
    if (testing::postgres_required()) FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but TOLLGATE_TEST_POSTGRES is unset"; \
    GTEST_SKIP() << "no PostgreSQL server (set TOLLGATE_TEST_POSTGRES)";                             \
  }

// The three stores of a differential run on one clock; a round is applied to each and compared.
class DiffRun {
 public:
  explicit DiffRun(BackendKind backend)
      : fresh_(backend, /*per_statement=*/false, clock_, "batch path"),
        oracle_(backend, /*per_statement=*/true, clock_, "one per transaction"),
        oracle2_(backend, /*per_statement=*/true, clock_, "per-statement path, one batch") {}

  ManualClock& clock() { return clock_; }
  Side& oracle() { return oracle_; }

  // Applies `steps` to the three stores and compares results, rows and reads (of `accounts`, the
  // keys of `secrets`, every hold listed, and read one by one: the holds of `requests` and those the
  // round made or named). Returns the differences (none: equal) and the oracle's results.
  // `oracle_as_one_batch`: the oracle too gets the round as one apply() (a bulk set-up, where one
  // transaction per command would only cost time).
  std::vector<std::string> round(const std::vector<Step>& steps, const std::set<std::string>& accounts,
                                 std::vector<std::string> requests, const std::vector<std::string>& secrets,
                                 std::vector<CommandResult>& r_oracle, bool oracle_as_one_batch = false) {
    std::vector<std::string> diffs;
    std::vector<Command> batch_new, batch_oracle2, one_by_one;
    for (const Step& s : steps) {
      batch_new.push_back(instantiate(s.command, fresh_));
      one_by_one.push_back(instantiate(s.command, oracle_));
      batch_oracle2.push_back(instantiate(s.command, oracle2_));
      if (oracle_as_one_batch) continue;  // a bulk set-up: its holds are compared through the listings
      std::visit(
          [&requests](const auto& c) {
            using T = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<T, ReserveCommand>) requests.push_back(c.request_id);
            if constexpr (std::is_same_v<T, CommitCommand> || std::is_same_v<T, ReleaseCommand> ||
                          std::is_same_v<T, ExtendCommand>) {
              for (const char* prefix : {kReq, kWrong}) {
                if (c.hold_id.rfind(prefix, 0) == 0) requests.push_back(c.hold_id.substr(std::string(prefix).size()));
              }
            }
          },
          s.command);
    }
    std::sort(requests.begin(), requests.end());
    requests.erase(std::unique(requests.begin(), requests.end()), requests.end());
    std::vector<CommandResult> r_new, r_oracle2;
    r_oracle.clear();
    if (const Status s = fresh_.store().apply(batch_new, r_new); !s.ok()) {
      return {"the batch path's apply failed: " + s.error().detail};
    }
    if (oracle_as_one_batch) {
      if (const Status s = oracle_.store().apply(one_by_one, r_oracle); !s.ok() || r_oracle.size() != steps.size()) {
        return {"the oracle's apply of the round failed"};
      }
    }
    for (const Command& c : oracle_as_one_batch ? std::vector<Command>{} : one_by_one) {
      std::vector<CommandResult> one;
      const Status s = oracle_.store().apply(std::span<const Command>(&c, 1), one);
      if (!s.ok() || one.size() != 1) return {"the oracle's apply of " + describe(c) + " failed"};
      r_oracle.push_back(std::move(one[0]));
    }
    if (const Status s = oracle2_.store().apply(batch_oracle2, r_oracle2); !s.ok()) {
      return {"oracle2's apply failed: " + s.error().detail};
    }
    if (r_new.size() != steps.size() || r_oracle2.size() != steps.size()) return {"a store answered too few results"};
    for (Side* side : {&fresh_, &oracle_, &oracle2_}) side->refresh_ids();
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string expected = show(r_oracle[i], oracle_.canon());
      const std::string got = show(r_new[i], fresh_.canon());
      const std::string got2 = show(r_oracle2[i], oracle2_.canon());
      if (got != expected) {
        diffs.push_back("command " + std::to_string(i) + " " + describe(steps[i].command) + "\n      oracle: " +
                        expected + "\n      batch:  " + got);
      }
      if (got2 != expected) {
        diffs.push_back("command " + std::to_string(i) + " " + describe(steps[i].command) + "\n      oracle:  " +
                        expected + "\n      oracle2: " + got2);
      }
    }
    const auto oracle_tables = table_lines(oracle_);
    diff_lines("tables (batch path)", oracle_tables, table_lines(fresh_), diffs);
    diff_lines("tables (oracle2)", oracle_tables, table_lines(oracle2_), diffs);
    const auto oracle_reads = read_lines(oracle_, accounts, requests, secrets);
    diff_lines("reads (batch path)", oracle_reads, read_lines(fresh_, accounts, requests, secrets), diffs);
    diff_lines("reads (oracle2)", oracle_reads, read_lines(oracle2_, accounts, requests, secrets), diffs);
    for (Side* side : {&fresh_, &oracle_, &oracle2_}) {
      auto report = side->store().audit(std::nullopt);
      if (!report.ok()) {
        diffs.push_back(side->label() + ": audit failed: " + report.error().detail);
        continue;
      }
      for (const auto& v : report->violations) diffs.push_back(side->label() + ": audit: " + v.account_id + ": " + v.message);
    }
    // The batch path must have decided every batch in one transaction: a re-run, or a batch split
    // into one command per transaction (what a permanent failure does), would hide its bugs here.
    const BatchRunCounters& c = fresh_.counters();
    if (c.conflict_reruns != 0 || c.isolated_batches != 0 || c.reconnect_reruns != 0) {
      diffs.push_back("the batch path re-ran or isolated a batch: conflict_reruns=" + std::to_string(c.conflict_reruns) +
                      " isolated_batches=" + std::to_string(c.isolated_batches) +
                      " reconnect_reruns=" + std::to_string(c.reconnect_reruns));
    }
    return diffs;
  }

 private:
  ManualClock clock_;  // first: the stores use it
  Side fresh_;
  Side oracle_;
  Side oracle2_;
};

std::string failure_text(const std::string& who, int round, std::int64_t now, const std::vector<Step>& steps,
                         const std::vector<std::string>& diffs) {
  std::string out = who + ": round " + std::to_string(round) + " (now=" + std::to_string(now) + ") differs from the oracle:";
  for (std::size_t i = 0; i < diffs.size() && i < 60; ++i) out += "\n  " + diffs[i];
  out += "\nthe round's batch:";
  for (std::size_t i = 0; i < steps.size(); ++i) out += "\n  " + std::to_string(i) + ": " + describe(steps[i].command);
  return out;
}

struct DiffParam {
  BackendKind backend;
  Shape shape;
  std::uint64_t seed;
};

// Seeds: TOLLGATE_DIFFERENTIAL_SEEDS=1,2,3 (every backend), or the default list (more for SQLite,
// whose runs take a fraction of a second, than for PostgreSQL, whose oracle pays a durable commit
// per command).
std::vector<std::uint64_t> seeds(BackendKind backend) {
  std::vector<std::uint64_t> out;
  if (const char* env = std::getenv("TOLLGATE_DIFFERENTIAL_SEEDS"); env && *env) {
    std::stringstream in(env);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (!item.empty()) out.push_back(std::stoull(item));
    }
    return out;
  }
  // Seeds whose runs reach every outcome required_labels() lists. With settings and key uses in the
  // mix, SQLite's runs (20 rounds) of seeds 1–40 on both shapes reach them 73 times in 80 (seeds 5
  // and 9 hot never charge a late commit: their hot account stays frozen too long); PostgreSQL's
  // shorter runs (14 and 12 rounds) less often: every spread run of seeds 1–8, hot ones of 1, 2, 4.
  if (backend == BackendKind::sqlite) return {1, 2, 3, 4, 6, 7, 8, 10};
  return {1, 2};
}

std::vector<DiffParam> diff_params() {
  std::vector<DiffParam> out;
  for (BackendKind backend : {BackendKind::sqlite, BackendKind::postgres}) {
    for (Shape shape : {Shape::hot, Shape::spread}) {
      for (std::uint64_t seed : seeds(backend)) out.push_back(DiffParam{backend, shape, seed});
    }
  }
  return out;
}

class Differential : public ::testing::TestWithParam<DiffParam> {};

TEST_P(Differential, ABatchMatchesTheSameCommandsAppliedOnePerTransaction) {
  const DiffParam p = GetParam();
  REQUIRE_POSTGRES_IF(p.backend == BackendKind::postgres);
  const std::string who = backend_name(p.backend) + (p.shape == Shape::hot ? " hot" : " spread") +
                          " seed=" + std::to_string(p.seed);
  SCOPED_TRACE(who + " (rerun with TOLLGATE_DIFFERENTIAL_SEEDS=" + std::to_string(p.seed) + ")");
  // SQLite rounds cost little; PostgreSQL's oracle pays a durable commit per command.
  const int rounds = p.backend == BackendKind::sqlite ? 20 : p.shape == Shape::hot ? 14 : 12;

  DiffRun run(p.backend);
  Generator gen(p.seed, p.shape);
  std::map<std::string, int> counts;
  std::size_t commands = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<Step> steps = gen.round(round);
    commands += steps.size();
    std::vector<CommandResult> r_oracle;
    const auto diffs = run.round(steps, gen.account_ids(), {}, gen.secrets(), r_oracle);
    if (!diffs.empty()) FAIL() << failure_text(who, round, run.clock().now_ms(), steps, diffs);

    // What the round exercised (on the oracle, which the other stores matched).
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string label = outcome_label(steps[i], r_oracle[i]);
      ++counts[label];
      if (!steps[i].note.empty()) ++counts[label + "/" + steps[i].note];
    }
    for (const auto& row : run.oracle().rows("SELECT count(*) FROM events WHERE type = 'reserved' AND available_after < 0", 1)) {
      if (std::stoll(*row[0]) > 0) ++counts["state:reserved_into_overdraft"];
    }
    for (const auto& row : run.oracle().rows("SELECT count(*) FROM events WHERE type = 'expired'", 1)) {
      if (std::stoll(*row[0]) > 0) ++counts["state:expired_event"];
    }
    run.clock().advance_ms(gen.advance_ms());
    // What the next round is generated from: holds and accounts as a reader sees them then.
    auto holds = run.oracle().store().lists().list_holds(HoldQuery{}, PageRequest{limits::kListPageMax});
    ASSERT_TRUE(holds.ok());
    ASSERT_FALSE(holds->has_more) << "the run outgrew one page of holds";
    std::vector<Account> views;
    for (const std::string& id : gen.account_ids()) {
      if (auto a = run.oracle().store().get_account(id); a.ok()) views.push_back(*a);
    }
    gen.learn(steps, r_oracle, holds->items, views);
    // Zombies for the next round: holds overdue that nobody expired yet.
    for (const auto& row : run.oracle().rows("SELECT count(*) FROM holds WHERE status = 'active' AND expires_at_ms <= " +
                                                 std::to_string(run.clock().now_ms()),
                                             1)) {
      if (std::stoll(*row[0]) > 0) ++counts["state:zombie"];
    }
  }

  counts["transfer:replay/same_batch"] = counts["credit:replay/same_batch"] + counts["debit:replay/same_batch"];
  std::string summary;
  for (const auto& [label, n] : counts) summary += " " + label + "=" + std::to_string(n);
  for (const std::string& label : required_labels()) {
    EXPECT_GT(counts[label], 0) << who << ": the run never produced " << label
                                << " — the comparison would not cover it. Counts:" << summary;
  }
  std::printf("[differential] %s: %zu commands in %d rounds;%s\n", who.c_str(), commands, rounds, summary.c_str());
}

INSTANTIATE_TEST_SUITE_P(Seeds, Differential, ::testing::ValuesIn(diff_params()),
                         [](const ::testing::TestParamInfo<DiffParam>& info) {
                           return backend_name(info.param.backend) +
                                  (info.param.shape == Shape::hot ? "_hot_seed" : "_spread_seed") +
                                  std::to_string(info.param.seed);
                         });

// Hand-picked cases for what a random run reaches rarely: replays of a transfer, a reservation, an
// account or a key made earlier in the same batch; the reaper's pass after an earlier command of
// the batch expired one of the holds it would have taken (a late commit, a refused reservation);
// ties of deadlines; an extended hold committed in the same batch. Each case runs on fresh stores
// and is compared exactly like the random rounds; a case stops at its first differing round.
struct HandPickedRound {
  std::int64_t advance_ms = 0;  // the clock moves on by this much before the round
  std::vector<Command> commands;
  bool bulk_setup = false;  // the oracle gets it as one batch too (see DiffRun::round)
};
struct HandPickedCase {
  std::string name;
  std::vector<HandPickedRound> rounds;
};

ReserveCommand hp_reserve(const std::string& account, std::int64_t amount, const std::string& request, std::int64_t ttl) {
  return ReserveCommand{account, amount, request, ttl, "", "00000000000000" + std::to_string(request.size() % 10) + "a"};
}
std::string hp_hold(const std::string& request) { return std::string(kReq) + request; }

// A, B (no limits), C (overdraft 10, at most 2 holds), with credits.
HandPickedRound hp_setup() {
  return {0,
          {CreateAccountCommand{"A", 0, std::nullopt}, CreateAccountCommand{"B", 0, std::nullopt},
           CreateAccountCommand{"C", 10, 2}, CreditCommand{"A", 100, "a-c0"}, CreditCommand{"B", 100, "b-c0"},
           CreditCommand{"C", 5, "c-c0"}, CreateKeyCommand{"k1", std::string("A"), std::string(64, '1')}}};
}

// Account `id` with `n` holds of 1 credit each, all of them using every credit, overdue 100 ms later.
HandPickedRound many_holds(const std::string& id, std::int64_t n) {
  HandPickedRound round{0, {CreateAccountCommand{id, 0, std::nullopt}, CreditCommand{id, n, id + "-c0"}}, true};
  for (std::int64_t i = 0; i < n; ++i) round.commands.push_back(hp_reserve(id, 1, id + "-m" + std::to_string(i), 100));
  return round;
}

// Account `id` whose purchased credits are within one amount of the largest balance.
HandPickedRound near_max(const std::string& id) {
  HandPickedRound round{0, {CreateAccountCommand{id, 0, std::nullopt}}, true};
  const std::int64_t n = limits::kBalanceMax / limits::kAmountMax;  // the credits that fit; the next one not
  for (std::int64_t i = 0; i < n; ++i) round.commands.push_back(CreditCommand{id, limits::kAmountMax, id + "-n" + std::to_string(i)});
  return round;
}

std::vector<HandPickedCase> hand_picked_cases() {
  using P = LateCommitPolicy;
  const auto res = hp_reserve;
  const auto hold = hp_hold;
  return {
      {"transfers replayed and mismatched in the batch that made them",
       {hp_setup(),
        {10,
         {CreditCommand{"A", 5, "a-c1"}, CreditCommand{"A", 5, "a-c1"}, CreditCommand{"A", 6, "a-c1"},
          DebitCommand{"A", 3, "a-d1", "r"}, DebitCommand{"A", 3, "a-d1", "r"}, DebitCommand{"A", 3, "a-d1", "other"},
          CreditCommand{"B", 3, "a-d1"}, CreditCommand{"ghost", 5, "a-c1"}}}}},
      {"reservations replayed and mismatched in the batch that made them",
       {hp_setup(),
        {10,
         {res("A", 2, "r-same", 60'000), res("A", 2, "r-same", 60'000), res("A", 3, "r-same", 60'000),
          res("B", 2, "r-same", 60'000), res("C", 20, "r-c", 60'000), res("C", 20, "r-c", 60'000),
          res("C", 1, "r-c2", 60'000), res("C", 1, "r-c3", 60'000)}}}},
      {"an account and keys made, replayed and revoked in one batch",
       {hp_setup(),
        {10,
         {CreateAccountCommand{"D", 0, std::nullopt}, CreditCommand{"D", 4, "d-c1"},
          CreateAccountCommand{"D", 0, std::nullopt}, CreateAccountCommand{"D", 1, std::nullopt},
          res("D", 1, "hD1", 60'000), CreateAccountCommand{"D", 0, std::nullopt},
          CreateKeyCommand{"k2", std::string("D"), std::string(64, '2')},
          CreateKeyCommand{"k2", std::string("D"), std::string(64, '2')}, RevokeKeyCommand{"k2"},
          RevokeKeyCommand{"k2"}, RevokeKeyCommand{"k1"}, CreateKeyCommand{"k2", std::string("D"), std::string(64, '3')},
          CreateAccountCommand{"A", 0, std::nullopt}}}}},
      {"holds extended, committed, released and replayed in one batch",
       {hp_setup(),
        {0, {res("A", 3, "h1", 60'000), res("A", 4, "h2", 60'000), res("A", 5, "h3", 1'000)}},
        {10,
         {ExtendCommand{hold("h1"), 500}, CommitCommand{hold("h1"), 1, P::charge}, CommitCommand{hold("h1"), 1, P::charge},
          ReleaseCommand{hold("h2")}, ReleaseCommand{hold("h2")}, CommitCommand{hold("h2"), std::nullopt, P::charge},
          ExtendCommand{hold("h3"), 300}, CreateAccountCommand{"A", 0, std::nullopt}, CreditCommand{"A", 1, "a-c1"}}},
        {400, {CommitCommand{hold("h3"), 2, P::charge}, ExtendCommand{hold("h3"), 300}, ReleaseCommand{hold("h3")}}}}},
      {"the reaper's pass after a late commit in the same batch expired the oldest overdue hold",
       {hp_setup(),
        {0, {res("A", 10, "hA1", 1'000), res("B", 10, "hB1", 1'000), res("B", 7, "hB2", 1'000)}},
        {1'500, {CommitCommand{hold("hA1"), std::nullopt, P::charge}, ExpireOverdueCommand{1}}}}},
      {"the reaper's pass after a refused reservation expired its account's overdue holds",
       {hp_setup(),
        {0, {res("C", 3, "hC1", 1'000), res("B", 10, "hB1", 1'000), res("B", 7, "hB2", 1'000)}},
        {1'500, {res("C", 100, "hC2", 60'000), ExpireOverdueCommand{2}}}}},
      {"reaper passes over holds of one deadline, one of them late-committed first",
       {hp_setup(),
        {0,
         {res("A", 1, "t1", 100), res("B", 1, "t2", 100), res("A", 1, "t3", 100), res("B", 1, "t4", 100),
          res("A", 1, "t5", 100)}},
        {200, {CommitCommand{hold("t3"), std::nullopt, P::charge}, ExpireOverdueCommand{2}, ExpireOverdueCommand{1}}}}},
      {"late commits under each policy and reaper passes in one batch",
       {hp_setup(),
        {0,
         {res("A", 10, "l1", 100), res("A", 20, "l2", 100), res("A", 30, "l3", 100), res("C", 15, "l4", 100),
          DebitCommand{"C", 0 + 1, "c-d0", ""}}},
        {200,
         {ExpireOverdueCommand{1'000}, CommitCommand{hold("l1"), 5, P::charge}, CommitCommand{hold("l2"), 5, P::forgive},
          CommitCommand{hold("l3"), 5, P::reject}, CommitCommand{hold("l1"), 5, P::reject},
          CommitCommand{hold("l2"), 7, P::charge}, CommitCommand{hold("l4"), std::nullopt, P::charge},
          ReleaseCommand{hold("l1")}, ReleaseCommand{hold("l3")}, ExpireOverdueCommand{1'000}}}}},
      {"two refusals in one batch on an account with more overdue holds than one pass expires",
       {hp_setup(), many_holds("E", limits::kReaperBatchMaxDefault + 1),
        {200,
         {res("E", 1'000, "big-1", 60'000),  // refused, expires 1,000 overdue holds, then fits
          res("E", 1, "big-2", 60'000),      // refused again: the last overdue hold is expired, then it fits
          CreateAccountCommand{"E", 0, std::nullopt}}}}},
      {"balances at the edge of the largest balance (2^53 − 1)",
       {hp_setup(), near_max("E"),
        {10,
         {CreditCommand{"E", limits::kAmountMax, "e-over"}, res("E", limits::kAmountMax, "e-r1", 100),
          res("E", limits::kAmountMax, "e-r2", 100), DebitCommand{"E", limits::kAmountMax, "e-d1", ""},
          CreditCommand{"E", limits::kAmountMax, "e-over"}, CreateAccountCommand{"E", 0, std::nullopt}}},
        {200, {CommitCommand{hold("e-r1"), std::nullopt, P::charge}, CreditCommand{"E", 1, "e-c1"}, ExpireOverdueCommand{10}}}}},
  };
}

class DifferentialHandPicked : public ::testing::TestWithParam<BackendKind> {};

TEST_P(DifferentialHandPicked, CasesMatchTheSameCommandsAppliedOnePerTransaction) {
  REQUIRE_POSTGRES_IF(GetParam() == BackendKind::postgres);
  for (const HandPickedCase& c : hand_picked_cases()) {
    const auto started = std::chrono::steady_clock::now();
    const std::string who = backend_name(GetParam()) + " hand-picked case '" + c.name + "'";
    DiffRun run(GetParam());
    std::vector<std::string> requests;
    const std::vector<std::string> secrets = {std::string(64, '1'), std::string(64, '2'), std::string(64, '3')};
    for (std::size_t r = 0; r < c.rounds.size(); ++r) {
      run.clock().advance_ms(c.rounds[r].advance_ms);
      std::vector<Step> steps;
      for (const Command& command : c.rounds[r].commands) steps.push_back(Step{command, "hand-picked", ""});
      std::vector<CommandResult> r_oracle;
      const auto diffs =
          run.round(steps, {"A", "B", "C", "D", "E", "ghost"}, requests, secrets, r_oracle, c.rounds[r].bulk_setup);
      if (!diffs.empty()) {
        ADD_FAILURE() << failure_text(who, static_cast<int>(r), run.clock().now_ms(), steps, diffs);
        break;  // later rounds would only repeat the difference
      }
      for (const Step& s : steps) {
        const auto* reserve = std::get_if<ReserveCommand>(&s.command);
        if (reserve && !c.rounds[r].bulk_setup) requests.push_back(reserve->request_id);
      }
    }
    std::printf("[differential] %s: %lld ms\n", who.c_str(),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - started)
                                           .count()));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DifferentialHandPicked, ::testing::Values(BackendKind::sqlite, BackendKind::postgres),
                         [](const ::testing::TestParamInfo<BackendKind>& info) { return backend_name(info.param); });

// ================================================================================================
// refusals in the middle of a set-based batch

// A batch where refused commands (insufficient credits, unknown hold, idempotency mismatches,
// ended holds, too many holds, unknown accounts…) sit between successful ones on the same account:
// the refused ones must change nothing — no event, no row, their request_id / reference not taken —
// and every other one must be applied. Checked twice: against hand-computed figures, and against a
// second store that got the same batch without the refused commands (same results, same rows).
class RefusalsInABatch : public ::testing::TestWithParam<BackendKind> {};

TEST_P(RefusalsInABatch, ChangeNothingAndTheCommandsAroundThemAreAllApplied) {
  REQUIRE_POSTGRES_IF(GetParam() == BackendKind::postgres);
  ManualClock clock;
  Side with(GetParam(), /*per_statement=*/false, clock, "with refusals");
  Side without(GetParam(), /*per_statement=*/false, clock, "without refusals");
  const auto reserve = [](const std::string& account, std::int64_t amount, const std::string& request) {
    return ReserveCommand{account, amount, request, 60'000, "", "00000000000000" + request.substr(request.size() - 2)};
  };
  const std::vector<Command> setup = {
      CreateAccountCommand{"mid", 0, 5},     CreateAccountCommand{"other", 0, std::nullopt},
      CreditCommand{"mid", 100, "mid-c0"},   CreditCommand{"other", 5, "other-c"},
      reserve("mid", 10, "mid-r0"),          reserve("mid", 5, "mid-r1"),
      ReleaseCommand{std::string(kReq) + "mid-r1"},
  };
  for (Side* side : {&with, &without}) {
    for (const Command& c : setup) {
      std::vector<CommandResult> r;
      ASSERT_TRUE(side->store().apply(std::vector<Command>{instantiate(c, *side)}, r).ok());
      ASSERT_TRUE(r.at(0).ok()) << describe(c) << ": " << r.at(0).error().detail;
      side->refresh_ids();
    }
  }
  clock.advance_ms(10);
  const std::string h0 = std::string(kReq) + "mid-r0", h1 = std::string(kReq) + "mid-r1";
  struct Expected {
    Command command;
    Code code;  // ok: applied (or a replay, when `replay`)
    bool replay = false;
  };
  const std::vector<Expected> batch = {
      {CreditCommand{"mid", 20, "mid-c1"}, Code::ok},
      {DebitCommand{"mid", 1'000, "mid-d1", "x"}, Code::insufficient_credits},
      {reserve("mid", 30, "mid-r2"), Code::ok},
      {CommitCommand{"hold_987654321_00000000000000ff", std::nullopt, LateCommitPolicy::charge}, Code::not_found},
      {reserve("mid", 11, "mid-r0"), Code::idempotency_mismatch},
      {CreditCommand{"mid", 7, "other-c"}, Code::idempotency_mismatch},
      {CommitCommand{h1, std::nullopt, LateCommitPolicy::charge}, Code::hold_released},
      {DebitCommand{"mid", 15, "mid-d2", ""}, Code::ok},
      {reserve("mid", 5'000, "mid-r3"), Code::insufficient_credits},
      {CommitCommand{h0, 4, LateCommitPolicy::charge}, Code::ok},
      {CommitCommand{h0, 5, LateCommitPolicy::charge}, Code::hold_committed},
      {ReleaseCommand{h0}, Code::hold_committed},
      {ExtendCommand{h1, 1'000}, Code::hold_released},
      {reserve("mid", 2, "mid-r4"), Code::ok},
      {reserve("ghost", 1, "mid-r5"), Code::not_found},
      {CreditCommand{"ghost", 1, "mid-c9"}, Code::not_found},
      {CreateAccountCommand{"mid", 5, 5}, Code::conflict},
      {reserve("mid", 1, "mid-r6"), Code::ok},
      {CommitCommand{h0, 100, LateCommitPolicy::charge}, Code::invalid_request},
      {reserve("mid", 1, "mid-r7"), Code::ok},
      {CreditCommand{"mid", 3, "mid-c10"}, Code::ok},
      {DebitCommand{"mid", 1, "mid-d1", "x"}, Code::ok},      // the refused debit's reference was not taken
      {reserve("mid", 1, "mid-r3"), Code::ok},                // nor the refused reservation's request_id
      {reserve("mid", 1, "mid-r8"), Code::too_many_holds},    // 5 active holds now, the most allowed
      {DebitCommand{"mid", 500, "mid-d3", ""}, Code::insufficient_credits},
      {CreateKeyCommand{"k-mid", std::string("ghost"), std::string(64, 'a')}, Code::not_found},
      {RevokeKeyCommand{"k-none"}, Code::not_found},
      {reserve("mid", 30, "mid-r2"), Code::ok, /*replay=*/true},
      {CreditCommand{"mid", 20, "mid-c1"}, Code::ok, /*replay=*/true},
      {ExpireOverdueCommand{10}, Code::ok, /*replay=*/true},  // nothing is overdue: expires nothing
  };
  std::vector<Command> all, kept;
  std::vector<std::size_t> kept_index;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    all.push_back(instantiate(batch[i].command, with));
    if (batch[i].code == Code::ok) {
      kept.push_back(instantiate(batch[i].command, without));
      kept_index.push_back(i);
    }
  }
  std::vector<CommandResult> r_all, r_kept;
  ASSERT_TRUE(with.store().apply(all, r_all).ok());
  ASSERT_TRUE(without.store().apply(kept, r_kept).ok());
  ASSERT_EQ(r_all.size(), all.size());
  ASSERT_EQ(r_kept.size(), kept.size());
  with.refresh_ids();
  without.refresh_ids();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(code_name(r_all[i].code()), code_name(batch[i].code))
        << i << ": " << describe(batch[i].command) << ": " << show(r_all[i], with.canon());
    if (batch[i].code == Code::ok && r_all[i].ok() && !std::holds_alternative<ExpireOutcome>(r_all[i].value())) {
      const bool created = std::visit(
          [](const auto& o) {
            if constexpr (requires { o.created; }) return o.created;
            return false;
          },
          r_all[i].value());
      EXPECT_EQ(created, !batch[i].replay) << i << ": " << describe(batch[i].command);
    }
  }
  for (std::size_t k = 0; k < kept.size(); ++k) {
    EXPECT_EQ(show(r_all[kept_index[k]], with.canon()), show(r_kept[k], without.canon()))
        << kept_index[k] << ": " << describe(batch[kept_index[k]].command);
  }
  // Hand-computed: 100 − 10 (r0) + 20 − 30 − 15 + 6 (r0 commits 4 of 10) − 2 − 1 − 1 + 3 − 1 − 1.
  auto mid = with.store().get_account("mid");
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->balances, (Balances{68, 35, 4, 107})) << show(*mid);
  EXPECT_EQ(mid->active_holds, 5);
  auto events = with.store().read_events("mid", 0, limits::kEventsPageMax);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> types;
  for (const Event& e : events->events) types.push_back(std::string(event_type_name(e.type)) + " " + std::to_string(e.amount));
  const std::vector<std::string> expected_types = {
      "credited 100", "reserved 10", "reserved 5", "released 5",                                    // setup
      "credited 20", "reserved 30", "debited 15", "committed 4", "reserved 2", "reserved 1",       // the batch
      "reserved 1", "credited 3", "debited 1", "reserved 1"};
  EXPECT_EQ(types, expected_types);
  auto other = with.store().get_account("other");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->balances, (Balances{5, 0, 0, 5}));
  EXPECT_EQ(with.store().get_account("ghost").code(), Code::not_found);
  // Row for row what the batch without its refusals wrote.
  std::vector<std::string> diffs;
  diff_lines("tables", table_lines(without), table_lines(with), diffs);
  diff_lines("reads", read_lines(without, {"mid", "other", "ghost"}, {"mid-r0", "mid-r1", "mid-r2", "mid-r3", "mid-r4", "mid-r6", "mid-r7"}, {}),
             read_lines(with, {"mid", "other", "ghost"}, {"mid-r0", "mid-r1", "mid-r2", "mid-r3", "mid-r4", "mid-r6", "mid-r7"}, {}),
             diffs);
  for (const std::string& d : diffs) ADD_FAILURE() << d;
  for (Side* side : {&with, &without}) {
    auto report = side->store().audit(std::nullopt);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->violations.empty()) << side->label() << ": " << report->violations.front().message;
    // Refusals are results: they never make the batch path re-run or split the batch.
    EXPECT_EQ(side->counters().isolated_batches, 0u);
    EXPECT_EQ(side->counters().conflict_reruns, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RefusalsInABatch, ::testing::Values(BackendKind::sqlite, BackendKind::postgres),
                         [](const ::testing::TestParamInfo<BackendKind>& info) { return backend_name(info.param); });

}  // namespace
}  // namespace tollgate
