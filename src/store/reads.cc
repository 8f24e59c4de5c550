// The reads of every backend, once (see reads.h).
#include "store/reads.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/checked.h"
#include "core/hold_id.h"
#include "core/invariants.h"
#include "core/limits.h"
#include "core/parse.h"
#include "core/rules.h"

namespace tollgate::reads {
namespace {

// Runs `body(conn, now_ms) -> Result<T>` in one snapshot of `source`.
template <typename T, typename F>
Result<T> read(ReadSource& source, F&& body) {
  std::optional<Result<T>> out;
  Status ran = source.run([&](ReadConn& db, std::int64_t now_ms) { out.emplace(body(db, now_ms)); });
  if (!ran) return ran.error();
  TG_ASSERT(out.has_value());  // run answered without an error: the body ran to its end
  return std::move(*out);
}

// The rows of one statement, each decoded by `decode(row)`.
template <typename F>
auto rows_of(ReadConn& db, const std::string& sql, SqlValues values, F&& decode) {
  std::vector<decltype(decode(std::declval<const ReadRow&>()))> out;
  db.each(sql, values, [&](const ReadRow& row) { out.push_back(decode(row)); });
  return out;
}

// The first row of one statement decoded, or nullopt without one.
template <typename F>
auto first_of(ReadConn& db, const std::string& sql, SqlValues values, F&& decode)
    -> std::optional<decltype(decode(std::declval<const ReadRow&>()))> {
  std::optional<decltype(decode(std::declval<const ReadRow&>()))> out;
  db.each(sql, values, [&](const ReadRow& row) {
    if (!out) out.emplace(decode(row));
  });
  return out;
}

bool account_exists(ReadConn& db, const ReadSql& sql, std::string_view account_id) {
  return first_of(db, sql.account_exists, {account_id}, [](const ReadRow&) { return true; }).has_value();
}

std::vector<std::string> ids_of(ReadConn& db, const std::string& sql, SqlValues values) {
  return rows_of(db, sql, values, [](const ReadRow& r) { return r.text(0); });
}

Error account_not_found(std::string_view account_id) {
  return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
}

Status validate_event_page(std::int64_t after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kEventsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kEventsPageMax));
  }
  if (after < 0) return invalid("after must be 0 or a previous next_after");
  return ok_status();
}

Status validate_account_range(std::int64_t limit) {
  if (limit < 1 || limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return ok_status();
}

EventPage event_page(std::vector<Event> events, std::int64_t after) {
  EventPage page;
  page.next_after = events.empty() ? after : events.back().event_id;
  page.events = std::move(events);
  return page;
}

// The account's credit lots (core/lots.h): each adds up, the account holds at least what they hold
// (its base's share never negative, never expired), and each lot's reserved credits are exactly what
// the account's active holds drew from it.
std::vector<std::string> audit_lots(ReadConn& db, const ReadSql& sql, const Account& account) {
  std::vector<std::string> out;
  const std::vector<Lot> lots = rows_of(db, sql.lots_of_account, {account.account_id}, [](const ReadRow& r) { return r.lot(); });
  if (auto bad = lots::check_account_lots(account, lots)) out.push_back(account.account_id + ": " + *bad);
  std::map<std::int64_t, std::int64_t> drawn;  // lot seq → reserved by active holds
  bool readable = true;
  db.each(sql.active_hold_draws, {account.account_id}, [&](const ReadRow& r) {
    const auto draws = lots::parse_draws(r.text(0));
    if (!draws) {
      readable = false;
      return;
    }
    for (const LotDraw& d : *draws) drawn[d.lot_seq] += d.amount;
  });
  if (!readable) out.push_back(account.account_id + ": an active hold's lots are unreadable");
  for (const Lot& lot : lots) {
    const auto it = drawn.find(lot.seq);
    const std::int64_t held = it == drawn.end() ? 0 : it->second;
    if (held != lot.reserved) {
      out.push_back(account.account_id + ": lot " + lot_id(lot.seq) + " has " + std::to_string(lot.reserved) +
                    " reserved, its active holds drew " + std::to_string(held));
    }
    if (it != drawn.end()) drawn.erase(it);
  }
  for (const auto& [seq, n] : drawn) {
    out.push_back(account.account_id + ": active holds drew " + std::to_string(n) + " from " + lot_id(seq) +
                  ", not a lot of this account");
  }
  return out;
}

// Audits the accounts `ids` (each exists) in the snapshot `db` reads. The sums are the database's
// (SQLite fails a sum that overflows; PostgreSQL's numeric sum fails to read as an integer): the
// audit adds nothing itself but its count, checked.
AuditReport audit_accounts(ReadConn& db, const ReadSql& sql, const std::vector<std::string>& ids) {
  AuditReport report;
  for (const std::string& id : ids) {
    const auto row = db.account_row(id);
    TG_ASSERT(row.has_value());
    const std::vector<Event> events = rows_of(db, sql.events_of_account, {id}, [](const ReadRow& r) { return r.event(); });
    const auto active = first_of(db, sql.active_hold_totals, {id},
                                 [](const ReadRow& r) { return std::pair(r.int64(0), r.int64(1)); });
    TG_ASSERT(active.has_value());  // an aggregate answers one row
    for (auto& message : invariants::check_account(*row, events, active->first, active->second)) {
      report.violations.push_back(AuditViolation{id, std::move(message)});
    }
    for (auto& message : audit_lots(db, sql, *row)) report.violations.push_back(AuditViolation{id, std::move(message)});
    ++report.accounts_checked;  // one per account read: far below the range of int64
  }
  return report;
}

}  // namespace

