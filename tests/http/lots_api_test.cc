// Credit lots over HTTP, case by case (api.md "Credit lots"): a real tollgate process (SQLite, or
// PostgreSQL in the HttpSuitesOnPostgres run) whose reaper does not run during the tests (its
// interval is an hour), so every expiry seen here is the one reads show at once and the next write
// makes: a hold whose lot expires under it, then committed, released or expired; refunds into an
// expired lot, last-charged first; debt paid by the next credit before it makes a lot; the spending
// order (priority, then the soonest expiry, lots without one last, then the oldest); bad input
// refused by name with nothing changed; GET .../lots' parameters, paging and status filter; who may
// list an account's lots. (The random sequences against a model: lots_property_test.cc; kill -9
// around an expiry: lots_crash_test.cc; the upgrade: lots_migration_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "http/http_test_support.h"
#include "http/lots_test_support.h"

namespace tollgate::httptest::lotsapi {
namespace {

using namespace lotstest;

// How far ahead a lot that must expire during a test expires: long enough that the requests before
// it are made first on a loaded machine (the test fails, saying so, if they were not).
constexpr std::int64_t kSoonMs = 1500;
constexpr std::int64_t kHourMs = 3'600'000;

class HttpLots : public ServerSuite<HttpLots> {
 public:
  static void configure(ServerOptions& options) {
    options.env.emplace_back("TOLLGATE_REAPER_INTERVAL_MS", "3600000");  // runs once, at the start
  }

