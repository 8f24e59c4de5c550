// Prices over HTTP, end to end (docs/api.md "Prices: holds by feature and quantity"): a real tollgate process
// (SQLite, or PostgreSQL in the HttpSuitesOnPostgres run). A feature's price is the server's: a hold
// reserved by feature and quantity costs quantity × the price at that moment, keeps the unit price it
// was made at (a price change before its commit changes nothing for it), and commits by quantity at
// that price. Every version of a price is kept. POST /v1/holds/check answers what a reservation would
// meet, writing nothing. Bad input is refused by name and changes nothing. (The rules on every
// backend against the model: tests/store/differential_test.cc.)
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.h"

namespace tollgate::httptest {
namespace {

class HttpPrices : public ServerSuite<HttpPrices> {
 protected:
  HttpResponse put_price(const std::string& feature, json::value credits_per_unit) {
    return admin().request("PUT", "/v1/prices/" + feature,
                           json::serialize(json::object{{"credits_per_unit", credits_per_unit}}), {});
  }
  // A new feature priced at `credits_per_unit` (version 1).
  std::string priced_feature(std::int64_t credits_per_unit) {
    const std::string feature = unique("photo");
    const HttpResponse r = put_price(feature, credits_per_unit);
    EXPECT_EQ(r.status, 201u) << r;
    return feature;
  }
  HttpResponse reserve(json::object body) {
    if (!body.contains("request_id")) body["request_id"] = unique("req");
    return admin().post("/v1/holds", body);
  }
  HttpResponse commit(const std::string& hold_id, json::object body) {
    return admin().post("/v1/holds/" + hold_id + "/commit", body);
  }
  json::array events(const std::string& account) {
    const HttpResponse r = admin().get("/v1/accounts/" + account + "/events");
    EXPECT_EQ(r.status, 200u) << r;
    return r.object().at("events").as_array();
  }
  // An account key of `account` (scopes: the default of an account key).
  std::string account_key(const std::string& account) {
    const HttpResponse r = admin().post("/v1/accounts/" + account + "/keys", json::object{});
    EXPECT_EQ(r.status, 201u) << r;
    return jstr(r.object(), "secret");
  }
};

TEST_F(HttpPrices, AHoldByFeatureCostsQuantityTimesThePriceAndCommitsAtItsFrozenUnitPrice) {
  const std::string feature = priced_feature(3);
  const std::string account = make_account(100);
  const HttpResponse held = reserve({{"account_id", account}, {"feature", feature}, {"quantity", 4}});
  ASSERT_EQ(held.status, 201u) << held;
  const json::object& hold = held.object();
  EXPECT_EQ(jint(hold, "amount"), 12);
  EXPECT_EQ(jstr(hold, "feature"), feature);
  EXPECT_EQ(jint(hold, "quantity"), 4);
  EXPECT_EQ(jint(hold, "unit_price"), 3);
  EXPECT_EQ(jint(hold, "price_version"), 1);
  const std::string hold_id = jstr(hold, "hold_id");

  // The price changes between the reserve and the commit: the hold keeps its unit price.
  const HttpResponse changed = put_price(feature, 5);
  ASSERT_EQ(changed.status, 201u) << changed;
  EXPECT_EQ(jint(changed.object(), "version"), 2);
  const HttpResponse committed = commit(hold_id, {{"quantity", 3}});
  ASSERT_EQ(committed.status, 200u) << committed;
  EXPECT_EQ(jint(committed.object(), "committed_amount"), 9);  // 3 × 3, not 3 × 5
  EXPECT_EQ(jint(committed.object(), "unit_price"), 3);
  const json::object a = get_account(account);
  EXPECT_EQ(jint(a, "used"), 9);
  EXPECT_EQ(jint(a, "available"), 91);
  EXPECT_EQ(jint(a, "reserved"), 0);

  // The hold reads with what it was priced at, alone and in a list.
  const HttpResponse read = admin().get("/v1/holds/" + hold_id);
  ASSERT_EQ(read.status, 200u) << read;
  EXPECT_EQ(jint(read.object(), "unit_price"), 3);
  EXPECT_EQ(jint(read.object(), "quantity"), 4);
  const HttpResponse listed = admin().get("/v1/holds?account_id=" + account);
  ASSERT_EQ(listed.status, 200u) << listed;
  ASSERT_EQ(listed.object().at("holds").as_array().size(), 1u);
  EXPECT_EQ(jstr(listed.object().at("holds").as_array()[0].as_object(), "feature"), feature);

  // A new hold is priced at the new version.
  const HttpResponse next = reserve({{"account_id", account}, {"feature", feature}});
  ASSERT_EQ(next.status, 201u) << next;
  EXPECT_EQ(jint(next.object(), "amount"), 5);
  EXPECT_EQ(jint(next.object(), "quantity"), 1);
  EXPECT_EQ(jint(next.object(), "price_version"), 2);
  // A hold made by amount has none of the price's fields.
  const json::object plain = make_hold(account, 2);
  EXPECT_FALSE(plain.contains("feature"));
  EXPECT_FALSE(admin().get("/v1/holds/" + jstr(plain, "hold_id")).object().contains("unit_price"));
}

TEST_F(HttpPrices, EveryVersionIsKeptAndTheSamePriceAgainMakesNone) {
  const std::string feature = priced_feature(2);
  const HttpResponse same = put_price(feature, 2);
  ASSERT_EQ(same.status, 200u) << same;
  EXPECT_EQ(jint(same.object(), "version"), 1);
  ASSERT_EQ(put_price(feature, 4).status, 201u);
  ASSERT_EQ(put_price(feature, 7).status, 201u);
  const HttpResponse current = admin().get("/v1/prices/" + feature);
  ASSERT_EQ(current.status, 200u) << current;
  EXPECT_EQ(jint(current.object(), "credits_per_unit"), 7);
  EXPECT_EQ(jint(current.object(), "version"), 3);

  const HttpResponse versions = admin().get("/v1/prices/" + feature + "/versions?limit=2");
  ASSERT_EQ(versions.status, 200u) << versions;
  const json::array& first = versions.object().at("versions").as_array();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(jint(first[0].as_object(), "version"), 3);  // newest first
  EXPECT_EQ(jint(first[1].as_object(), "credits_per_unit"), 4);
  EXPECT_TRUE(versions.object().at("has_more").as_bool());
  const HttpResponse rest = admin().get("/v1/prices/" + feature + "/versions?starting_after=2");
  ASSERT_EQ(rest.status, 200u) << rest;
  ASSERT_EQ(rest.object().at("versions").as_array().size(), 1u);
  EXPECT_EQ(jint(rest.object().at("versions").as_array()[0].as_object(), "credits_per_unit"), 2);
  EXPECT_FALSE(rest.object().at("has_more").as_bool());

  // The list of prices: by feature, paged.
  const std::string second = priced_feature(1);
  const HttpResponse page = admin().get("/v1/prices?starting_after=" + feature + "&limit=1");
  ASSERT_EQ(page.status, 200u) << page;
  ASSERT_EQ(page.object().at("prices").as_array().size(), 1u);
  EXPECT_GT(jstr(page.object().at("prices").as_array()[0].as_object(), "feature"), feature);
  EXPECT_TRUE(is_problem(admin().get("/v1/prices/" + unique("never")), 404, "not_found"));
  EXPECT_TRUE(is_problem(admin().get("/v1/prices/" + unique("never") + "/versions"), 404, "not_found"));
  EXPECT_TRUE(is_problem(admin().get("/v1/prices/" + feature + "/versions?starting_after=x"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/prices/" + feature + "/versions?starting_after=4"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/prices?starting_after=" + unique("never")), 400, "invalid_request"));
  (void)second;
}

TEST_F(HttpPrices, TheSameRequestAgainAnswersTheHoldAsItIsWhateverThePriceIsNow) {
  const std::string feature = priced_feature(3);
  const std::string account = make_account(50);
  const std::string request_id = unique("req");
  const json::object body{{"account_id", account}, {"feature", feature}, {"quantity", 2}, {"request_id", request_id}};
  const HttpResponse first = reserve(body);
  ASSERT_EQ(first.status, 201u) << first;
  ASSERT_EQ(put_price(feature, 8).status, 201u);
  const json::object after_first = account_state(account);
  const HttpResponse again = reserve(body);
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(jint(again.object(), "amount"), 6);
  EXPECT_EQ(jstr(again.object(), "hold_id"), jstr(first.object(), "hold_id"));

  json::object other_quantity = body;
  other_quantity["quantity"] = 3;
  EXPECT_TRUE(is_problem(reserve(other_quantity), 422, "idempotency_mismatch"));
  json::object other_feature = body;
  other_feature["feature"] = priced_feature(3);
  EXPECT_TRUE(is_problem(reserve(other_feature), 422, "idempotency_mismatch"));
  // A request_id that made a hold by amount is not a hold by feature.
  const json::object plain = make_hold(account, 6);
  EXPECT_TRUE(is_problem(reserve({{"account_id", account}, {"feature", feature}, {"request_id", jstr(plain, "request_id")}}),
                         422, "idempotency_mismatch"));
  json::object expected = after_first;
  expected["available"] = jint(after_first, "available") - 6;
  expected["reserved"] = jint(after_first, "reserved") + 6;
  expected["active_holds"] = jint(after_first, "active_holds") + 1;
  EXPECT_EQ(account_state(account), expected);  // only the plain hold moved anything
}

TEST_F(HttpPrices, TheCheckDecidesLikeAReserveAndWritesNothing) {
  const std::string feature = priced_feature(4);
  const std::string account = make_account(10, {{"max_active_holds", 1}});
  const std::size_t events_before = events(account).size();
  const json::object before = account_state(account);

  HttpResponse r = admin().post("/v1/holds/check", json::object{{"account_id", account}, {"amount", 10}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.object().at("allowed").as_bool());
  EXPECT_EQ(jint(r.object(), "available"), 10);
  EXPECT_EQ(jint(r.object(), "requested"), 10);
  EXPECT_FALSE(r.object().contains("reason"));

  r = admin().post("/v1/holds/check", json::object{{"account_id", account}, {"feature", feature}, {"quantity", 3}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_FALSE(r.object().at("allowed").as_bool());
  EXPECT_EQ(jint(r.object(), "requested"), 12);
  EXPECT_EQ(jint(r.object(), "unit_price"), 4);
  EXPECT_EQ(jstr(r.object(), "reason"), "insufficient_credits");
  EXPECT_EQ(jstr(r.object(), "detail"), "Not enough credits: 10 available, 12 needed.");
  EXPECT_EQ(account_state(account), before);
  EXPECT_EQ(events(account).size(), events_before);

  // What a reserve would meet is what the check says: the limit of active holds, a frozen account.
  const json::object hold = make_hold(account, 1);
  r = admin().post("/v1/holds/check", json::object{{"account_id", account}, {"amount", 1}});
  EXPECT_EQ(jstr(r.object(), "reason"), "too_many_holds") << r;
  EXPECT_TRUE(is_problem(reserve({{"account_id", account}, {"amount", 1}}), 409, "too_many_holds"));
  ASSERT_EQ(admin().post("/v1/holds/" + jstr(hold, "hold_id") + "/release", json::object{}).status, 200u);
  ASSERT_EQ(admin().request("PATCH", "/v1/accounts/" + account, R"({"frozen":true})", {}).status, 200u);
  r = admin().post("/v1/holds/check", json::object{{"account_id", account}, {"amount", 1}});
  EXPECT_EQ(jstr(r.object(), "reason"), "account_frozen") << r;

  // An account key checks its own account only; another account is not there for it.
  const std::string other = make_account(5);
  HttpClient kiosk(port(), account_key(other));
  r = kiosk.post("/v1/holds/check", json::object{{"account_id", other}, {"amount", 5}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.object().at("allowed").as_bool());
  EXPECT_TRUE(is_problem(kiosk.post("/v1/holds/check", json::object{{"account_id", account}, {"amount", 1}}), 404,
                         "not_found"));
  EXPECT_TRUE(is_problem(admin().post("/v1/holds/check", json::object{{"account_id", unique("ghost")}, {"amount", 1}}),
                         404, "not_found"));
  // An unknown account is answered before an unknown feature, in the check as in a reservation.
  EXPECT_TRUE(is_problem(admin().post("/v1/holds/check",
                                      json::object{{"account_id", unique("ghost")}, {"feature", unique("unpriced")}}),
                         404, "not_found"));
  EXPECT_TRUE(is_problem(reserve({{"account_id", unique("ghost")}, {"feature", unique("unpriced")}}), 404, "not_found"));
  // A key that may only read does not check (the check is a reservation's question).
  const HttpResponse reader_key = admin().post("/v1/accounts/" + other + "/keys", json::object{{"scopes", json::array{"read"}}});
  ASSERT_EQ(reader_key.status, 201u) << reader_key;
  HttpClient reader(port(), jstr(reader_key.object(), "secret"));
  EXPECT_TRUE(is_problem(reader.post("/v1/holds/check", json::object{{"account_id", other}, {"amount", 1}}), 403, "forbidden"));
}

TEST_F(HttpPrices, BadInputIsRefusedByNameAndChangesNothing) {
  const std::string feature = priced_feature(3);
  const std::string account = make_account(100);
  const json::object hold = make_hold(account, 5);
  const std::string hold_id = jstr(hold, "hold_id");
  const json::object before = account_state(account);
  struct Case {
    std::string target;
    std::string body;
    std::string names;  // in the detail
  };
  const std::string a = "\"account_id\":\"" + account + "\",\"request_id\":\"" + unique("req") + "\"";
  const std::vector<Case> cases = {
      {"/v1/holds", "{" + a + ",\"amount\":3,\"feature\":\"" + feature + "\"}", "either amount or feature"},
      {"/v1/holds", "{" + a + "}", "amount or feature is required"},
      {"/v1/holds", "{" + a + ",\"feature\":\"" + feature + "\",\"quantity\":0}", "quantity"},
      {"/v1/holds", "{" + a + ",\"feature\":\"" + feature + "\",\"quantity\":-2}", "quantity"},
      {"/v1/holds", "{" + a + ",\"feature\":\"" + feature + "\",\"quantity\":1.5}", "quantity"},
      {"/v1/holds", "{" + a + ",\"feature\":\"" + feature + "\",\"quantity\":\"2\"}", "quantity"},
      {"/v1/holds", "{" + a + ",\"feature\":\"" + feature + "\",\"quantity\":9007199254740991}", "more than"},
      {"/v1/holds", "{" + a + ",\"amount\":3,\"quantity\":2}", "quantity goes with feature"},
      {"/v1/holds", "{" + a + ",\"feature\":\"no such\"}", "feature"},
      {"/v1/holds", "{" + a + ",\"feature\":\"" + unique("unpriced") + "\"}", "known features: "},
      {"/v1/holds/check", "{\"account_id\":\"" + account + "\",\"amount\":1,\"feature\":\"" + feature + "\"}",
       "either amount or feature"},
      {"/v1/holds/check", "{\"account_id\":\"" + account + "\",\"feature\":\"" + unique("unpriced") + "\"}",
       "known features: "},
      {"/v1/holds/" + hold_id + "/commit", R"({"amount":1,"quantity":1})", "either amount or quantity"},
      {"/v1/holds/" + hold_id + "/commit", R"({"quantity":1})", "reserved by amount"},
      {"/v1/holds/" + hold_id + "/commit", R"({"quantity":0})", "quantity"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = admin().post(c.target, c.body);
    EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << c.target << " " << c.body;
    EXPECT_NE(r.body.find(c.names), std::string::npos) << c.body << " → " << r;
  }
  EXPECT_NE(admin().post("/v1/holds", "{" + a + ",\"feature\":\"" + unique("unpriced") + "\"}").body.find(feature),
            std::string::npos);  // the known features listed include this one
  for (const char* body : {R"({"credits_per_unit":0})", R"({"credits_per_unit":-1})", R"({"credits_per_unit":"3"})",
                                  R"({"credits_per_unit":9007199254740992})", R"({})", R"({"credits_per_unit":3,"x":1})"}) {
    const HttpResponse r = admin().request("PUT", "/v1/prices/" + feature, body, {});
    EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << body;
  }
  EXPECT_TRUE(is_problem(admin().request("PUT", "/v1/prices/bad%20name", R"({"credits_per_unit":3})", {}), 400,
                         "invalid_request"));
  EXPECT_EQ(account_state(account), before);
  const HttpResponse price = admin().get("/v1/prices/" + feature + "/versions");
  ASSERT_EQ(price.object().at("versions").as_array().size(), 1u) << price;
  EXPECT_EQ(jint(price.object().at("versions").as_array()[0].as_object(), "credits_per_unit"), 3);
}

TEST_F(HttpPrices, PricesAreSetAndReadByAdminsOnly) {
  const std::string feature = priced_feature(3);
  const std::string account = make_account(10);
  HttpClient kiosk(port(), account_key(account));
  EXPECT_TRUE(is_problem(kiosk.request("PUT", "/v1/prices/" + feature, R"({"credits_per_unit":1})", {}), 403, "forbidden"));
  EXPECT_TRUE(is_problem(kiosk.get("/v1/prices"), 403, "forbidden"));
  EXPECT_TRUE(is_problem(kiosk.get("/v1/prices/" + feature), 403, "forbidden"));
  // A kiosk reserves by feature and commits by quantity all the same.
  const HttpResponse held = kiosk.post("/v1/holds", json::object{{"account_id", account}, {"feature", feature},
                                                                 {"quantity", 2}, {"request_id", unique("req")}});
  ASSERT_EQ(held.status, 201u) << held;
  const HttpResponse committed =
      kiosk.post("/v1/holds/" + jstr(held.object(), "hold_id") + "/commit", json::object{{"quantity", 1}});
  ASSERT_EQ(committed.status, 200u) << committed;
  EXPECT_EQ(jint(committed.object(), "committed_amount"), 3);
  EXPECT_EQ(jint(get_account(account), "available"), 7);
}

// Holds by feature from many connections while the price changes: each hold costs its quantity × the
// unit price it records, that unit price is one the feature had, and the money adds up.
TEST_F(HttpPrices, ConcurrentHoldsWhileThePriceChangesEachCostWhatTheyRecord) {
  const std::string feature = priced_feature(1);
  const std::string account = make_account(1'000'000);
  constexpr int kThreads = 6;
  constexpr int kHoldsPerThread = 20;
  std::atomic<bool> stop{false};
  std::thread pricer([&] {
    HttpClient client(port(), kAdminKey);
    for (int price = 2; !stop && price < 10'000; ++price) {  // until the holds are made
      const HttpResponse r = client.request("PUT", "/v1/prices/" + feature,
                                            json::serialize(json::object{{"credits_per_unit", price}}), {});
      EXPECT_EQ(r.status, 201u) << r;
    }
  });
  std::vector<std::vector<json::object>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(port(), kAdminKey);
      for (int i = 0; i < kHoldsPerThread; ++i) {
        const HttpResponse r = client.post("/v1/holds", json::object{{"account_id", account}, {"feature", feature},
                                                                     {"quantity", 1 + (i % 3)},
                                                                     {"request_id", unique("req")}});
        EXPECT_EQ(r.status, 201u) << r;
        if (r.status == 201u) made[static_cast<std::size_t>(t)].push_back(r.object());
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  pricer.join();

  std::map<std::int64_t, std::int64_t> price_of_version;
  const HttpResponse versions = admin().get("/v1/prices/" + feature + "/versions?limit=1000");
  ASSERT_EQ(versions.status, 200u) << versions;
  for (const auto& v : versions.object().at("versions").as_array()) {
    price_of_version[jint(v.as_object(), "version")] = jint(v.as_object(), "credits_per_unit");
  }
  std::int64_t reserved = 0;
  std::set<std::int64_t> versions_seen;
  for (const auto& per_thread : made) {
    for (const json::object& h : per_thread) {
      EXPECT_EQ(jint(h, "amount"), jint(h, "quantity") * jint(h, "unit_price")) << h;
      ASSERT_TRUE(price_of_version.count(jint(h, "price_version"))) << h;
      EXPECT_EQ(price_of_version[jint(h, "price_version")], jint(h, "unit_price")) << h;
      versions_seen.insert(jint(h, "price_version"));
      reserved += jint(h, "amount");
    }
  }
  EXPECT_GE(versions_seen.size(), 2u) << "the price never changed while holds were made: the test saw no race";
  const json::object a = get_account(account);
  EXPECT_EQ(jint(a, "reserved"), reserved);
  EXPECT_EQ(jint(a, "available") + jint(a, "reserved") + jint(a, "used") + jint(a, "expired"), jint(a, "purchased"));
  const HttpResponse audit = admin().get("/v1/audit?account_id=" + account);
  ASSERT_EQ(audit.status, 200u) << audit;
  EXPECT_TRUE(audit.object().at("violations").as_array().empty()) << audit;
}

// `n` instances on the schema's database, each ready.
void start_instances(const testing::PgSchema& schema, int n, std::vector<std::unique_ptr<ServerProcess>>& servers) {
  for (int i = 0; i < n; ++i) {
    ServerOptions o = server_options();
    o.database = schema.uri();
    servers.push_back(std::make_unique<ServerProcess>(o));
    ASSERT_EQ(wait_until_ready(servers.back()->port()).status, 200u) << servers.back()->log();
  }
}

// Three instances on one PostgreSQL database change one price at once: each change that answered
// 201 made exactly one version, the versions are 1, 2, … without a gap or a repeat, and the current
// price is the newest version's (the advisory lock per feature serializes the instances' batches).
TEST(HttpPricesInstances, ThreeInstancesChangingOnePriceMakeOneVersionEachInOrder) {
  REQUIRE_POSTGRES(pg);
  testing::PgSchema schema(pg);
  std::vector<std::unique_ptr<ServerProcess>> servers;
  ASSERT_NO_FATAL_FAILURE(start_instances(schema, 3, servers));
  constexpr int kPerThread = 12;
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(servers[static_cast<std::size_t>(t % 3)]->port(), kAdminKey);
      for (int i = 0; i < kPerThread; ++i) {
        const std::int64_t price = 1 + t * kPerThread + i;  // every change names a price of its own
        const HttpResponse r = client.request("PUT", "/v1/prices/photo",
                                              json::serialize(json::object{{"credits_per_unit", price}}), {});
        EXPECT_TRUE(r.status == 201u || r.status == 200u) << r;
        if (r.status == 201u) ++made;
      }
    });
  }
  for (auto& th : threads) th.join();
  HttpClient admin(servers[0]->port(), kAdminKey);
  const HttpResponse versions = admin.get("/v1/prices/photo/versions?limit=1000");
  ASSERT_EQ(versions.status, 200u) << versions;
  const json::array& all = versions.object().at("versions").as_array();
  ASSERT_EQ(static_cast<int>(all.size()), made.load());
  EXPECT_GE(made.load(), 6 * kPerThread - 1);  // a price equal to the current one is the only 200
  std::set<std::int64_t> prices;
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(jint(all[i].as_object(), "version"), static_cast<std::int64_t>(all.size() - i));  // newest first, no gap
    prices.insert(jint(all[i].as_object(), "credits_per_unit"));
  }
  EXPECT_EQ(prices.size(), all.size());
  const HttpResponse current = admin.get("/v1/prices/photo");
  EXPECT_EQ(jint(current.object(), "version"), static_cast<std::int64_t>(all.size()));
  EXPECT_EQ(jint(current.object(), "credits_per_unit"), jint(all[0].as_object(), "credits_per_unit"));
}

// Reservations by feature on two instances at once while a third changes the price: each hold costs
// what it records, at a price its feature had; one request_id sent to two instances at once makes one
// hold (the other answers it, or — from another account — a mismatch that tells nothing of it).
TEST(HttpPricesInstances, ReservationsOnTwoInstancesWhileAThirdChangesThePriceAndOneRequestIdTwice) {
  REQUIRE_POSTGRES(pg);
  testing::PgSchema schema(pg);
  std::vector<std::unique_ptr<ServerProcess>> servers;
  ASSERT_NO_FATAL_FAILURE(start_instances(schema, 3, servers));
  HttpClient admin(servers[0]->port(), kAdminKey);
  ASSERT_EQ(admin.request("PUT", "/v1/prices/photo", R"({"credits_per_unit":1})", {}).status, 201u);
  for (const char* account : {"ann", "bob"}) {
    ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", account}}).status, 201u);
    ASSERT_EQ(admin.post(std::string("/v1/accounts/") + account + "/credits",
                         json::object{{"amount", 1'000'000}, {"reference", std::string(account) + "-buy"}})
                  .status,
              201u);
  }
  std::atomic<bool> stop{false};
  std::thread pricer([&] {
    HttpClient client(servers[2]->port(), kAdminKey);
    for (int price = 2; !stop && price < 10'000; ++price) {
      EXPECT_EQ(client.request("PUT", "/v1/prices/photo", json::serialize(json::object{{"credits_per_unit", price}}), {})
                    .status,
                201u);
    }
  });
  std::vector<json::object> made;
  std::mutex made_mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(servers[static_cast<std::size_t>(t % 2)]->port(), kAdminKey);
      for (int i = 0; i < 15; ++i) {
        const HttpResponse r = client.post(
            "/v1/holds", json::object{{"account_id", t % 2 ? "ann" : "bob"}, {"feature", "photo"}, {"quantity", 1 + i % 3},
                                      {"request_id", "r-" + std::to_string(t) + "-" + std::to_string(i)}});
        EXPECT_EQ(r.status, 201u) << r;
        std::lock_guard lock(made_mu);
        if (r.status == 201u) made.push_back(r.object());
      }
    });
  }
  // One request_id, the same account, on two instances at once: one hold, answered to both.
  std::vector<HttpResponse> twice(2);
  std::vector<std::thread> both;
  for (std::size_t i = 0; i < 2; ++i) {
    both.emplace_back([&, i] {
      HttpClient client(servers[i]->port(), kAdminKey);
      twice[i] = client.post("/v1/holds", json::object{{"account_id", "ann"}, {"feature", "photo"}, {"quantity", 2},
                                                      {"request_id", "same-twice"}});
    });
  }
  for (auto& th : both) th.join();
  // One request_id on two instances at once from two accounts: one hold; the other a mismatch.
  std::vector<HttpResponse> across(2);
  std::vector<std::thread> other;
  for (std::size_t i = 0; i < 2; ++i) {
    other.emplace_back([&, i] {
      HttpClient client(servers[i]->port(), kAdminKey);
      across[i] = client.post("/v1/holds", json::object{{"account_id", i == 0 ? "ann" : "bob"}, {"feature", "photo"},
                                                       {"request_id", "same-across"}});
    });
  }
  for (auto& th : other) th.join();
  for (auto& th : threads) th.join();
  stop = true;
  pricer.join();