// --- the ledger's reads ---------------------------------------------------------------------------
Result<Account> LedgerReads::get_account(std::string_view account_id) {
  return read<Account>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Account> {
    auto a = db.account_view(account_id, now);
    if (!a) return account_not_found(account_id);
    return std::move(*a);
  });
}

Result<Hold> LedgerReads::get_hold(std::string_view hold_id) {
  return read<Hold>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Hold> {
    auto hold = db.hold_by_id(hold_id);
    if (!hold) return Error::make(Code::not_found, "hold " + std::string(hold_id) + " does not exist");
    return rules::hold_view(std::move(*hold), now);
  });
}

Result<EventPage> LedgerReads::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  if (auto valid = validate_event_page(after, limit); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<EventPage>(source_, [&](ReadConn& db, std::int64_t) -> Result<EventPage> {
    if (!db.account_row(account_id)) return account_not_found(account_id);
    return event_page(rows_of(db, sql.events_after, {account_id, after, limit}, [](const ReadRow& r) { return r.event(); }),
                      after);
  });
}

Result<EventPage> LedgerReads::read_feed(std::int64_t after, std::int64_t limit, std::int64_t last_shown) {
  if (auto valid = validate_event_page(after, limit); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<EventPage>(source_, [&](ReadConn& db, std::int64_t) -> Result<EventPage> {
    return event_page(rows_of(db, sql.feed, {after, last_shown, limit}, [](const ReadRow& r) { return r.event(); }),
                      after);
  });
}

Result<AuditReport> LedgerReads::audit(std::optional<std::string_view> account_id) {
  const ReadSql& sql = source_.sql();
  return read<AuditReport>(source_, [&](ReadConn& db, std::int64_t) -> Result<AuditReport> {
    std::vector<std::string> ids;
    if (account_id) {
      if (!db.account_row(*account_id)) return account_not_found(*account_id);
      ids.emplace_back(*account_id);
    } else {
      ids = ids_of(db, sql.account_ids_all, {});
    }
    return audit_accounts(db, sql, ids);
  });
}

Result<AuditPage> LedgerReads::audit_range(std::string_view after, std::int64_t limit) {
  if (auto valid = validate_account_range(limit); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<AuditPage>(source_, [&](ReadConn& db, std::int64_t) -> Result<AuditPage> {
    const std::vector<std::string> ids = ids_of(db, sql.account_ids_after, {after, limit});
    AuditPage page;
    page.report = audit_accounts(db, sql, ids);
    page.last_account_id = ids.empty() ? std::string(after) : ids.back();
    page.has_more = static_cast<std::int64_t>(ids.size()) == limit;
    return page;
  });
}

Result<KeyLookup> LedgerReads::find_key(std::string_view secret_sha256) {
  const ReadSql& sql = source_.sql();
  return read<KeyLookup>(source_, [&](ReadConn& db, std::int64_t now_ms) -> Result<KeyLookup> {
    return KeyLookup{first_of(db, sql.key_by_secret, {secret_sha256}, [](const ReadRow& r) { return r.key(); }), now_ms};
  });
}

Result<LedgerStats> LedgerReads::stats() {
  const ReadSql& sql = source_.sql();
  return read<LedgerStats>(source_, [&](ReadConn& db, std::int64_t now) -> Result<LedgerStats> {
    LedgerStats out;
    const auto holds = first_of(db, sql.live_hold_stats, {now}, [](const ReadRow& r) {
      return std::pair(r.int64(0), r.optional_int64(1));
    });
    TG_ASSERT(holds.has_value());  // an aggregate answers one row
    out.active_holds = holds->first;
    if (holds->second) out.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now - *holds->second);
    const auto accounts = first_of(db, sql.account_count, {}, [](const ReadRow& r) { return r.int64(0); });
    TG_ASSERT(accounts.has_value());
    out.accounts = *accounts;
    return out;
  });
}

Result<std::vector<std::string>> LedgerReads::list_account_ids(std::string_view after, std::int64_t limit) {
  if (auto valid = validate_account_range(limit); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<std::vector<std::string>>(source_, [&](ReadConn& db, std::int64_t) -> Result<std::vector<std::string>> {
    return ids_of(db, sql.account_ids_after, {after, limit});
  });
}

Result<bool> LedgerReads::has_admin_key() {
  const ReadSql& sql = source_.sql();
  return read<bool>(source_, [&](ReadConn& db, std::int64_t) -> Result<bool> {
    const auto any = first_of(db, sql.has_admin_key, {}, [](const ReadRow& r) { return r.int64(0) != 0; });
    TG_ASSERT(any.has_value());
    return *any;
  });
}

// --- the lists ------------------------------------------------------------------------------------
Result<Page<Account>> Lists::list_accounts(const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<Page<Account>>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Page<Account>> {
    if (page.starting_after && !account_exists(db, sql, *page.starting_after)) {
      return unknown_cursor("account", *page.starting_after);
    }
    return page_of(db.account_views(page.starting_after.value_or(""), page.limit + 1, now), page);
  });
}

Result<Page<Hold>> Lists::list_holds(const HoldQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<Page<Hold>>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Page<Hold>> {
    if (query.account_id && !account_exists(db, sql, *query.account_id)) return account_not_found(*query.account_id);
    std::int64_t cursor_seq = kNoHoldCursor;
    if (page.starting_after) {
      const auto cursor = db.hold_by_id(*page.starting_after);
      if (!cursor || (query.account_id && cursor->account_id != *query.account_id)) {
        return unknown_cursor("hold", *page.starting_after);
      }
      cursor_seq = *hold_id_seq(cursor->hold_id);
    }
    const std::optional<std::string> status =
        query.status ? std::optional<std::string>(hold_status_name(*query.status)) : std::nullopt;
    return page_of(rows_of(db, sql.holds[HoldQueryShape::of(query).index()],
                           {query.account_id, query.request_id, now, status, cursor_seq, page.limit + 1},
                           [&](const ReadRow& r) { return rules::hold_view(r.hold(), now); }),
                   page);
  });
}

