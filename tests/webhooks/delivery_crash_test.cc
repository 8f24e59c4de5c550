// Webhook delivery across crashes: real tollgate processes (support/server_process.h) delivering to
// the reference receiver (support/reference_receiver.h), which answers slowly enough that
// deliveries are in flight when the delivering process is killed with SIGKILL.
//
//   - three instances on one PostgreSQL database: the one holding the delivery lock (its /metrics
//     says tollgate_webhook_delivering 1) is killed; another takes the lock once its lease runs out
//     (limits::kWebhookDeliveryLockTtlMs, 10 s) and delivers the rest.
//   - one instance on a SQLite file, killed and started again on the same file.
//
// Either way: every event after the endpoint's registration (as GET /v1/events lists them) reaches
// the receiver at least once, verified; an event received twice carries the same webhook-id
// (evt_{event_id}); and every delivery ends `delivered`.
//
// Needs the reference receiver (TOLLGATE_WEBHOOK_RECEIVER) and, for the first, PostgreSQL
// (TOLLGATE_TEST_POSTGRES); CI requires both.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http/http_test_support.h"
#include "support/reference_receiver.h"
#include "webhooks/signature.h"

namespace tollgate::httptest {
namespace {

using Received = std::vector<testing::ReceivedRequest>;

// One server process's HTTP client with the admin key.
HttpClient admin_of(const ServerProcess& s) { return HttpClient(s.port(), kAdminKey); }

// Whether the instance says it holds the delivery lock.
bool delivering(const ServerProcess& s) {
  const HttpResponse r = admin_of(s).get("/metrics");
  return r.status == 200 && r.body.find("\ntollgate_webhook_delivering 1") != std::string::npos;
}

// An endpoint that sends to a reference receiver knowing its secret (registered first with a
// placeholder URL, since the secret is shown only by the create).
struct Endpoint {
  std::string id;
  std::int64_t cursor_at_creation = 0;
  std::unique_ptr<testing::ReferenceReceiver> receiver;
};

Endpoint endpoint_with_receiver(const ServerProcess& s, int slow_ms) {
  Endpoint e;
  const HttpResponse made = admin_of(s).post("/v1/webhook-endpoints", json::object{{"url", "http://127.0.0.1:1/later"}});
  EXPECT_EQ(made.status, 201u) << made;
  if (made.status != 201) return e;
  e.id = jstr(made.object(), "endpoint_id");
  e.cursor_at_creation = jint(made.object(), "delivery_cursor");
  e.receiver = std::make_unique<testing::ReferenceReceiver>(
      testing::ReferenceReceiverOptions{.secrets = {jstr(made.object(), "secret")}, .slow_ms = slow_ms});
  const HttpResponse moved = admin_of(s).request("PATCH", "/v1/webhook-endpoints/" + e.id,
                                                 serialize(json::object{{"url", e.receiver->url()}}));
  EXPECT_EQ(moved.status, 200u) << moved;
  return e;
}

// Every event id of the feed after `after` (GET /v1/events).
std::set<std::int64_t> feed_after(const ServerProcess& s, std::int64_t after) {
  std::set<std::int64_t> out;
  for (;;) {
    const HttpResponse r = admin_of(s).get("/v1/events?after=" + std::to_string(after) + "&limit=1000");
    EXPECT_EQ(r.status, 200u) << r;
    if (r.status != 200) return out;
    const auto& events = r.object().at("events").as_array();
    for (const auto& ev : events) out.insert(jint(ev.as_object(), "event_id"));
    if (events.empty()) return out;
    after = jint(r.object(), "next_after");
  }
}

// Every delivery of the endpoint, by event id → status (GET …/deliveries, paged).
std::map<std::int64_t, std::string> deliveries_of(const ServerProcess& s, const std::string& endpoint_id) {
  std::map<std::int64_t, std::string> out;
  std::string after;
  for (;;) {
    std::string target = "/v1/webhook-endpoints/" + endpoint_id + "/deliveries?limit=100";
    if (!after.empty()) target += "&starting_after=" + after;
    const HttpResponse r = admin_of(s).get(target);
    EXPECT_EQ(r.status, 200u) << r;
    if (r.status != 200) return out;
    const auto& items = r.object().at("deliveries").as_array();
    for (const auto& d : items) out[jint(d.as_object(), "event_id")] = jstr(d.as_object(), "status");
    if (items.empty() || !r.object().at("has_more").as_bool()) return out;
    after = webhooks::webhook_id(jint(items.back().as_object(), "event_id"));
  }
}

std::set<std::int64_t> received_event_ids(const Received& all) {
  std::set<std::int64_t> out;
  for (const auto& r : all) {
    if (r.event_id) out.insert(*r.event_id);
  }
  return out;
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// What every crash test checks at the end: each event of the feed after the endpoint's creation
// reached the receiver (verified), duplicates carry the event's own webhook-id, and every delivery
// is recorded `delivered`.
void expect_every_event_delivered(const ServerProcess& s, const Endpoint& e) {
  const std::set<std::int64_t> events = feed_after(s, e.cursor_at_creation);
  ASSERT_FALSE(events.empty());
  const bool all_received = e.receiver->wait_for(
      [&](const Received& all) {
        const auto got = received_event_ids(all);
        for (std::int64_t id : events) {
          if (!got.contains(id)) return false;
        }
        return true;
      },
      kPatience);
  const Received all = e.receiver->entries();
  EXPECT_TRUE(all_received) << "received " << received_event_ids(all).size() << " of " << events.size()
                            << " events\n" << e.receiver->log();
  std::map<std::int64_t, int> times;
  for (const auto& r : all) {
    EXPECT_TRUE(r.verified) << r.webhook_id << ": " << r.error;
    ASSERT_TRUE(r.event_id.has_value()) << r.webhook_id;
    EXPECT_TRUE(events.contains(*r.event_id)) << "an event that is not in the feed: " << *r.event_id;
    EXPECT_EQ(r.webhook_id, webhooks::webhook_id(*r.event_id)) << "a duplicate must carry the same webhook-id";
    ++times[*r.event_id];
  }
  int duplicated = 0;
  for (const auto& [id, n] : times) duplicated += n > 1 ? 1 : 0;
  std::printf("[ webhook crash ] %zu events, %zu requests, %d events received more than once\n", events.size(),
              all.size(), duplicated);
  std::map<std::int64_t, std::string> recorded;
  const bool all_recorded = eventually(
      [&] {
        recorded = deliveries_of(s, e.id);
        if (recorded.size() != events.size()) return false;
        for (const auto& [id, status] : recorded) {
          if (status != "delivered") return false;
        }
        return true;
      },
      kPatience);
  EXPECT_TRUE(all_recorded) << recorded.size() << " deliveries recorded for " << events.size() << " events";
  for (std::int64_t id : events) EXPECT_EQ(recorded[id], "delivered") << "event " << id;
}

TEST(WebhookDeliveryCrash, KillNineOfTheDeliveringInstanceOfThreeOnPostgresLosesNoEvent) {
  REQUIRE_REFERENCE_RECEIVER();
  REQUIRE_POSTGRES(pg);
  testing::PgSchema schema(pg);
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) {
    ServerOptions o = server_options();
    o.database = schema.uri();
    servers.push_back(std::make_unique<ServerProcess>(o));
  }
  Endpoint e = endpoint_with_receiver(*servers[0], 200);
  ASSERT_TRUE(e.receiver);
  ASSERT_EQ(admin_of(*servers[1]).post("/v1/accounts", json::object{{"account_id", "kiosk-crash"}}).status, 201u);
  // Events written through every instance; the receiver answers each after 200 ms, so they are in
  // flight for a while.
  int written = 0;
  auto credit_through = [&](ServerProcess& s) {
    const std::string reference = "crash-" + std::to_string(++written);
    const HttpResponse r = admin_of(s).post("/v1/accounts/kiosk-crash/credits",
                                            json::object{{"amount", 1}, {"reference", reference}});
    EXPECT_EQ(r.status, 201u) << r;
  };
  for (int i = 0; i < 30; ++i) credit_through(*servers[i % 3]);
  ASSERT_TRUE(e.receiver->wait_for([](const Received& all) { return all.size() >= 3; }, kPatience)) << e.receiver->log();

  std::size_t victim = servers.size();
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < servers.size(); ++i) {
          if (delivering(*servers[i])) victim = i;
        }
        return victim < servers.size();
      },
      kPatience))
      << "no instance says it delivers";
  const std::size_t received_at_kill = e.receiver->entries().size();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(servers[victim]->stop(SIGKILL), 128 + SIGKILL);
  std::printf("[ webhook crash ] killed instance %zu, the deliverer, after %zu requests\n", victim, received_at_kill);
  std::vector<ServerProcess*> alive;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    if (i != victim) alive.push_back(servers[i].get());
  }
  for (int i = 0; i < 10; ++i) credit_through(*alive[i % 2]);

  // Another instance takes over once the lease has run out, and delivers.
  std::size_t successor = servers.size();
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < servers.size(); ++i) {
          if (i != victim && delivering(*servers[i])) successor = i;
        }
        return successor < servers.size();
      },
      kPatience))
      << "no instance took over";
  std::printf("[ webhook crash ] instance %zu took over %lld ms after the kill\n", successor,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - killed_at)
                                         .count()));
  expect_every_event_delivered(*alive[0], e);
}

TEST(WebhookDeliveryCrash, KillNineOfTheOnlyInstanceOnSqliteThenARestartDeliversEverything) {
  REQUIRE_REFERENCE_RECEIVER();
  ServerProcess server(server_options());
  Endpoint e = endpoint_with_receiver(server, 200);
  ASSERT_TRUE(e.receiver);
  ASSERT_EQ(admin_of(server).post("/v1/accounts", json::object{{"account_id", "kiosk-crash"}}).status, 201u);
  for (int i = 0; i < 20; ++i) {
    const HttpResponse r = admin_of(server).post(
        "/v1/accounts/kiosk-crash/credits", json::object{{"amount", 1}, {"reference", "crash-" + std::to_string(i)}});
    ASSERT_EQ(r.status, 201u) << r;
  }
  ASSERT_TRUE(e.receiver->wait_for([](const Received& all) { return all.size() >= 3; }, kPatience)) << e.receiver->log();
  ASSERT_EQ(server.stop(SIGKILL), 128 + SIGKILL);
  server.restart();
  expect_every_event_delivered(server, e);
}

}  // namespace
}  // namespace tollgate::httptest
