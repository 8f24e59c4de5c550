// Lists and lookups over HTTP against the real server process (api.md: Conventions on lists and
// keys; Accounts and credits; Holds): GET /v1/accounts, /v1/holds (paged, by request_id), /v1/keys
// (never a secret), /v1/transfers/{reference}; bad limits and cursors answer 400 naming the
// parameter; an account key sees only its own account (404 otherwise, byte for byte like a
// missing resource) and admin lists answer it 403.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "http/auth.h"
#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

class HttpLists : public ServerSuite<HttpLists> {
 protected:
  // The ids of a list answer's items, and its has_more.
  static std::vector<std::string> ids(const HttpResponse& r, const char* items, const char* id) {
    std::vector<std::string> out;
    const auto* list = r.object().if_contains(items);
    if (!list || !list->is_array()) {
      ADD_FAILURE() << "no " << items << " in " << r;
      return out;
    }
    for (const auto& v : list->as_array()) out.push_back(jstr(v.as_object(), id));
    return out;
  }
  static bool has_more(const HttpResponse& r) {
    const auto* v = r.object().if_contains("has_more");
    EXPECT_TRUE(v && v->is_bool()) << r;
    return v && v->is_bool() && v->as_bool();
  }
  static bool detail_names(const HttpResponse& r, const std::string& what) {
    const auto* d = r.object().if_contains("detail");
    return d && d->is_string() && std::string(d->as_string()).find(what) != std::string::npos;
  }
  // A key of `account`: its secret.
  std::string account_key(const std::string& account) {
    const HttpResponse created = admin().post("/v1/accounts/" + account + "/keys", json::object{});
    EXPECT_EQ(created.status, 201u) << created;
    return jstr(created.object(), "secret");
  }
};

TEST_F(HttpLists, AccountsArePagedByIdWithStartingAfterAndHasMore) {
  const std::string base = unique("lst");
  std::vector<std::string> made;
  for (int i = 0; i <= 4; ++i) {
    made.push_back(base + "-" + std::to_string(i));
    ASSERT_EQ(admin().post("/v1/accounts", json::object{{"account_id", made.back()}}).status, 201u);
  }
  const HttpResponse first = admin().get("/v1/accounts?starting_after=" + made[0] + "&limit=2");
  ASSERT_EQ(first.status, 200u) << first;
  EXPECT_EQ(ids(first, "accounts", "account_id"), (std::vector<std::string>{made[1], made[2]}));
  EXPECT_TRUE(has_more(first));
  const json::object& listed = first.object().at("accounts").as_array()[0].as_object();
  EXPECT_EQ(listed, get_account(made[1])) << "a listed account is the full account";
  const HttpResponse next = admin().get("/v1/accounts?limit=2&starting_after=" + made[2]);
  ASSERT_EQ(next.status, 200u) << next;
  EXPECT_EQ(ids(next, "accounts", "account_id"), (std::vector<std::string>{made[3], made[4]}));

  const HttpResponse all = admin().get("/v1/accounts?limit=1000");
  ASSERT_EQ(all.status, 200u) << all;
  const auto everyone = ids(all, "accounts", "account_id");
  EXPECT_TRUE(std::is_sorted(everyone.begin(), everyone.end()));
  EXPECT_FALSE(has_more(all));

  const HttpResponse zero = admin().get("/v1/accounts?limit=0");
  EXPECT_TRUE(is_problem(zero, 400, "invalid_request"));
  EXPECT_TRUE(detail_names(zero, "limit")) << zero;
  EXPECT_TRUE(is_problem(admin().get("/v1/accounts?limit=1001"), 400, "invalid_request"));
  const HttpResponse stale = admin().get("/v1/accounts?starting_after=" + base + "-none");
  EXPECT_TRUE(is_problem(stale, 400, "invalid_request"));
  EXPECT_TRUE(detail_names(stale, "starting_after")) << stale;
  EXPECT_TRUE(is_problem(admin().get("/v1/accounts?colour=red"), 400, "invalid_request"));

  HttpClient kiosk(port(), account_key(made[0]));
  EXPECT_TRUE(is_problem(kiosk.get("/v1/accounts"), 403, "forbidden"));
}