Result<Page<KeySummary>> Lists::list_keys(std::optional<std::string_view> account_id, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<Page<KeySummary>>(source_, [&](ReadConn& db, std::int64_t) -> Result<Page<KeySummary>> {
    if (account_id && !account_exists(db, sql, *account_id)) return account_not_found(*account_id);
    // The position after which to read: (created_at_ms, key_id), descending.
    std::int64_t cursor_created = std::numeric_limits<std::int64_t>::max();
    std::string cursor_id;
    if (page.starting_after) {
      const auto cursor = first_of(db, sql.key_cursor, {*page.starting_after},
                                   [](const ReadRow& r) { return std::pair(r.optional_text(0), r.int64(1)); });
      if (!cursor || (account_id && cursor->first != std::optional<std::string>(*account_id))) {
        return unknown_cursor("key", *page.starting_after);
      }
      cursor_created = cursor->second;
      cursor_id = *page.starting_after;
    }
    return page_of(rows_of(db, account_id ? sql.keys_of_account : sql.keys_all,
                           {account_id.value_or(""), cursor_created, cursor_id, page.limit + 1},
                           [](const ReadRow& r) {
                             KeySummary k{r.text(0), r.optional_text(1), r.int64(2), r.optional_int64(3),
                                          r.optional_int64(4)};
                             // A scope this release does not know lists as none.
                             k.scopes = stored_scopes(r.optional_text(5), k.account_id.has_value()).value_or(ScopeSet{});
                             k.expires_at_ms = r.optional_int64(6);
                             k.name = r.optional_text(7);
                             return k;
                           }),
                   page);
  });
}

