// The batch path of the PostgreSQL store (see pg_write.h and store/batch_runner.h).
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <unordered_set>

#include "core/hold_id.h"
#include "core/lots.h"
#include "store/postgres/pg_slices.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"

namespace tollgate::pg {
namespace {

// --- round trip 1: begin, clock, locks, loads -----------------------------------------------------
const std::string kBegin = "BEGIN";
// The batch's one `now`: the database's clock (or the injected one), kept in the transaction for
// the statements that follow in the same pipeline.
const std::string kSetNow =
    "SELECT set_config('tollgate.now', coalesce($1::bigint, "
    "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)::text, true)::bigint";
#define TG_NOW "current_setting('tollgate.now')::bigint"
// The accounts named and those of the holds named, locked in id order (LockRows sits above the sort).
#define TG_NAMED_ACCOUNTS \
  "ARRAY(SELECT unnest($1::text[]) UNION SELECT account_id FROM holds WHERE seq = ANY($2::bigint[]))"
const std::string kLockAccounts = std::string("SELECT ") + kAccountColumns +
                                  " FROM accounts WHERE account_id = ANY(" TG_NAMED_ACCOUNTS
                                  ") ORDER BY account_id FOR UPDATE";
// The reaper's: the accounts of the oldest overdue holds ($1 of them) and of the oldest overdue lots ($2).
const std::string kLockReaperAccounts =
    std::string("SELECT ") + kAccountColumns +
    " FROM accounts WHERE account_id = ANY(ARRAY((SELECT account_id FROM holds WHERE status = 'active' AND "
    "expires_at_ms <= " TG_NOW " ORDER BY expires_at_ms, seq LIMIT $1) UNION (SELECT account_id FROM lots "
    "WHERE live = 1 AND expires_at_ms <= " TG_NOW " AND available > 0 ORDER BY expires_at_ms, seq LIMIT $2))) "
    "ORDER BY account_id FOR UPDATE SKIP LOCKED";
// Credit lots (batch.h LedgerSnapshot::lots): the live lots of the accounts named, and what the holds
// named by seq drew from.
const std::string kLiveLots = std::string("SELECT ") + kLotColumns + " FROM lots WHERE account_id = ANY(" TG_NAMED_ACCOUNTS
                              ") AND live = 1";
const std::string kDrawnLots = std::string("SELECT ") + kLotColumns +
                               " FROM lots WHERE seq = ANY(ARRAY(SELECT split_part(d, ':', 1)::bigint FROM holds h "
                               "CROSS JOIN LATERAL unnest(string_to_array(h.lots, ',')) d WHERE h.seq = ANY($1::bigint[])))";
const std::string kNewLotSeqs = "SELECT nextval('lots_seq') FROM generate_series(1, $1::bigint)";
const std::string kReaperLots = std::string("SELECT ") + kLotColumns +
                                " FROM lots WHERE account_id = ANY($1::text[]) AND live = 1";
const std::string kHoldsBySeq = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE seq = ANY($1::bigint[])";
const std::string kHoldsByRequest =
    std::string("SELECT ") + kHoldColumns + " FROM holds WHERE request_id = ANY($1::text[])";
const std::string kTransfers = std::string("SELECT ") + kTransferColumns +
                               " FROM transfers t JOIN events e ON e.event_id = t.event_id "
                               "WHERE t.reference = ANY($1::text[])";
const std::string kOverdueOfAccounts =
    "SELECT h.* FROM unnest(" TG_NAMED_ACCOUNTS ") AS a(account_id) CROSS JOIN LATERAL (SELECT " +
    std::string(kHoldColumns) +
    " FROM holds WHERE account_id = a.account_id AND status = 'active' AND expires_at_ms <= " TG_NOW
    " ORDER BY expires_at_ms, seq LIMIT $3) h";
const std::string kViewTotals =
    "SELECT a.account_id, count(h.seq), coalesce(sum(h.amount), 0) FROM unnest($1::text[]) AS a(account_id) "
    "LEFT JOIN holds h ON h.account_id = a.account_id AND h.status = 'active' AND h.expires_at_ms <= " TG_NOW
    " GROUP BY a.account_id";
const std::string kViewOldest =
    "SELECT a.account_id, l.created_at_ms, l.seq FROM unnest($1::text[]) AS a(account_id) CROSS JOIN LATERAL ("
    "SELECT created_at_ms, seq FROM holds WHERE account_id = a.account_id AND status = 'active' AND "
    "expires_at_ms > " TG_NOW " ORDER BY created_at_ms, seq LIMIT $2) l";
const std::string kKeys = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE key_id = ANY($1::text[]) FOR UPDATE";
const std::string kNewSeqs = "SELECT nextval('holds_seq') FROM generate_series(1, $1::bigint)";
// Round trip 1b, only for a reaper pass: the overdue holds of the accounts it locked.
const std::string kReaperHolds = std::string("SELECT ") + kHoldColumns +
                                 " FROM holds WHERE account_id = ANY($1::text[]) AND status = 'active' AND "
                                 "expires_at_ms <= " TG_NOW " ORDER BY expires_at_ms, seq LIMIT $2";

// --- round trip 2: the writes and COMMIT ----------------------------------------------------------
const std::string kInsertAccounts =
    "INSERT INTO accounts (account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, "
    "active_holds, created_at_ms, frozen, low_balance_threshold, frozen_reason, expired) SELECT * FROM unnest("
    "$1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], "
    "$9::bigint[], $10::boolean[], $11::bigint[], $12::text[], $13::bigint[])";
const std::string kUpdateAccounts =
    "WITH u AS (UPDATE accounts a SET available = v.available, reserved = v.reserved, used = v.used, "
    "purchased = v.purchased, active_holds = v.active_holds, overdraft_limit = v.overdraft_limit, "
    "max_active_holds = v.max_active_holds, frozen = v.frozen, low_balance_threshold = v.low_balance_threshold, "
    "frozen_reason = v.frozen_reason, expired = v.expired "
    "FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
    "$8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $15::boolean[], "
    "$16::bigint[], $17::text[], $18::bigint[], $19::bigint[]) "
    "AS v(account_id, available, reserved, used, purchased, active_holds, overdraft_limit, max_active_holds, "
    "b_available, b_reserved, b_used, b_purchased, b_active_holds, frozen, low_balance_threshold, frozen_reason, "
    "expired, b_expired) "
    "WHERE a.account_id = v.account_id AND a.available = v.b_available AND a.reserved = v.b_reserved "
    "AND a.used = v.b_used AND a.purchased = v.b_purchased AND a.active_holds = v.b_active_holds "
    "AND a.expired = v.b_expired RETURNING 1) "
    "SELECT tollgate_assert(count(*) = $14, 'an account changed behind the batch''s lock') FROM u";
const std::string kInsertHolds =
    "INSERT INTO holds (seq, hold_id, account_id, request_id, amount, committed_amount, status, late_outcome, "
    "created_at_ms, expires_at_ms, closed_at_ms, metadata, release_reason, lots) SELECT * FROM unnest($1::bigint[], "
    "$2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::bigint[], "
    "$10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[])";
const std::string kUpdateHolds =
    "WITH u AS (UPDATE holds h SET status = v.status, committed_amount = v.committed_amount, "
    "late_outcome = v.late_outcome, expires_at_ms = v.expires_at_ms, closed_at_ms = v.closed_at_ms, "
    "release_reason = v.release_reason, refunded_amount = v.refunded_amount, lots = v.lots "
    "FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], "
    "$8::text[], $9::bigint[], $10::text[], $11::bigint[], $13::text[], $14::bigint[], $15::bigint[], $16::text[]) "
    "AS v(seq, hold_id, status, committed_amount, late_outcome, expires_at_ms, closed_at_ms, b_status, "
    "b_committed_amount, b_late_outcome, b_expires_at_ms, release_reason, refunded_amount, b_refunded_amount, lots) "
    "WHERE h.seq = v.seq AND h.hold_id = v.hold_id AND h.status = v.b_status "
    "AND h.committed_amount = v.b_committed_amount AND h.late_outcome IS NOT DISTINCT FROM v.b_late_outcome "
    "AND h.expires_at_ms = v.b_expires_at_ms AND h.refunded_amount = v.b_refunded_amount RETURNING 1) "
    "SELECT tollgate_assert(count(*) = $12, 'a hold changed behind the batch''s lock') FROM u";
// Events in the batch's order, their ids the next ones of event_ids — the batch's LAST lock, held
// until COMMIT (pg_store.h) —, and the new transfers with their events' ids.
const std::string kInsertEvents =
    "WITH n AS (UPDATE event_ids SET last_event_id = last_event_id + $16 RETURNING last_event_id - $16 AS before), "
    "e AS (INSERT INTO events (event_id, account_id, type, amount, hold_id, reference, at_ms, available_after, "
    "reserved_after, used_after, reason, overdraft_limit, max_active_holds, frozen, job_id, expires_at_ms, "
    "low_balance_threshold, expired_after, lot_seq) "
    "SELECT n.before + v.ord, v.account_id, v.type, v.amount, v.hold_id, v.reference, v.at_ms, v.available_after, "
    "v.reserved_after, v.used_after, v.reason, v.overdraft_limit, v.max_active_holds, v.frozen, v.job_id, "
    "v.expires_at_ms, v.low_balance_threshold, v.expired_after, v.lot_seq FROM n, unnest($1::text[], $2::text[], "
    "$3::bigint[], $4::text[], $5::text[], $6::bigint[], "
    "$7::bigint[], $8::bigint[], $9::bigint[], $17::text[], $18::bigint[], $19::bigint[], $20::boolean[], "
    "$21::text[], $22::bigint[], $23::bigint[], $24::bigint[], $25::bigint[]) WITH ORDINALITY AS v(account_id, type, "
    "amount, hold_id, reference, at_ms, available_after, reserved_after, used_after, reason, overdraft_limit, "
    "max_active_holds, frozen, job_id, expires_at_ms, low_balance_threshold, expired_after, lot_seq, ord) "
    "ORDER BY v.ord "
    "RETURNING event_id, account_id, type, hold_id, reference), "
    "t AS (INSERT INTO transfers (reference, account_id, kind, amount, reason, event_id) "
    "SELECT u.reference, u.account_id, u.kind, u.amount, u.reason, e.event_id FROM unnest($10::text[], "
    "$11::text[], $12::text[], $13::bigint[], $14::text[]) AS u(reference, account_id, kind, amount, reason) "
    "JOIN e ON e.reference = u.reference AND e.type = u.kind RETURNING 1) "
    "SELECT event_id, account_id, type, hold_id, reference, "
    "tollgate_assert((SELECT count(*) FROM t) = $15, 'a transfer did not find its event') FROM e";
const std::string kInsertLots =
    "INSERT INTO lots (seq, account_id, reference, category, priority, expires_at_ms, amount, available, reserved, "
    "used, expired, created_at_ms, live) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "
    "$5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], "
    "$13::bigint[])";
// `live` is always set: PostgreSQL compares the indexed columns' values, so an update that leaves it
// as it was (most: a spend) is a HOT update when the page has room (schema 16: fillfactor 80).
const std::string kUpdateLots =
    "WITH u AS (UPDATE lots l SET amount = v.amount, available = v.available, reserved = v.reserved, used = v.used, "
    "expired = v.expired, live = CASE WHEN v.available > 0 OR v.reserved > 0 THEN 1 ELSE 0 END "
    "FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
    "$8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[]) "
    "AS v(seq, amount, available, reserved, used, expired, b_amount, b_available, b_reserved, b_used, b_expired) "
    "WHERE l.seq = v.seq AND l.amount = v.b_amount AND l.available = v.b_available AND l.reserved = v.b_reserved "
    "AND l.used = v.b_used AND l.expired = v.b_expired RETURNING 1) "
    "SELECT tollgate_assert(count(*) = $12, 'a lot changed behind the batch''s lock') FROM u";
const std::string kInsertKey =
    "INSERT INTO api_keys (key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms, last_used_at_ms, scopes, "
    "expires_at_ms, name) VALUES ($1, $2, $3, $4, $5, $6::bigint, $7, $8::bigint, $9)";
const std::string kUpdateKey =
    "WITH u AS (UPDATE api_keys SET revoked_at_ms = $2::bigint, last_used_at_ms = $3::bigint WHERE key_id = $1 AND "
    "revoked_at_ms IS NOT DISTINCT FROM $4::bigint AND last_used_at_ms IS NOT DISTINCT FROM $5::bigint RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a key changed behind the batch''s lock') FROM u";
// No statement time-out on the COMMIT: a cancelled wait for a synchronous standby would still
// answer OK for a commit that is only on the primary ("committed locally, but might not have been
// replicated"), and a fail-over could then lose it. The COMMIT waits as long as the database does.
const std::string kNoTimeout = "SELECT set_config('statement_timeout', '0', true)";
const std::string kCommit = "COMMIT";

#undef TG_NOW
#undef TG_NAMED_ACCOUNTS


std::optional<std::string> late_or_null(LateOutcome outcome) {
  if (outcome == LateOutcome::none) return std::nullopt;
  return std::string(late_outcome_name(outcome));
}

std::optional<std::string> draws_or_null(const std::vector<LotDraw>& draws) {
  if (draws.empty()) return std::nullopt;
  return lots::draws_text(draws);
}

// The batch's new and changed credit lots (after the holds, before the slices' rows).
void add_lot_writes(const batch::Effects& e, std::vector<Conn::Pipelined>& st) {
  if (!e.new_lots.empty()) {
    const auto& n = e.new_lots;
    st.push_back({&kInsertLots,
                  Params(int_array(column(n, [](const Lot& x) { return x.seq; })),
                         text_array(column(n, [](const Lot& x) { return x.account_id; })),
                         text_array(column(n, [](const Lot& x) { return x.reference; })),
                         text_array(column(n, [](const Lot& x) { return std::string(lot_category_name(x.terms.category)); })),
                         int_array(column(n, [](const Lot& x) { return x.terms.priority; })),
                         int_array(column(n, [](const Lot& x) { return x.terms.expires_at_ms; })),
                         int_array(column(n, [](const Lot& x) { return x.amount; })),
                         int_array(column(n, [](const Lot& x) { return x.available; })),
                         int_array(column(n, [](const Lot& x) { return x.reserved; })),
                         int_array(column(n, [](const Lot& x) { return x.used; })),
                         int_array(column(n, [](const Lot& x) { return x.expired; })),
                         int_array(column(n, [](const Lot& x) { return x.created_at_ms; })),
                         int_array(column(n, [](const Lot& x) { return std::int64_t{lot_is_live(x)}; })))});
  }
  if (!e.changed_lots.empty()) {
    using C = batch::Change<Lot>;
    const auto& c = e.changed_lots;
    for (const C& x : c) TG_ASSERT(x.before.seq == x.after.seq && x.before.terms == x.after.terms);
    st.push_back({&kUpdateLots,
                  Params(int_array(column(c, [](const C& x) { return x.after.seq; })),
                         int_array(column(c, [](const C& x) { return x.after.amount; })),
                         int_array(column(c, [](const C& x) { return x.after.available; })),
                         int_array(column(c, [](const C& x) { return x.after.reserved; })),
                         int_array(column(c, [](const C& x) { return x.after.used; })),
                         int_array(column(c, [](const C& x) { return x.after.expired; })),
                         int_array(column(c, [](const C& x) { return x.before.amount; })),
                         int_array(column(c, [](const C& x) { return x.before.available; })),
                         int_array(column(c, [](const C& x) { return x.before.reserved; })),
                         int_array(column(c, [](const C& x) { return x.before.used; })),
                         int_array(column(c, [](const C& x) { return x.before.expired; })),
                         static_cast<std::int64_t>(c.size()))});
  }
}

std::int64_t seq_of(const Hold& h) {
  const auto seq = hold_id_seq(h.hold_id);
  TG_ASSERT(seq.has_value());  // ids the batch made or read are well formed
  return *seq;
}

// Each slice's loads into the pipeline, in registration order (a braced list evaluates in order).
template <typename... S>
auto add_slice_loads(const batch::BatchKeys<S...>& keys, std::vector<Conn::Pipelined>& st) {
  return std::tuple{add_loads(keys.template of<S>(), st)...};
}

template <typename... S, typename Loads, std::size_t... I>
void take_slice_rows(const Loads& at, const std::vector<Rows>& r, batch::BatchSnapshot<S...>& s,
                     std::index_sequence<I...>) {
  (take_rows(std::get<I>(at), r, s.template of<S>()), ...);
}

template <typename... S, typename Loads>
void take_slice_rows(const Loads& at, const std::vector<Rows>& r, batch::BatchSnapshot<S...>& s) {
  take_slice_rows(at, r, s, std::index_sequence_for<S...>{});
}

}  // namespace

batch::Snapshot PgBatchIo::begin_and_load(const batch::Keys& keys) {
  if (!writer_ || !writer_->healthy()) {
    writer_.reset();
    writer_ = Conn::connect(options_.uri, ConnectOptions{options_.connect_timeout_ms, options_.statement_timeout_ms});
  }
  Conn& db = *writer_;
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  const std::optional<std::int64_t> injected_now =
      options_.clock ? std::optional<std::int64_t>(options_.clock->now_ms()) : std::nullopt;
  const std::string accounts = text_array(keys.accounts);
  const std::string seqs = int_array(keys.hold_seqs);
  const bool named = !keys.accounts.empty() || !keys.hold_seqs.empty();
  std::vector<Conn::Pipelined> st;
  st.push_back({&kBegin, Params()});
  st.push_back({&kSetNow, Params(injected_now)});
  const auto add = [&](const std::string& sql, Params params) {
    st.push_back({&sql, std::move(params)});
    return st.size() - 1;
  };
  const std::size_t lock_at = named ? add(kLockAccounts, Params(accounts, seqs)) : kNone;
  const std::size_t reaper_at =
      keys.overdue_max > 0 ? add(kLockReaperAccounts, Params(keys.reaper_load_bound(), keys.overdue_max)) : kNone;
  const std::size_t by_seq_at = keys.hold_seqs.empty() ? kNone : add(kHoldsBySeq, Params(seqs));
  const std::size_t by_request_at =
      keys.request_ids.empty() ? kNone : add(kHoldsByRequest, Params(text_array(keys.request_ids)));
  const std::size_t transfers_at =
      keys.references.empty() ? kNone : add(kTransfers, Params(text_array(keys.references)));
  const std::size_t overdue_at =
      named ? add(kOverdueOfAccounts, Params(accounts, seqs, keys.overdue_per_account_max())) : kNone;
  const std::string views = text_array(keys.view_accounts);
  const std::size_t totals_at = keys.view_accounts.empty() ? kNone : add(kViewTotals, Params(views));
  const std::size_t oldest_at =
      keys.view_accounts.empty() ? kNone : add(kViewOldest, Params(views, keys.oldest_live_needed()));
  const std::size_t keys_at = keys.key_ids.empty() ? kNone : add(kKeys, Params(text_array(keys.key_ids)));
  const std::size_t new_seqs_at = keys.new_holds_max > 0 ? add(kNewSeqs, Params(keys.new_holds_max)) : kNone;
  const std::size_t live_lots_at = named ? add(kLiveLots, Params(accounts, seqs)) : kNone;
  const std::size_t drawn_lots_at = keys.refunds && !keys.hold_seqs.empty() ? add(kDrawnLots, Params(seqs)) : kNone;
  const std::size_t new_lot_seqs_at = keys.new_lots_max > 0 ? add(kNewLotSeqs, Params(keys.new_lots_max)) : kNone;
  // Each slice's loads, by its loader for this dialect (pg_slices.h), in registration order.
  const auto slice_loads = add_slice_loads(keys, st);
  std::size_t failed = 0;
  const std::vector<Rows> r = db.pipeline(st, failed);

  batch::Snapshot s;
  s.now_ms = r[1].int64(0, 0);
  std::unordered_set<std::string> locked;
  const auto take_accounts = [&](const Rows& rows) {
    for (int i = 0; i < rows.size(); ++i) {
      Account a = read_account(rows, i);
      if (locked.insert(a.account_id).second) s.accounts.push_back(std::move(a));
    }
  };
  const auto take_holds = [&](const Rows& rows) {
    for (int i = 0; i < rows.size(); ++i) s.holds.push_back(read_hold(rows, i));
  };
  if (lock_at != kNone) take_accounts(r[lock_at]);
  std::vector<std::string> reaper_accounts;
  if (reaper_at != kNone) {
    for (int i = 0; i < r[reaper_at].size(); ++i) reaper_accounts.push_back(r[reaper_at].text(i, 0));
    take_accounts(r[reaper_at]);
  }
  if (by_seq_at != kNone) take_holds(r[by_seq_at]);
  if (by_request_at != kNone) take_holds(r[by_request_at]);
  const std::int64_t overdue_loaded = overdue_at == kNone ? 0 : r[overdue_at].size();
  if (overdue_at != kNone) take_holds(r[overdue_at]);
  if (transfers_at != kNone) {
    const Rows& t = r[transfers_at];
    for (int i = 0; i < t.size(); ++i) s.transfers.push_back(read_transfer(t, i));
  }
  if (totals_at != kNone) {
    const Rows& totals = r[totals_at];
    for (int i = 0; i < totals.size(); ++i) {
      std::string id = totals.text(i, 0);
      if (locked.count(id) == 0) continue;  // no such account
      s.views.push_back(batch::AccountView{std::move(id), totals.int64(i, 1), totals.int64(i, 2), {}});
    }
    const Rows& oldest = r[oldest_at];
    for (int i = 0; i < oldest.size(); ++i) {
      const std::string id = oldest.text(i, 0);
      for (batch::AccountView& v : s.views) {
        if (v.account_id == id) v.oldest_live.emplace_back(oldest.int64(i, 1), oldest.int64(i, 2));
      }
    }
    for (batch::AccountView& v : s.views) std::sort(v.oldest_live.begin(), v.oldest_live.end());
  }
  if (keys_at != kNone) {
    for (int i = 0; i < r[keys_at].size(); ++i) s.keys.push_back(read_key(r[keys_at], i));
  }
  if (new_seqs_at != kNone) {
    for (int i = 0; i < r[new_seqs_at].size(); ++i) s.new_hold_seqs.push_back(r[new_seqs_at].int64(i, 0));
    std::sort(s.new_hold_seqs.begin(), s.new_hold_seqs.end());
  }
  const auto take_lots = [&](const Rows& rows) {
    for (int i = 0; i < rows.size(); ++i) s.lots.push_back(read_lot(rows, i));
  };
  if (live_lots_at != kNone) take_lots(r[live_lots_at]);
  if (drawn_lots_at != kNone) take_lots(r[drawn_lots_at]);
  if (new_lot_seqs_at != kNone) {
    for (int i = 0; i < r[new_lot_seqs_at].size(); ++i) s.new_lot_seqs.push_back(r[new_lot_seqs_at].int64(i, 0));
    std::sort(s.new_lot_seqs.begin(), s.new_lot_seqs.end());
  }
  take_slice_rows(slice_loads, r, s);
  if (!reaper_accounts.empty()) {
    // Read after the accounts were locked (a statement of its own: a fresh snapshot).
    take_holds(db.query(kReaperHolds, text_array(reaper_accounts), keys.reaper_load_max(overdue_loaded)));
    take_lots(db.query(kReaperLots, text_array(reaper_accounts)));
  }
  return s;
}

std::vector<std::int64_t> PgBatchIo::write_and_commit(const batch::Effects& e) {
  Conn& db = *writer_;
  std::vector<Conn::Pipelined> st;
  if (!e.new_accounts.empty()) {
    const auto& a = e.new_accounts;
    st.push_back({&kInsertAccounts,
                  Params(text_array(column(a, [](const Account& x) { return x.account_id; })),
                         int_array(column(a, [](const Account& x) { return x.balances.available; })),
                         int_array(column(a, [](const Account& x) { return x.balances.reserved; })),
                         int_array(column(a, [](const Account& x) { return x.balances.used; })),
                         int_array(column(a, [](const Account& x) { return x.balances.purchased; })),
                         int_array(column(a, [](const Account& x) { return x.overdraft_limit; })),
                         int_array(column(a, [](const Account& x) { return x.max_active_holds; })),
                         int_array(column(a, [](const Account& x) { return x.active_holds; })),
                         int_array(column(a, [](const Account& x) { return x.created_at_ms; })),
                         bool_array(column(a, [](const Account& x) { return x.frozen; })),
                         int_array(column(a, [](const Account& x) { return x.low_balance_threshold; })),
                         text_array(column(a, [](const Account& x) { return x.frozen_reason; })),
                         int_array(column(a, [](const Account& x) { return x.balances.expired; })))});
  }
  if (!e.changed_accounts.empty()) {
    using C = batch::Change<Account>;
    const auto& c = e.changed_accounts;
    st.push_back({&kUpdateAccounts,
                  Params(text_array(column(c, [](const C& x) { return x.after.account_id; })),
                         int_array(column(c, [](const C& x) { return x.after.balances.available; })),
                         int_array(column(c, [](const C& x) { return x.after.balances.reserved; })),
                         int_array(column(c, [](const C& x) { return x.after.balances.used; })),
                         int_array(column(c, [](const C& x) { return x.after.balances.purchased; })),
                         int_array(column(c, [](const C& x) { return x.after.active_holds; })),
                         int_array(column(c, [](const C& x) { return x.after.overdraft_limit; })),
                         int_array(column(c, [](const C& x) { return x.after.max_active_holds; })),
                         int_array(column(c, [](const C& x) { return x.before.balances.available; })),
                         int_array(column(c, [](const C& x) { return x.before.balances.reserved; })),
                         int_array(column(c, [](const C& x) { return x.before.balances.used; })),
                         int_array(column(c, [](const C& x) { return x.before.balances.purchased; })),
                         int_array(column(c, [](const C& x) { return x.before.active_holds; })),
                         static_cast<std::int64_t>(c.size()),
                         bool_array(column(c, [](const C& x) { return x.after.frozen; })),
                         int_array(column(c, [](const C& x) { return x.after.low_balance_threshold; })),
                         text_array(column(c, [](const C& x) { return x.after.frozen_reason; })),
                         int_array(column(c, [](const C& x) { return x.after.balances.expired; })),
                         int_array(column(c, [](const C& x) { return x.before.balances.expired; })))});
  }
  if (!e.new_holds.empty()) {
    const auto& h = e.new_holds;
    for (const Hold& x : h) TG_ASSERT(x.refunded_amount == 0);  // a new hold charged nothing (the column's default)
    st.push_back({&kInsertHolds,
                  Params(int_array(column(h, [](const Hold& x) { return seq_of(x); })),
                         text_array(column(h, [](const Hold& x) { return x.hold_id; })),
                         text_array(column(h, [](const Hold& x) { return x.account_id; })),
                         text_array(column(h, [](const Hold& x) { return x.request_id; })),
                         int_array(column(h, [](const Hold& x) { return x.amount; })),
                         int_array(column(h, [](const Hold& x) { return x.committed_amount; })),
                         text_array(column(h, [](const Hold& x) { return std::string(hold_status_name(x.status)); })),
                         text_array(column(h, [](const Hold& x) { return late_or_null(x.late_outcome); })),
                         int_array(column(h, [](const Hold& x) { return x.created_at_ms; })),
                         int_array(column(h, [](const Hold& x) { return x.expires_at_ms; })),
                         int_array(column(h, [](const Hold& x) { return x.closed_at_ms; })),
                         text_array(column(h, [](const Hold& x) { return x.metadata_json; })),
                         text_array(column(h, [](const Hold& x) { return x.release_reason; })),
                         text_array(column(h, [](const Hold& x) { return draws_or_null(x.lots); })))});
  }
  if (!e.changed_holds.empty()) {
    using C = batch::Change<Hold>;
    const auto& c = e.changed_holds;
    st.push_back(
        {&kUpdateHolds,
         Params(int_array(column(c, [](const C& x) { return seq_of(x.after); })),
                text_array(column(c, [](const C& x) { return x.after.hold_id; })),
                text_array(column(c, [](const C& x) { return std::string(hold_status_name(x.after.status)); })),
                int_array(column(c, [](const C& x) { return x.after.committed_amount; })),
                text_array(column(c, [](const C& x) { return late_or_null(x.after.late_outcome); })),
                int_array(column(c, [](const C& x) { return x.after.expires_at_ms; })),
                int_array(column(c, [](const C& x) { return x.after.closed_at_ms; })),
                text_array(column(c, [](const C& x) { return std::string(hold_status_name(x.before.status)); })),
                int_array(column(c, [](const C& x) { return x.before.committed_amount; })),
                text_array(column(c, [](const C& x) { return late_or_null(x.before.late_outcome); })),
                int_array(column(c, [](const C& x) { return x.before.expires_at_ms; })),
                static_cast<std::int64_t>(c.size()),
                text_array(column(c, [](const C& x) { return x.after.release_reason; })),
                int_array(column(c, [](const C& x) { return x.after.refunded_amount; })),
                int_array(column(c, [](const C& x) { return x.before.refunded_amount; })),
                text_array(column(c, [](const C& x) { return draws_or_null(x.after.lots); })))});
  }
  add_lot_writes(e, st);
  // Each slice's rows, by its writer for this dialect (pg_slices.h), in registration order: before
  // the keys and the events (the event ids' lock must be the batch's last, pg_store.h).
  batch::for_each_slice(e, [&](const auto& effects) { add_writes(effects, st); });
  // Keys before the events: the event ids' lock must be the batch's last (pg_store.h), and a key's
  // insert may wait for another transaction's.
  for (const ApiKey& k : e.new_keys) {
    st.push_back({&kInsertKey, Params(k.key_id, k.account_id, k.secret_sha256, k.created_at_ms, k.revoked_at_ms,
                                      k.last_used_at_ms, scopes_text(k.scopes), k.expires_at_ms, k.name)});
  }
  for (const auto& [before, after] : e.changed_keys) {
    // A key changes when revoked or used: its id, account, secret, creation, scopes, expiry and name
    // never change.
    TG_ASSERT(before.key_id == after.key_id && before.account_id == after.account_id &&
              before.secret_sha256 == after.secret_sha256 && before.created_at_ms == after.created_at_ms &&
              before.scopes == after.scopes && before.expires_at_ms == after.expires_at_ms && before.name == after.name);
    st.push_back({&kUpdateKey, Params(after.key_id, after.revoked_at_ms, after.last_used_at_ms, before.revoked_at_ms,
                                      before.last_used_at_ms)});
  }
  std::size_t events_at = 0;
  if (!e.events.empty()) {
    using T = batch::Effects::NewTransfer;
    const auto& v = e.events;
    const auto& t = e.transfers;
    events_at = st.size();
    st.push_back({&kInsertEvents,
                  Params(text_array(column(v, [](const Event& x) { return x.account_id; })),
                         text_array(column(v, [](const Event& x) { return std::string(event_type_name(x.type)); })),
                         int_array(column(v, [](const Event& x) { return x.amount; })),
                         text_array(column(v, [](const Event& x) { return x.hold_id; })),
                         text_array(column(v, [](const Event& x) { return x.reference; })),
                         int_array(column(v, [](const Event& x) { return x.at_ms; })),
                         int_array(column(v, [](const Event& x) { return x.available_after; })),
                         int_array(column(v, [](const Event& x) { return x.reserved_after; })),
                         int_array(column(v, [](const Event& x) { return x.used_after; })),
                         text_array(column(t, [](const T& x) { return x.transfer.reference; })),
                         text_array(column(t, [](const T& x) { return x.transfer.account_id; })),
                         text_array(column(t, [](const T& x) { return std::string(event_type_name(x.transfer.kind)); })),
                         int_array(column(t, [](const T& x) { return x.transfer.amount; })),
                         text_array(column(t, [](const T& x) { return x.transfer.reason; })),
                         static_cast<std::int64_t>(t.size()), static_cast<std::int64_t>(v.size()),
                         text_array(column(v, [](const Event& x) { return x.reason; })),
                         int_array(column(v, [](const Event& x) {
                           return x.settings ? std::optional<std::int64_t>(x.settings->overdraft_limit) : std::nullopt;
                         })),
                         int_array(column(v, [](const Event& x) {
                           return x.settings ? x.settings->max_active_holds : std::optional<std::int64_t>();
                         })),
                         bool_array(column(v, [](const Event& x) {
                           return x.settings ? std::optional<bool>(x.settings->frozen) : std::optional<bool>();
                         })),
                         text_array(column(v, [](const Event& x) { return x.job_id; })),
                         int_array(column(v, [](const Event& x) { return x.expires_at_ms; })),
                         int_array(column(v, [](const Event& x) {
                           return x.settings ? x.settings->low_balance_threshold : std::optional<std::int64_t>();
                         })),
                         int_array(column(v, [](const Event& x) { return x.expired_after; })),
                         int_array(column(v, [](const Event& x) { return x.lot_seq; })))});
  } else {
    TG_ASSERT(e.transfers.empty());
  }
  st.push_back({&kNoTimeout, Params()});
  const std::size_t commit_at = st.size();
  st.push_back({&kCommit, Params()});
  std::size_t failed = 0;
  const std::vector<Rows> r = db.pipeline(st, failed);
  if (r[commit_at].command_tag() != "COMMIT") {  // PostgreSQL answers ROLLBACK for a failed transaction
    throw PgError("XX000", false, "the transaction rolled back at COMMIT (" + r[commit_at].command_tag() + ")");
  }
  std::vector<std::int64_t> ids;
  if (e.events.empty()) return ids;
  // The events' ids, in the batch's order: RETURNING answers rows as the INSERT took them (in
  // ordinality order), and nextval() gave them increasing ids. Checked, not trusted.
  const Rows& returned = r[events_at];
  TG_ASSERT(returned.size() == static_cast<int>(e.events.size()));
  ids.reserve(e.events.size());
  for (int i = 0; i < returned.size(); ++i) {
    const Event& ev = e.events[static_cast<std::size_t>(i)];
    TG_ASSERT(returned.text(i, 1) == ev.account_id && returned.text(i, 2) == event_type_name(ev.type) &&
              returned.optional_text(i, 3) == ev.hold_id && returned.optional_text(i, 4) == ev.reference);
    ids.push_back(returned.int64(i, 0));
  }
  return ids;
}

void PgBatchIo::rollback() noexcept {
  if (writer_) writer_->rollback();
}

FailureKind PgBatchIo::classify(const std::exception& failure) const {
  const auto* e = dynamic_cast<const PgError*>(&failure);
  if (e == nullptr) return FailureKind::permanent;
  if (e->connection_lost()) return FailureKind::connection_lost;
  if (e->is_conflict()) return FailureKind::conflict;
  if (e->is_transient()) return FailureKind::transient;
  return FailureKind::permanent;
}

Error PgBatchIo::to_error(const std::exception& failure) const {
  if (const auto* e = dynamic_cast<const PgError*>(&failure)) return pg_failure(*e);
  return Error::make(Code::internal, std::string("store: ") + failure.what());
}

}  // namespace tollgate::pg