TEST_F(HttpLists, HoldsArePagedNewestFirstAndAHoldIsFoundByItsRequestId) {
  const std::string id = make_account(20);
  std::vector<std::string> made;
  for (int i = 0; i < 5; ++i) made.push_back(jstr(make_hold(id, 1), "hold_id"));
  const HttpResponse first = admin().get("/v1/holds?account_id=" + id + "&limit=2");
  ASSERT_EQ(first.status, 200u) << first;
  EXPECT_EQ(ids(first, "holds", "hold_id"), (std::vector<std::string>{made[4], made[3]}));
  EXPECT_TRUE(has_more(first));
  const HttpResponse last = admin().get("/v1/holds?account_id=" + id + "&limit=2&starting_after=" + made[1]);
  ASSERT_EQ(last.status, 200u) << last;
  EXPECT_EQ(ids(last, "holds", "hold_id"), (std::vector<std::string>{made[0]}));
  EXPECT_FALSE(has_more(last));

  const json::object wanted = make_hold(id, 2, json::object{{"request_id", unique("lost-answer")}});
  const HttpResponse found = admin().get("/v1/holds?request_id=" + jstr(wanted, "request_id"));
  ASSERT_EQ(found.status, 200u) << found;
  ASSERT_EQ(ids(found, "holds", "hold_id"), (std::vector<std::string>{jstr(wanted, "hold_id")}));
  EXPECT_EQ(found.object().at("holds").as_array()[0].as_object(), wanted);
  const HttpResponse none = admin().get("/v1/holds?request_id=" + unique("never-sent"));
  ASSERT_EQ(none.status, 200u) << none;
  EXPECT_TRUE(ids(none, "holds", "hold_id").empty());
  EXPECT_FALSE(has_more(none));

  const HttpResponse stale = admin().get("/v1/holds?starting_after=hold_1_0000000000000000");
  EXPECT_TRUE(is_problem(stale, 400, "invalid_request"));
  EXPECT_TRUE(detail_names(stale, "starting_after")) << stale;
  EXPECT_TRUE(is_problem(admin().get("/v1/holds?request_id=not%20an%20id"), 400, "invalid_request"));
}

TEST_F(HttpLists, AnAccountKeyListsOnlyItsOwnAccountsHolds) {
  const std::string mine = make_account(10);
  const std::string theirs = make_account(10);
  const std::string my_hold = jstr(make_hold(mine, 1), "hold_id");
  const json::object their_hold = make_hold(theirs, 1);
  HttpClient kiosk(port(), account_key(mine));

  const HttpResponse own = kiosk.get("/v1/holds");
  ASSERT_EQ(own.status, 200u) << own;
  EXPECT_EQ(ids(own, "holds", "hold_id"), (std::vector<std::string>{my_hold}));
  // Another account answers exactly as an account that does not exist.
  const HttpResponse other = kiosk.get("/v1/holds?account_id=" + theirs);
  EXPECT_TRUE(is_problem(other, 404, "not_found"));
  const std::string missing = unique("missing");
  const HttpResponse absent = kiosk.get("/v1/holds?account_id=" + missing);
  EXPECT_TRUE(is_problem(absent, 404, "not_found"));
  // Their request id finds nothing; their hold is no cursor of this list.
  const HttpResponse by_request = kiosk.get("/v1/holds?request_id=" + jstr(their_hold, "request_id"));
  ASSERT_EQ(by_request.status, 200u) << by_request;
  EXPECT_TRUE(ids(by_request, "holds", "hold_id").empty());
  EXPECT_TRUE(is_problem(kiosk.get("/v1/holds?starting_after=" + jstr(their_hold, "hold_id")), 400, "invalid_request"));
}