Result<Page<lots::LotView>> Lists::list_lots(const LotQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<Page<lots::LotView>>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Page<lots::LotView>> {
    if (!account_exists(db, sql, query.account_id)) return account_not_found(query.account_id);
    // The position after which to read: the cursor lot's place in the spending order.
    std::int64_t priority = -1, expires = 0, seq = 0;
    if (page.starting_after) {
      const auto cursor_seq = parse_lot_id(*page.starting_after);
      const auto cursor = cursor_seq ? first_of(db, sql.lot_by_seq, {*cursor_seq}, [](const ReadRow& r) { return r.lot(); })
                                     : std::nullopt;
      if (!cursor || cursor->account_id != query.account_id) return unknown_cursor("lot", *page.starting_after);
      priority = cursor->terms.priority;
      expires = cursor->terms.expires_at_ms.value_or(kLotNeverExpires);
      seq = cursor->seq;
    }
    // What overdue holds drew is back in their lots for readers, as their credits are in the account's.
    std::map<std::int64_t, std::int64_t> overdue;
    bool readable = true;
    db.each(sql.overdue_hold_draws, {query.account_id, now}, [&](const ReadRow& r) {
      const auto draws = lots::parse_draws(r.text(0));
      if (!draws) {
        readable = false;
        return;
      }
      for (const LotDraw& d : *draws) overdue[d.lot_seq] += d.amount;
    });
    if (!readable) return Error::make(Code::internal, "a hold of account " + query.account_id + " has unreadable lots");
    const std::size_t shape = query.status ? 1 + static_cast<std::size_t>(*query.status) : 0;
    return page_of(rows_of(db, sql.lots.at(shape), {query.account_id, now, priority, expires, seq, page.limit + 1},
                           [&](const ReadRow& r) {
                             Lot lot = r.lot();
                             const auto it = overdue.find(lot.seq);
                             return lots::lot_view(std::move(lot), now, it == overdue.end() ? 0 : it->second);
                           }),
                   page);
  });
}

Result<TransferRecord> Lists::get_transfer(std::string_view reference) {
  const ReadSql& sql = source_.sql();
  return read<TransferRecord>(source_, [&](ReadConn& db, std::int64_t) -> Result<TransferRecord> {
    auto found = first_of(db, sql.transfer, {reference}, [](const ReadRow& r) { return r.transfer(); });
    if (!found) return transfer_not_found(reference);
    return std::move(*found);
  });
}

// --- jobs -----------------------------------------------------------------------------------------
namespace {

Error job_not_found(std::string_view id) {
  return Error::make(Code::not_found, "job " + std::string(id) + " does not exist");
}

std::optional<jobs::Job> job_row(ReadConn& db, const ReadSql& sql, std::string_view id) {
  return first_of(db, sql.job, {id}, [](const ReadRow& r) { return r.job(); });
}

}  // namespace

Result<jobs::Job> JobReads::get_job(std::string_view client_request_id) {
  const ReadSql& sql = source_.sql();
  return read<jobs::Job>(source_, [&](ReadConn& db, std::int64_t) -> Result<jobs::Job> {
    auto j = job_row(db, sql, client_request_id);
    if (!j) return job_not_found(client_request_id);
    return std::move(*j);
  });
}