  ASSERT_TRUE(twice[0].status == 201u || twice[1].status == 201u) << twice[0] << twice[1];
  EXPECT_EQ(twice[0].status + twice[1].status, 401u) << twice[0] << twice[1];  // one 201, one 200
  EXPECT_EQ(jstr(twice[0].object(), "hold_id"), jstr(twice[1].object(), "hold_id"));
  EXPECT_EQ(jint(twice[0].object(), "unit_price"), jint(twice[1].object(), "unit_price"));
  const HttpResponse& made_across = across[0].status == 201u ? across[0] : across[1];
  const HttpResponse& refused_across = across[0].status == 201u ? across[1] : across[0];
  EXPECT_EQ(made_across.status, 201u) << across[0] << across[1];
  EXPECT_TRUE(is_problem(refused_across, 422, "idempotency_mismatch")) << across[0] << across[1];
  EXPECT_EQ(refused_across.body.find(jstr(made_across.object(), "account_id")), std::string::npos)
      << "the mismatch names the other account: " << refused_across;

  std::map<std::int64_t, std::int64_t> price_of_version;
  const HttpResponse versions = admin.get("/v1/prices/photo/versions?limit=1000");
  for (const auto& v : versions.object().at("versions").as_array()) {
    price_of_version[jint(v.as_object(), "version")] = jint(v.as_object(), "credits_per_unit");
  }
  std::set<std::int64_t> seen;
  for (const json::object& h : made) {
    EXPECT_EQ(jint(h, "amount"), jint(h, "quantity") * jint(h, "unit_price")) << h;
    EXPECT_EQ(price_of_version[jint(h, "price_version")], jint(h, "unit_price")) << h;
    seen.insert(jint(h, "price_version"));
  }
  EXPECT_GE(seen.size(), 2u) << "the price never changed while holds were made: the test saw no race";
  const HttpResponse audit = admin.get("/v1/audit");
  ASSERT_EQ(audit.status, 200u) << audit;
  EXPECT_TRUE(audit.object().at("violations").as_array().empty()) << audit;
}

}  // namespace
}  // namespace tollgate::httptest