 protected:
  std::string new_account(std::int64_t overdraft_limit = 0) {
    const std::string id = unique("lots");
    const HttpResponse r = admin().post("/v1/accounts", json::object{{"account_id", id}, {"overdraft_limit", overdraft_limit}});
    EXPECT_EQ(r.status, 201u) << r;
    return id;
  }
  // A credit with the lot fields in `lot` (expires_at, priority, category); the answer.
  HttpResponse credit(const std::string& account, std::int64_t amount, json::object lot = {}) {
    lot["amount"] = amount;
    if (!lot.contains("reference")) lot["reference"] = unique("credit");
    return admin().post("/v1/accounts/" + account + "/credits", lot);
  }
  // A credit that must make a lot; its lot_id.
  std::string lot(const std::string& account, std::int64_t amount, json::object fields = {}) {
    const HttpResponse r = credit(account, amount, std::move(fields));
    EXPECT_EQ(r.status, 201u) << r;
    const json::value* id = r.status == 201 ? r.object().at("event").as_object().if_contains("lot_id") : nullptr;
    EXPECT_TRUE(id && id->is_string()) << "the credited event names no lot: " << r;
    return id && id->is_string() ? std::string(id->as_string()) : std::string();
  }
  std::vector<LotView> lots_of(const std::string& account, const std::string& status = "") {
    return all_lots(admin(), account, status).value_or(std::vector<LotView>{});
  }
  LotView lot_named(const std::string& account, const std::string& lot_id) {
    for (const LotView& l : lots_of(account)) {
      if (l.lot_id == lot_id) return l;
    }
    ADD_FAILURE() << lot_id << " is not among " << account << "'s lots";
    return {};
  }
  AccountView balances(const std::string& account) { return account_view(get_account(account)); }
  HttpResponse hold_call(const std::string& hold_id, const std::string& action, json::object body = {}) {
    return admin().post("/v1/holds/" + hold_id + "/" + action, body);
  }
  // The amounts of the account's lot_expired events for `lot_id`.
  std::vector<std::int64_t> lot_expired_events(const std::string& account, const std::string& lot_id) {
    std::vector<std::int64_t> out;
    for (const json::object& e : account_events(admin(), account, "lot_expired")) {
      const json::value* id = e.if_contains("lot_id");
      if (id && id->is_string() && id->as_string() == lot_id) out.push_back(jint(e, "amount"));
    }
    return out;
  }
};

// A lot's figures, for comparing: amount, available, reserved, used, expired, status.
struct Figures {
  std::int64_t amount, available, reserved, used, expired;
  std::string status;
  bool operator==(const Figures&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Figures& f) {
  return out << "{amount=" << f.amount << " available=" << f.available << " reserved=" << f.reserved
             << " used=" << f.used << " expired=" << f.expired << " " << f.status << "}";
}
Figures figures(const LotView& l) { return {l.amount, l.available, l.reserved, l.used, l.expired, l.status}; }

// --- expiry under a hold --------------------------------------------------------------------------

TEST_F(HttpLots, AHoldWhoseLotExpiresWhileActiveEndsInUsedExpiredAndExpired) {
  // Four accounts, each a lot of 10 that expires soon and a hold of 4 on it: the first is committed
  // whole, the second in part (3), the third released, the fourth left to expire after its lot.
  const std::int64_t expires_at = wall_ms() + kSoonMs;
  std::vector<std::string> accounts, lots, holds;
  std::int64_t hold_expires_at = 0;
  for (int i = 0; i < 4; ++i) {
    accounts.push_back(new_account());
    lots.push_back(lot(accounts[i], 10, {{"expires_at", rfc3339(expires_at)}}));
    const json::object h = make_hold(accounts[i], 4, {{"ttl_ms", i == 3 ? 2 * kSoonMs : kHourMs}});
    holds.push_back(jstr(h, "hold_id"));
    if (i == 3) hold_expires_at = parse_rfc3339_ms(jstr(h, "expires_at")).value_or(0);
  }
  ASSERT_LT(wall_ms(), expires_at) << "the lots expired before the holds were made: the machine is too slow for this test";
  ASSERT_GT(hold_expires_at, expires_at);
  sleep_until_wall_ms(expires_at + 50);

  // Expired: what was available moved to expired; the reserved credits stay the hold's.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(figures(lot_named(accounts[i], lots[i])), (Figures{10, 0, 4, 0, 6, "expired"})) << accounts[i];
    EXPECT_EQ(balances(accounts[i]), (AccountView{0, 4, 0, 6, 10}));
  }
  ASSERT_EQ(hold_call(holds[0], "commit").status, 200u);
  ASSERT_EQ(hold_call(holds[1], "commit", {{"amount", 3}}).status, 200u);
  ASSERT_EQ(hold_call(holds[2], "release").status, 200u);
  EXPECT_EQ(figures(lot_named(accounts[0], lots[0])), (Figures{10, 0, 0, 4, 6, "expired"}));
  EXPECT_EQ(figures(lot_named(accounts[1], lots[1])), (Figures{10, 0, 0, 3, 7, "expired"}));  // the rest: expired
  EXPECT_EQ(figures(lot_named(accounts[2], lots[2])), (Figures{10, 0, 0, 0, 10, "expired"}));
  EXPECT_EQ(balances(accounts[0]), (AccountView{0, 0, 4, 6, 10}));
  EXPECT_EQ(balances(accounts[1]), (AccountView{0, 0, 3, 7, 10}));
  EXPECT_EQ(balances(accounts[2]), (AccountView{0, 0, 0, 10, 10}));