Result<Page<jobs::Job>> JobReads::list_jobs(const jobs::JobQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<Page<jobs::Job>>(source_, [&](ReadConn& db, std::int64_t) -> Result<Page<jobs::Job>> {
    if (query.account_id && !account_exists(db, sql, *query.account_id)) return account_not_found(*query.account_id);
    std::int64_t cursor = std::numeric_limits<std::int64_t>::max();
    if (page.starting_after) {
      const auto j = job_row(db, sql, *page.starting_after);
      if (!j || (query.account_id && j->account_id != *query.account_id)) return unknown_cursor("job", *page.starting_after);
      cursor = *hold_id_seq(j->hold_id);
    }
    const std::optional<std::string> status =
        query.status ? std::optional<std::string>(jobs::job_status_name(*query.status)) : std::nullopt;
    const std::size_t shape = (query.account_id ? 1 : 0) + (query.status ? 2 : 0);
    return page_of(rows_of(db, sql.jobs[shape], {query.account_id, status, cursor, page.limit + 1},
                           [](const ReadRow& r) { return r.job(); }),
                   page);
  });
}

Result<std::vector<jobs::JobEntry>> JobReads::job_history(std::string_view client_request_id) {
  const ReadSql& sql = source_.sql();
  return read<std::vector<jobs::JobEntry>>(source_, [&](ReadConn& db, std::int64_t) -> Result<std::vector<jobs::JobEntry>> {
    if (!job_row(db, sql, client_request_id)) return job_not_found(client_request_id);
    return rows_of(db, sql.job_history, {client_request_id, std::int64_t{limits::kJobHistoryMax}},
                   [](const ReadRow& r) { return r.job_entry(); });
  });
}

Result<std::vector<jobs::Job>> JobReads::jobs_to_recover(std::int64_t limit) {
  TG_ASSERT(limit >= 1);
  const ReadSql& sql = source_.sql();
  return read<std::vector<jobs::Job>>(source_, [&](ReadConn& db, std::int64_t now) -> Result<std::vector<jobs::Job>> {
    return rows_of(db, sql.jobs_to_recover, {now, limit}, [](const ReadRow& r) { return r.job(); });
  });
}

Result<jobs::UnendedJobs> JobReads::count_unended() {
  const ReadSql& sql = source_.sql();
  return read<jobs::UnendedJobs>(source_, [&](ReadConn& db, std::int64_t) -> Result<jobs::UnendedJobs> {
    jobs::UnendedJobs out;
    db.each(sql.unended_jobs, {},
            [&](const ReadRow& r) { (r.text(0) == "pending" ? out.pending : out.running) = r.int64(1); });
    return out;
  });
}

// --- coordination ---------------------------------------------------------------------------------
Result<coord::RowRead<coord::Lock>> CoordReads::get_lock(std::string_view key) {
  const ReadSql& sql = source_.sql();
  return read<coord::RowRead<coord::Lock>>(source_, [&](ReadConn& db, std::int64_t now) -> Result<coord::RowRead<coord::Lock>> {
    return coord::RowRead<coord::Lock>{first_of(db, sql.lock, {key}, [](const ReadRow& r) { return r.lock(); }), now};
  });
}

Result<coord::RowRead<coord::IdempotencyKey>> CoordReads::get_idempotency_key(std::string_view key) {
  const ReadSql& sql = source_.sql();
  using Answer = coord::RowRead<coord::IdempotencyKey>;
  return read<Answer>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Answer> {
    return Answer{first_of(db, sql.idempotency_key, {key}, [](const ReadRow& r) { return r.idempotency_key(); }), now};
  });
}