TEST_F(HttpLists, KeysAreListedNewestFirstWithoutTheirSecrets) {
  const std::string id = make_account(0);
  const HttpResponse first = admin().post("/v1/accounts/" + id + "/keys", json::object{});
  const HttpResponse second = admin().post("/v1/accounts/" + id + "/keys", json::object{});
  ASSERT_EQ(first.status, 201u);
  ASSERT_EQ(second.status, 201u);
  const std::string first_id = jstr(first.object(), "key_id");
  const std::string second_id = jstr(second.object(), "key_id");
  ASSERT_EQ(admin().del("/v1/keys/" + first_id).status, 200u);

  const HttpResponse listed = admin().get("/v1/keys?account_id=" + id);
  ASSERT_EQ(listed.status, 200u) << listed;
  const auto keys = ids(listed, "keys", "key_id");
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), (std::set<std::string>{first_id, second_id}));
  EXPECT_FALSE(has_more(listed));
  for (const auto& v : listed.object().at("keys").as_array()) {
    const json::object& k = v.as_object();
    EXPECT_EQ(jstr(k, "account_id"), id);
    EXPECT_EQ(jstr(k, "kind"), "account");
    EXPECT_FALSE(k.contains("secret"));
    EXPECT_FALSE(k.contains("secret_sha256"));
    EXPECT_TRUE(k.contains("last_used_at"));
    EXPECT_EQ(k.at("revoked").as_bool(), jstr(k, "key_id") == first_id);
  }
  for (const HttpResponse* created : {&first, &second}) {
    const std::string secret = jstr(created->object(), "secret");
    EXPECT_EQ(listed.body.find(secret), std::string::npos) << "a secret is listed";
    EXPECT_EQ(listed.body.find(tollgate::http::sha256_hex(secret)), std::string::npos) << "a hash is listed";
  }
  const HttpResponse page = admin().get("/v1/keys?account_id=" + id + "&limit=1");
  ASSERT_EQ(page.status, 200u) << page;
  EXPECT_TRUE(has_more(page));
  const auto first_page = ids(page, "keys", "key_id");
  ASSERT_EQ(first_page.size(), 1u);
  const HttpResponse rest = admin().get("/v1/keys?account_id=" + id + "&limit=1&starting_after=" + first_page[0]);
  ASSERT_EQ(rest.status, 200u) << rest;
  EXPECT_EQ(ids(rest, "keys", "key_id").size(), 1u);
  EXPECT_NE(ids(rest, "keys", "key_id"), first_page);
  EXPECT_FALSE(has_more(rest));

  const HttpResponse all = admin().get("/v1/keys?limit=1000");
  ASSERT_EQ(all.status, 200u) << all;
  EXPECT_GE(all.object().at("keys").as_array().size(), 2u);
  EXPECT_TRUE(is_problem(admin().get("/v1/keys?account_id=" + unique("missing")), 404, "not_found"));
  const HttpResponse stale = admin().get("/v1/keys?starting_after=key_0000000000000000");
  EXPECT_TRUE(is_problem(stale, 400, "invalid_request"));
  EXPECT_TRUE(detail_names(stale, "starting_after")) << stale;
  HttpClient kiosk(port(), jstr(second.object(), "secret"));
  EXPECT_TRUE(is_problem(kiosk.get("/v1/keys?account_id=" + id), 403, "forbidden"));
}

TEST_F(HttpLists, ATransferIsFoundByItsReferenceAndAnotherAccountsAnswers404LikeAMissingOne) {
  const std::string mine = make_account(0);
  const std::string theirs = make_account(0);
  const std::string reference = unique("pay");
  HttpClient kiosk(port(), account_key(mine));
  const HttpResponse before = kiosk.get("/v1/transfers/" + reference);  // does not exist yet
  EXPECT_TRUE(is_problem(before, 404, "not_found"));
  EXPECT_TRUE(is_problem(admin().get("/v1/transfers/" + reference), 404, "not_found"));

  const HttpResponse credited =
      admin().post("/v1/accounts/" + theirs + "/credits", json::object{{"amount", 7}, {"reference", reference}});
  ASSERT_EQ(credited.status, 201u) << credited;
  const json::object& event = credited.object().at("event").as_object();
  const HttpResponse found = admin().get("/v1/transfers/" + reference);
  ASSERT_EQ(found.status, 200u) << found;
  EXPECT_EQ(found.object(), (json::object{{"reference", reference},
                                          {"account_id", theirs},
                                          {"kind", "credit"},
                                          {"amount", 7},
                                          {"event_id", event.at("event_id")},
                                          {"at", event.at("at")}}));
  const HttpResponse hidden = kiosk.get("/v1/transfers/" + reference);  // exists, on another account
  EXPECT_TRUE(is_problem(hidden, 404, "not_found"));
  EXPECT_EQ(hidden.body, before.body) << "byte for byte like a reference that does not exist";

  const std::string refund = unique("refund");
  ASSERT_EQ(admin().post("/v1/accounts/" + theirs + "/debits",
                         json::object{{"amount", 2}, {"reference", refund}, {"reason", "goodwill"}})
                .status,
            201u);
  const HttpResponse debit = admin().get("/v1/transfers/" + refund);
  ASSERT_EQ(debit.status, 200u) << debit;
  EXPECT_EQ(jstr(debit.object(), "kind"), "debit");
  EXPECT_EQ(jint(debit.object(), "amount"), 2);
  HttpClient their_kiosk(port(), account_key(theirs));
  EXPECT_EQ(their_kiosk.get("/v1/transfers/" + refund).status, 200u);
  EXPECT_TRUE(is_problem(admin().get("/v1/transfers/not%20a%20reference"), 400, "invalid_request"));
}

}  // namespace
}  // namespace tollgate::httptest