  sleep_until_wall_ms(hold_expires_at + 50);
  EXPECT_EQ(jstr(admin().get("/v1/holds/" + holds[3]).object(), "status"), "expired");
  EXPECT_EQ(figures(lot_named(accounts[3], lots[3])), (Figures{10, 0, 0, 0, 10, "expired"}));
  EXPECT_EQ(balances(accounts[3]), (AccountView{0, 0, 0, 10, 10}));
  // A write on the fourth account (a credit) writes what is due; then each lot's expiry is one
  // lot_expired event of the 6 that were available, never two.
  lot(accounts[3], 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(lot_expired_events(accounts[i], lots[i]), std::vector<std::int64_t>{6}) << accounts[i];
  for (const std::string& a : accounts) EXPECT_TRUE(audit_clean(admin(), a));
}

TEST_F(HttpLots, AnOverdueHoldsCreditsAreBackInItsLotsForReadersBeforeTheReaperRuns) {
  // The account's figures are its lots' plus what came from no lot: when reads show an overdue hold
  // as expired and its credits as available (api.md, holds), its lots must show them back too.
  const std::string account = new_account();
  const std::string first = lot(account, 3, {{"priority", 1}});
  const std::string second = lot(account, 10);
  const json::object h = make_hold(account, 10, {{"ttl_ms", 300}});  // 3 + 7
  EXPECT_EQ(hold_draws(h), (Draws{{first, 3}, {second, 7}}));
  EXPECT_EQ(balances(account), (AccountView{3, 10, 0, 0, 13}));
  sleep_until_wall_ms(parse_rfc3339_ms(jstr(h, "expires_at")).value_or(0) + 50);
  EXPECT_EQ(jstr(admin().get("/v1/holds/" + jstr(h, "hold_id")).object(), "status"), "expired");
  EXPECT_EQ(balances(account), (AccountView{13, 0, 0, 0, 13}));
  EXPECT_EQ(figures(lot_named(account, first)), (Figures{3, 3, 0, 0, 0, "active"}));
  EXPECT_EQ(figures(lot_named(account, second)), (Figures{10, 10, 0, 0, 0, "active"}));
  // A hold now draws from the lots as they are: the first lot first.
  const json::object next = make_hold(account, 4);
  EXPECT_EQ(hold_draws(next), (Draws{{first, 3}, {second, 1}}));
  EXPECT_EQ(figures(lot_named(account, first)), (Figures{3, 0, 3, 0, 0, "active"}));
  EXPECT_EQ(figures(lot_named(account, second)), (Figures{10, 9, 1, 0, 0, "active"}));
  EXPECT_EQ(balances(account), (AccountView{9, 4, 0, 0, 13}));
  EXPECT_TRUE(audit_clean(admin(), account));
}

TEST_F(HttpLots, ACreditAfterAnOverdraftHoldRanOutIsALotOfAllOfIt) {
  // 8 reserved: 3 from the lot, 5 from the overdraft. The hold runs out: nothing was spent, there is
  // no debt, and the next credit is a lot of all of it — as it is once the reaper has written the
  // expiry (its interval here is an hour: the credit is the first write to meet the hold).
  const std::string account = new_account(5);
  const std::string paid = lot(account, 3);
  const json::object h = make_hold(account, 8, {{"ttl_ms", 300}});
  EXPECT_EQ(hold_draws(h), (Draws{{paid, 3}}));
  EXPECT_EQ(balances(account), (AccountView{-5, 8, 0, 0, 3}));
  sleep_until_wall_ms(parse_rfc3339_ms(jstr(h, "expires_at")).value_or(0) + 50);
  EXPECT_EQ(balances(account), (AccountView{3, 0, 0, 0, 3}));
  const HttpResponse c = credit(account, 4);
  ASSERT_EQ(c.status, 201u) << c;
  const json::value* lot_id = c.object().at("event").as_object().if_contains("lot_id");
  EXPECT_TRUE(lot_id && lot_id->is_string()) << "the credit paid a debt that an overdue hold's reservation is not: " << c;
  EXPECT_EQ(balances(account), (AccountView{7, 0, 0, 0, 7}));
  std::vector<Figures> listed;
  for (const LotView& l : lots_of(account)) listed.push_back(figures(l));
  EXPECT_EQ(listed, (std::vector<Figures>{{3, 3, 0, 0, 0, "active"}, {4, 4, 0, 0, 0, "active"}}));
  EXPECT_TRUE(audit_clean(admin(), account));
}

TEST_F(HttpLots, ARefundGoesBackLastChargedFirstAndIntoExpiredOnceTheLotExpired) {
  const std::string account = new_account();
  const std::int64_t expires_at = wall_ms() + kSoonMs;
  const std::string first = lot(account, 6, {{"priority", 10}, {"expires_at", rfc3339(expires_at)}});
  const std::string second = lot(account, 10, {{"priority", 20}});
  const std::string hold = jstr(make_hold(account, 12), "hold_id");  // 6 from the first, 6 from the second
  ASSERT_EQ(hold_call(hold, "commit", {{"amount", 9}}).status, 200u);  // 6 used of the first, 3 of the second
  ASSERT_LT(wall_ms(), expires_at) << "the lot expired before it was charged: the machine is too slow for this test";
  EXPECT_EQ(figures(lot_named(account, first)), (Figures{6, 0, 0, 6, 0, "spent"}))
      << "nothing available or reserved, and not yet expired: spent";
  EXPECT_EQ(figures(lot_named(account, second)), (Figures{10, 7, 0, 3, 0, "active"}));

  // 2 back: to the last charged lot, the second.
  ASSERT_EQ(hold_call(hold, "refund", {{"amount", 2}, {"reason", "r"}, {"request_id", unique("rf")}}).status, 200u);
  EXPECT_EQ(figures(lot_named(account, second)), (Figures{10, 9, 0, 1, 0, "active"}));

  sleep_until_wall_ms(expires_at + 50);
  EXPECT_EQ(figures(lot_named(account, first)), (Figures{6, 0, 0, 6, 0, "expired"}));
  // 4 more: the second's last 1 to its available, then 3 to the first, which has expired: expired.
  ASSERT_EQ(hold_call(hold, "refund", {{"amount", 4}, {"reason", "r"}, {"request_id", unique("rf")}}).status, 200u);
  EXPECT_EQ(figures(lot_named(account, second)), (Figures{10, 10, 0, 0, 0, "active"}));
  EXPECT_EQ(figures(lot_named(account, first)), (Figures{6, 0, 0, 3, 3, "expired"}));
  EXPECT_EQ(balances(account), (AccountView{10, 0, 3, 3, 16}));
  EXPECT_TRUE(audit_clean(admin(), account));
}

TEST_F(HttpLots, ASpentLotIsSpentAndAnExpiredOneIsExpiredWhateverItsFigures) {
  const std::string account = new_account();
  const std::string spent = lot(account, 3, {{"priority", 0}});
  const std::string hold = jstr(make_hold(account, 3), "hold_id");
  ASSERT_EQ(hold_call(hold, "commit").status, 200u);
  EXPECT_EQ(figures(lot_named(account, spent)), (Figures{3, 0, 0, 3, 0, "spent"}));
  const std::int64_t expires_at = wall_ms() + kSoonMs;
  const std::string expiring = lot(account, 5, {{"expires_at", rfc3339(expires_at)}});
  EXPECT_EQ(figures(lot_named(account, expiring)), (Figures{5, 5, 0, 0, 0, "active"}));
  sleep_until_wall_ms(expires_at + 50);
  EXPECT_EQ(figures(lot_named(account, expiring)), (Figures{5, 0, 0, 0, 5, "expired"}));
  EXPECT_EQ(balances(account), (AccountView{0, 0, 3, 5, 8}));
  // Nothing is left to spend: the expired credits are not available to a hold.
  EXPECT_TRUE(is_problem(admin().post("/v1/holds", json::object{{"account_id", account}, {"amount", 1}, {"request_id", unique("r")}}),
                         409, "insufficient_credits"));
  lot(account, 1);  // a write on the account writes the expiry that is due
  EXPECT_EQ(lot_expired_events(account, expiring), std::vector<std::int64_t>{5});
}

// --- debt -----------------------------------------------------------------------------------------

TEST_F(HttpLots, ACreditPaysTheDebtFirstAndOnlyTheRestBecomesALot) {
  const std::string account = new_account(10);
  const std::string paid = lot(account, 5);
  // 12 reserved: 5 from the lot, 7 from no lot (the overdraft); the hold lists only the lot.
  const json::object h = make_hold(account, 12);
  EXPECT_EQ(hold_draws(h), (Draws{{paid, 5}})) << "only the lot is listed: " << json::serialize(h);
  EXPECT_EQ(balances(account), (AccountView{-7, 12, 0, 0, 5}));
  ASSERT_EQ(hold_call(jstr(h, "hold_id"), "commit").status, 200u);
  EXPECT_EQ(balances(account), (AccountView{-7, 0, 12, 0, 5}));
  EXPECT_EQ(figures(lot_named(account, paid)), (Figures{5, 0, 0, 5, 0, "spent"}));

  // 4 only pays debt: no lot, and the event names none.
  const HttpResponse only_debt = credit(account, 4);
  ASSERT_EQ(only_debt.status, 201u) << only_debt;
  EXPECT_FALSE(only_debt.object().at("event").as_object().contains("lot_id")) << only_debt;
  EXPECT_EQ(lots_of(account).size(), 1u);
  EXPECT_EQ(balances(account), (AccountView{-3, 0, 12, 0, 9}));
  // 10 pays the last 3; the new lot holds the 7 left.
  const std::string rest = lot(account, 10, {{"category", "promotional"}, {"priority", 5}});
  EXPECT_EQ(figures(lot_named(account, rest)), (Figures{7, 7, 0, 0, 0, "active"}));
  EXPECT_EQ(lot_named(account, rest).category, "promotional");
  EXPECT_EQ(balances(account), (AccountView{7, 0, 12, 0, 19}));
  // No debt left: the next credit is a lot of all of it.
  const std::string whole = lot(account, 2);
  EXPECT_EQ(figures(lot_named(account, whole)), (Figures{2, 2, 0, 0, 0, "active"}));
  EXPECT_EQ(balances(account), (AccountView{9, 0, 12, 0, 21}));
  EXPECT_TRUE(audit_clean(admin(), account));
}

// --- the spending order ---------------------------------------------------------------------------

TEST_F(HttpLots, APromotionalPriority10LotIsSpentBeforeAPaidOne) {
  const std::string account = new_account();
  const std::string paid = lot(account, 10);  // older, priority 50 by default
  const std::string promo = lot(account, 5, {{"category", "promotional"}, {"priority", 10}});
  const std::vector<LotView> listed = lots_of(account);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].lot_id, promo);
  EXPECT_EQ(listed[0].category, "promotional");
  EXPECT_EQ(listed[0].priority, 10);
  EXPECT_EQ(listed[1].lot_id, paid);
  EXPECT_EQ(listed[1].category, "paid");
  EXPECT_EQ(listed[1].priority, 50);
  EXPECT_FALSE(listed[1].expires_at_ms.has_value());