Result<coord::LockPage> CoordReads::list_locks(const PageRequest& page, bool held_only) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  return read<coord::LockPage>(source_, [&](ReadConn& db, std::int64_t now) -> Result<coord::LockPage> {
    if (page.starting_after && !first_of(db, sql.lock, {*page.starting_after}, [](const ReadRow&) { return true; })) {
      return unknown_cursor("lock", *page.starting_after);
    }
    auto rows = page_of(rows_of(db, sql.locks_after,
                                {page.starting_after.value_or(""), std::int64_t{held_only ? 1 : 0}, now, page.limit + 1},
                                [](const ReadRow& r) { return r.lock(); }),
                        page);
    coord::LockPage out;
    out.locks = std::move(rows.items);
    out.has_more = rows.has_more;
    out.now_ms = now;
    return out;
  });
}

// --- webhook endpoints ----------------------------------------------------------------------------
namespace {

// A row of the endpoint columns (reads_sql.cc: webhook_endpoint); nullopt when its status no longer
// parses (the table's CHECK keeps that from happening).
std::optional<webhooks::Endpoint> endpoint_of(const ReadRow& r) {
  const auto status = webhooks::parse_endpoint_status(r.text(5));
  if (!status) return std::nullopt;
  return webhooks::Endpoint{r.text(0),          r.text(1),          webhooks::split_event_types(r.text(2)),
                            r.optional_text(3), r.text(4),          *status,
                            r.text(6),          r.optional_text(7), r.optional_int64(8),
                            r.int64(9),         r.int64(10),        r.int64(11),
                            r.int64(12),        r.optional_int64(13)};
}

// A row of the delivery columns (reads_sql.cc: webhook_delivery); nullopt when its status no longer
// parses (the table's CHECK keeps that from happening).
std::optional<webhooks::Delivery> delivery_of(const ReadRow& r) {
  const auto status = webhooks::parse_delivery_status(r.text(5));
  if (!status) return std::nullopt;
  return webhooks::Delivery{r.text(0),  r.int64(1), r.text(2),           r.text(3), r.int64(4),
                            *status,    r.int64(6), r.int64(7),          r.optional_int64(8),
                            r.text(9),  r.optional_int64(10), r.int64(11)};
}

// The event id of a delivery's webhook-id ("evt_<event_id>"), or nullopt.
std::optional<std::int64_t> event_of_webhook_id(std::string_view id) {
  constexpr std::string_view kPrefix = "evt_";
  if (!id.starts_with(kPrefix)) return std::nullopt;
  return parse_int(id.substr(kPrefix.size()), 1, std::numeric_limits<std::int64_t>::max());
}

Error corrupt_delivery() {
  return Error::make(Code::internal, "a webhook delivery row has a status that is not pending, delivered or failed");
}

Error corrupt_endpoint() {
  return Error::make(Code::internal, "a webhook endpoint row has a status that is neither enabled nor disabled");
}

}  // namespace

Result<webhooks::Endpoint> WebhookReads::get_endpoint(std::string_view endpoint_id) {
  const ReadSql& sql = source_.sql();
  return read<webhooks::Endpoint>(source_, [&](ReadConn& db, std::int64_t now) -> Result<webhooks::Endpoint> {
    auto row = first_of(db, sql.webhook_endpoint, {endpoint_id}, endpoint_of);
    if (!row) return Error::make(Code::not_found, "webhook endpoint " + std::string(endpoint_id) + " does not exist");
    if (!*row) return corrupt_endpoint();
    return webhooks::endpoint_view(std::move(**row), now);
  });
}

Result<Page<webhooks::Endpoint>> WebhookReads::list_endpoints(const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  using Answer = Page<webhooks::Endpoint>;
  return read<Answer>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Answer> {
    std::int64_t cursor_created = std::numeric_limits<std::int64_t>::min();
    std::string cursor_id;
    if (page.starting_after) {
      const auto cursor = first_of(db, sql.webhook_endpoint, {*page.starting_after}, endpoint_of);
      if (!cursor || !*cursor) return unknown_cursor("webhook endpoint", *page.starting_after);
      cursor_created = (*cursor)->created_at_ms;
      cursor_id = *page.starting_after;
    }
    std::vector<webhooks::Endpoint> rows;
    bool corrupt = false;
    db.each(sql.webhook_endpoints, {cursor_created, cursor_id, page.limit + 1}, [&](const ReadRow& r) {
      auto e = endpoint_of(r);
      if (e) rows.push_back(webhooks::endpoint_view(std::move(*e), now));
      corrupt |= !e.has_value();
    });
    if (corrupt) return corrupt_endpoint();
    return page_of(std::move(rows), page);
  });
}

Result<Page<webhooks::Delivery>> WebhookReads::list_deliveries(std::string_view endpoint_id,
                                                               std::optional<webhooks::DeliveryStatus> status,
                                                               const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const ReadSql& sql = source_.sql();
  using Answer = Page<webhooks::Delivery>;
  return read<Answer>(source_, [&](ReadConn& db, std::int64_t) -> Result<Answer> {
    if (!first_of(db, sql.webhook_endpoint, {endpoint_id}, [](const ReadRow&) { return true; })) {
      return Error::make(Code::not_found, "webhook endpoint " + std::string(endpoint_id) + " does not exist");
    }
    std::int64_t before = std::numeric_limits<std::int64_t>::max();
    if (page.starting_after) {
      const auto event_id = event_of_webhook_id(*page.starting_after);
      const bool known = event_id && first_of(db, sql.webhook_delivery, {endpoint_id, *event_id},
                                              [](const ReadRow&) { return true; });
      if (!known) return unknown_cursor("webhook delivery", *page.starting_after);
      before = *event_id;
    }
    std::vector<webhooks::Delivery> rows;
    bool corrupt = false;
    const auto on_row = [&](const ReadRow& r) {
      auto d = delivery_of(r);
      if (d) rows.push_back(std::move(*d));
      corrupt |= !d.has_value();
    };
    if (status) {
      db.each(sql.webhook_deliveries_in_status,
              {endpoint_id, webhooks::delivery_status_name(*status), before, page.limit + 1}, on_row);
    } else {
      db.each(sql.webhook_deliveries, {endpoint_id, before, page.limit + 1}, on_row);
    }
    if (corrupt) return corrupt_delivery();
    return page_of(std::move(rows), page);
  });
}

Result<std::vector<webhooks::Delivery>> WebhookReads::due_deliveries(std::int64_t limit) {
  TG_ASSERT(limit >= 1);
  const ReadSql& sql = source_.sql();
  using Answer = std::vector<webhooks::Delivery>;
  return read<Answer>(source_, [&](ReadConn& db, std::int64_t now) -> Result<Answer> {
    Answer rows;
    bool corrupt = false;
    db.each(sql.webhook_deliveries_due, {now, limit}, [&](const ReadRow& r) {
      auto d = delivery_of(r);
      if (d) rows.push_back(std::move(*d));
      corrupt |= !d.has_value();
    });
    if (corrupt) return corrupt_delivery();
    return rows;
  });
}

Result<std::optional<std::int64_t>> WebhookReads::oldest_pending_event_at(std::string_view endpoint_id) {
  const ReadSql& sql = source_.sql();
  using Answer = std::optional<std::int64_t>;
  return read<Answer>(source_, [&](ReadConn& db, std::int64_t) -> Result<Answer> {
    return first_of(db, sql.webhook_oldest_pending, {endpoint_id}, [](const ReadRow& r) { return r.int64(0); });
  });
}

// --- payments -------------------------------------------------------------------------------------
namespace {

std::optional<payments::Payment> payment_of(const ReadRow& r) {
  const auto provider = payments::parse_provider(r.text(1));
  if (!provider) return std::nullopt;
  return payments::Payment{r.text(0), *provider, r.optional_text(2), r.text(3), r.int64(4), r.int64(5), r.int64(6),
                           r.int64(7), r.int64(8)};
}

Result<payments::Payment> found_payment(std::optional<std::optional<payments::Payment>> row, std::string what) {
  if (!row) return Error::make(Code::not_found, std::move(what) + " does not exist");
  if (!*row) return Error::make(Code::internal, "a payment row names an unknown provider");
  return std::move(**row);
}

}  // namespace

Result<payments::Payment> PaymentReads::get_payment(std::string_view payment_id) {
  const ReadSql& sql = source_.sql();
  return read<payments::Payment>(source_, [&](ReadConn& db, std::int64_t) {
    return found_payment(first_of(db, sql.payment, {payment_id}, payment_of), "payment " + std::string(payment_id));
  });
}