  const json::object h = make_hold(account, 7);
  EXPECT_EQ(hold_draws(h), (Draws{{promo, 5}, {paid, 2}}));
  EXPECT_EQ(figures(lot_named(account, promo)), (Figures{5, 0, 5, 0, 0, "active"}));
  EXPECT_EQ(figures(lot_named(account, paid)), (Figures{10, 8, 2, 0, 0, "active"}));
  // Commit 6: the first-drawn lot is used first; the one left goes back to the paid lot.
  ASSERT_EQ(hold_call(jstr(h, "hold_id"), "commit", {{"amount", 6}}).status, 200u);
  EXPECT_EQ(figures(lot_named(account, promo)), (Figures{5, 0, 0, 5, 0, "spent"}));
  EXPECT_EQ(figures(lot_named(account, paid)), (Figures{10, 9, 0, 1, 0, "active"}));
}

TEST_F(HttpLots, AtEqualPriorityTheSoonestExpiryIsSpentFirstAndLotsWithoutOneLast) {
  const std::string account = new_account();
  const std::int64_t now = wall_ms();
  const std::string never = lot(account, 1);                                            // oldest, no expiry
  const std::string late = lot(account, 1, {{"expires_at", rfc3339(now + 2 * kHourMs)}});
  const std::string soon = lot(account, 1, {{"expires_at", rfc3339(now + kHourMs)}});
  const std::string never2 = lot(account, 1);                                           // no expiry, newer
  const std::string soon2 = lot(account, 1, {{"expires_at", rfc3339(now + kHourMs)}});  // same expiry, newer
  const std::string first = lot(account, 1, {{"priority", 49}});                         // priority beats expiry
  const std::string last = lot(account, 1, {{"priority", 51}, {"expires_at", rfc3339(now + kHourMs / 2)}});
  const std::vector<std::string> order{first, soon, soon2, late, never, never2, last};
  std::vector<std::string> listed;
  for (const LotView& l : lots_of(account)) listed.push_back(l.lot_id);
  EXPECT_EQ(listed, order);
  // Holds of 1 take them in that order; so does a debit.
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    const json::object h = make_hold(account, 1);
    EXPECT_EQ(hold_draws(h), (Draws{{order[i], 1}})) << "hold " << i;
  }
  const HttpResponse debit = admin().post("/v1/accounts/" + account + "/debits",
                                          json::object{{"amount", 1}, {"reference", unique("debit")}, {"reason", "r"}});
  ASSERT_EQ(debit.status, 201u) << debit;
  EXPECT_EQ(figures(lot_named(account, last)), (Figures{0, 0, 0, 0, 0, "spent"})) << "a debit lowers the lot's amount";
  EXPECT_EQ(balances(account), (AccountView{0, 6, 0, 0, 6}));
  EXPECT_TRUE(audit_clean(admin(), account));
}