Result<payments::Payment> PaymentReads::find_payment(payments::Provider provider, std::string_view provider_payment) {
  const ReadSql& sql = source_.sql();
  return read<payments::Payment>(source_, [&](ReadConn& db, std::int64_t) {
    return found_payment(
        first_of(db, sql.payment_by_provider, {payments::provider_name(provider), provider_payment}, payment_of),
        std::string(payments::provider_name(provider)) + " payment " + std::string(provider_payment));
  });
}

}  // namespace tollgate::reads

// --- prices ---------------------------------------------------------------------------------------
namespace tollgate::reads {
namespace {

prices::Price price_of(const ReadRow& r) { return prices::Price{r.text(0), r.int64(1), r.int64(2), r.int64(3)}; }

}  // namespace

Result<prices::Price> PriceReads::get_price(std::string_view feature) {
  if (auto s = check_id(feature, "feature"); !s) return s.error();
  const ReadSql& sql = source_.sql();
  return read<prices::Price>(source_, [&](ReadConn& db, std::int64_t) -> Result<prices::Price> {
    auto found = first_of(db, sql.price, {feature}, price_of);
    if (!found) return Error::make(Code::not_found, "feature " + std::string(feature) + " has no price");
    return std::move(*found);
  });
}

Result<Page<prices::Price>> PriceReads::list_prices(const PageRequest& page) {
  if (auto s = validate_page(page); !s) return s.error();
  const ReadSql& sql = source_.sql();
  return read<Page<prices::Price>>(source_, [&](ReadConn& db, std::int64_t) -> Result<Page<prices::Price>> {
    if (page.starting_after && !first_of(db, sql.price, {*page.starting_after}, price_of)) {
      return unknown_cursor("feature", *page.starting_after);
    }
    return page_of(rows_of(db, sql.prices_after, {page.starting_after.value_or(""), page.limit + 1}, price_of), page);
  });
}

Result<Page<prices::Price>> PriceReads::list_versions(std::string_view feature, const PageRequest& page) {
  if (auto s = check_id(feature, "feature"); !s) return s.error();
  if (auto s = validate_page(page); !s) return s.error();
  std::int64_t before = limits::kAmountMax;
  if (page.starting_after) {
    const auto version = parse_int(*page.starting_after, 1, limits::kAmountMax);
    if (!version) return invalid("starting_after must be a version number of the feature's price");
    before = *version;
  }
  const ReadSql& sql = source_.sql();
  return read<Page<prices::Price>>(source_, [&](ReadConn& db, std::int64_t) -> Result<Page<prices::Price>> {
    const auto current = first_of(db, sql.price, {feature}, price_of);
    if (!current) return Error::make(Code::not_found, "feature " + std::string(feature) + " has no price");
    if (page.starting_after && before > current->version) return unknown_cursor("version", *page.starting_after);
    return page_of(rows_of(db, sql.price_versions, {feature, before, page.limit + 1}, price_of), page);
  });
}

Result<std::map<std::int64_t, prices::PricedHold>> PriceReads::priced_holds(std::span<const std::int64_t> hold_seqs) {
  using Answer = std::map<std::int64_t, prices::PricedHold>;
  TG_ASSERT(static_cast<std::int64_t>(hold_seqs.size()) <= limits::kListPageMax);
  if (hold_seqs.empty()) return Answer{};
  std::string seqs;
  for (std::int64_t seq : hold_seqs) seqs += (seqs.empty() ? "" : ",") + std::to_string(seq);
  const ReadSql& sql = source_.sql();
  return read<Answer>(source_, [&](ReadConn& db, std::int64_t) -> Result<Answer> {
    Answer out;
    db.each(sql.priced_holds, {seqs}, [&](const ReadRow& r) {
      out.emplace(r.int64(0), prices::PricedHold{r.text(1), r.text(2), r.text(3), r.text(4), r.int64(5), r.int64(6),
                                                 r.int64(7)});
    });
    return out;
  });
}

}  // namespace tollgate::reads