// --- bad input ------------------------------------------------------------------------------------

TEST_F(HttpLots, BadLotFieldsAreRefusedByNameAndChangeNothing) {
  const std::string account = new_account();
  lot(account, 10, {{"priority", 20}});
  const json::object before = account_state(account);
  const std::vector<LotView> lots_before = lots_of(account);
  const std::string reference = unique("credit");
  struct Case {
    json::object body;
    std::string names;
  };
  const std::vector<Case> cases{
      {{{"expires_at", rfc3339(wall_ms() - 60'000)}}, "expires_at"},
      {{{"expires_at", "2020-01-01T00:00:00Z"}}, "expires_at"},
      {{{"expires_at", "tomorrow"}}, "expires_at"},
      {{{"expires_at", 1893456000000}}, "expires_at"},
      {{{"priority", -1}}, "priority"},
      {{{"priority", 101}}, "priority"},
      {{{"priority", 2.5}}, "priority"},
      {{{"priority", "10"}}, "priority"},
      {{{"category", "gift"}}, "category"},
      {{{"category", ""}}, "category"},
      {{{"amount", 0}}, "amount"},
  };
  for (const Case& c : cases) {
    json::object body{{"amount", 5}, {"reference", reference}};
    for (const auto& [key, value] : c.body) body[key] = value;
    const HttpResponse r = admin().post("/v1/accounts/" + account + "/credits", body);
    EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << json::serialize(body);
    EXPECT_NE(r.body.find(c.names), std::string::npos) << json::serialize(body) << " → " << r;
  }
  EXPECT_EQ(account_state(account), before);
  EXPECT_EQ(lots_of(account), lots_before);
  // The reference of the refused credits was never taken: it credits now.
  EXPECT_EQ(credit(account, 5, {{"reference", reference}, {"priority", 0}, {"category", "paid"}}).status, 201u);
  EXPECT_EQ(lots_of(account).size(), lots_before.size() + 1);
}

TEST_F(HttpLots, AReplayAnswersTheFirstCreditWhateverLotFieldsItCarries) {
  const std::string account = new_account();
  const std::string reference = unique("credit");
  const HttpResponse first = credit(account, 5, {{"reference", reference}, {"priority", 30}});
  ASSERT_EQ(first.status, 201u) << first;
  const std::string lot_id = jstr(first.object().at("event").as_object(), "lot_id");
  const std::vector<LotView> lots_before = lots_of(account);
  const HttpResponse again = credit(account, 5,
                                    {{"reference", reference}, {"priority", 90}, {"category", "promotional"},
                                     {"expires_at", rfc3339(wall_ms() + kHourMs)}});
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(jstr(again.object().at("event").as_object(), "lot_id"), lot_id);
  EXPECT_EQ(lots_of(account), lots_before);
  EXPECT_EQ(balances(account), (AccountView{5, 0, 0, 0, 5}));
  // The credited event carries the lot's id.
  const auto credited = account_events(admin(), account, "credited");
  ASSERT_EQ(credited.size(), 1u);
  EXPECT_EQ(jstr(credited[0], "lot_id"), lot_id);
}

TEST_F(HttpLots, ListingLotsRefusesUnknownAccountsAndBadParametersByName) {
  const std::string account = new_account();
  lot(account, 3);
  const std::string other = new_account();
  const std::string others_lot = lot(other, 3);
  EXPECT_TRUE(is_problem(admin().get("/v1/accounts/" + unique("missing") + "/lots"), 404, "not_found"));
  struct Case {
    std::string query;
    std::string names;
  };
  const std::vector<Case> cases{
      {"status=used", "status"},         {"status=", "status"},          {"status=ACTIVE", "status"},
      {"limit=0", "limit"},              {"limit=1001", "limit"},        {"limit=-1", "limit"},
      {"limit=ten", "limit"},            {"limit=1.5", "limit"},         {"starting_after=nope", "starting_after"},
      {"starting_after=lot_999999999", "starting_after"}, {"starting_after=" + others_lot, "starting_after"},
      {"starting_after=", "starting_after"},
  };
  const json::object before = account_state(account);
  for (const Case& c : cases) {
    const HttpResponse r = admin().get("/v1/accounts/" + account + "/lots?" + c.query);
    EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << c.query;
    EXPECT_NE(r.body.find(c.names), std::string::npos) << c.query << " → " << r;
  }
  EXPECT_EQ(account_state(account), before);
  for (const char* good : {"status=active", "status=expired", "status=spent", "limit=1", "limit=1000"}) {
    EXPECT_EQ(admin().get("/v1/accounts/" + account + "/lots?" + good).status, 200u) << good;
  }
}

// --- listing --------------------------------------------------------------------------------------

TEST_F(HttpLots, PagingWithLimit1WalksEveryLotOnceInSpendingOrder) {
  const std::string account = new_account();
  const std::int64_t now = wall_ms();
  const std::int64_t priorities[] = {50, 10, 90, 10, 50, 0, 100, 50};
  std::vector<std::string> made;  // in creation order
  for (int i = 0; i < 8; ++i) {
    json::object fields{{"priority", priorities[i]}};
    if (i % 3 == 0) fields["expires_at"] = rfc3339(now + kHourMs + i * 1000);
    made.push_back(lot(account, i + 1, fields));
  }
  const std::vector<LotView> all = lots_of(account);
  ASSERT_EQ(all.size(), 8u);
  // The order, stated once more from the lots' own fields and the order they were made in.
  const auto key = [&](const LotView& l) {
    return std::tuple(l.priority, l.expires_at_ms.value_or(std::numeric_limits<std::int64_t>::max()),
                      std::find(made.begin(), made.end(), l.lot_id) - made.begin());
  };
  for (std::size_t i = 1; i < all.size(); ++i) {
    EXPECT_LT(key(all[i - 1]), key(all[i])) << all[i - 1] << " is listed before " << all[i];
  }
  std::vector<LotView> walked;
  std::string after;
  for (int page = 0; page < 20; ++page) {
    const HttpResponse r = admin().get("/v1/accounts/" + account + "/lots?limit=1" + (after.empty() ? "" : "&starting_after=" + after));
    ASSERT_EQ(r.status, 200u) << r;
    const json::array& lots = r.object().at("lots").as_array();
    ASSERT_EQ(lots.size(), 1u) << r;
    walked.push_back(lot_view(lots[0].as_object()));
    after = walked.back().lot_id;
    if (!r.object().at("has_more").as_bool()) break;
  }
  EXPECT_EQ(walked, all);
}

TEST_F(HttpLots, TheStatusFilterListsEachLotUnderItsStatusInSpendingOrder) {
  const std::string account = new_account();
  const std::int64_t expires_at = wall_ms() + kSoonMs;
  const std::string spent = lot(account, 2, {{"priority", 1}});
  const std::string expiring = lot(account, 3, {{"priority", 2}, {"expires_at", rfc3339(expires_at)}});
  const std::string held = lot(account, 4, {{"priority", 3}});
  const std::string fresh = lot(account, 5, {{"priority", 4}});
  const std::string fresh2 = lot(account, 6, {{"priority", 4}});
  const json::object whole = make_hold(account, 2);  // the first lot
  ASSERT_EQ(hold_call(jstr(whole, "hold_id"), "commit").status, 200u);
  const std::string expiring_hold = jstr(make_hold(account, 3), "hold_id");
  ASSERT_EQ(hold_call(expiring_hold, "commit").status, 200u);  // the expiring lot, spent before it expires
  make_hold(account, 4);                                        // the third lot, reserved: active
  ASSERT_LT(wall_ms(), expires_at) << "the lot expired too soon: the machine is too slow for this test";
  sleep_until_wall_ms(expires_at + 50);
  const auto ids = [&](const std::string& status) {
    std::vector<std::string> out;
    for (const LotView& l : lots_of(account, status)) {
      EXPECT_EQ(l.status, status) << l;
      out.push_back(l.lot_id);
    }
    return out;
  };
  EXPECT_EQ(ids("spent"), std::vector<std::string>{spent});
  EXPECT_EQ(ids("expired"), std::vector<std::string>{expiring}) << "expired, though nothing was left in it";
  EXPECT_EQ(ids("active"), (std::vector<std::string>{held, fresh, fresh2}));
  std::vector<std::string> all;
  for (const LotView& l : lots_of(account)) all.push_back(l.lot_id);
  EXPECT_EQ(all, (std::vector<std::string>{spent, expiring, held, fresh, fresh2}));
  // A page of a filtered list goes on after the given lot, within the filter.
  const HttpResponse page = admin().get("/v1/accounts/" + account + "/lots?status=active&limit=1&starting_after=" + held);
  ASSERT_EQ(page.status, 200u) << page;
  ASSERT_EQ(page.object().at("lots").as_array().size(), 1u) << page;
  EXPECT_EQ(jstr(page.object().at("lots").as_array()[0].as_object(), "lot_id"), fresh);
  EXPECT_TRUE(page.object().at("has_more").as_bool());
}

TEST_F(HttpLots, AnAccountKeyWithReadListsItsOwnLotsAndNoOtherAccounts) {
  const std::string account = new_account();
  const std::string mine = lot(account, 3);
  const std::string other = new_account();
  lot(other, 4);
  const HttpResponse key = admin().post("/v1/accounts/" + account + "/keys", json::object{{"scopes", json::array{"read"}}});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient reader(port(), jstr(key.object(), "secret"));
  const auto own = all_lots(reader, account);
  ASSERT_TRUE(own.has_value());
  ASSERT_EQ(own->size(), 1u);
  EXPECT_EQ((*own)[0].lot_id, mine);
  EXPECT_TRUE(is_problem(reader.get("/v1/accounts/" + other + "/lots"), 404, "not_found"));
  EXPECT_TRUE(is_problem(reader.get("/v1/accounts/" + unique("missing") + "/lots"), 404, "not_found"));
  // A key without `read` is refused, naming the scope.
  const HttpResponse writer_key =
      admin().post("/v1/accounts/" + account + "/keys", json::object{{"scopes", json::array{"holds:write"}}});
  ASSERT_EQ(writer_key.status, 201u) << writer_key;
  HttpClient writer(port(), jstr(writer_key.object(), "secret"));
  const HttpResponse refused = writer.get("/v1/accounts/" + account + "/lots");
  EXPECT_TRUE(is_problem(refused, 403, "forbidden"));
  EXPECT_NE(refused.body.find("read"), std::string::npos) << refused;
  HttpClient anonymous(port());
  EXPECT_TRUE(is_problem(anonymous.get("/v1/accounts/" + account + "/lots"), 401, "unauthorized"));
}

}  // namespace
}  // namespace tollgate::httptest::lotsapi
