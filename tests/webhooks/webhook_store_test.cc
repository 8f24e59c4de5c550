// The webhook endpoints' conformance suite: what every store backend does with the webhook slice's
// commands — decided in the ledger's batches, written by each dialect's writer, read back through
// webhooks::WebhookReads — on a real SQLite file and a real PostgreSQL schema (CI). Time is a
// ManualClock (the store's clock), so the rotation window is crossed without waiting a day.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "slices.h"
#include "store/store.h"
#include "support/backends.h"
#include "webhooks/signature.h"
#include "webhooks/webhook.h"

namespace tollgate {
namespace {

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))

class WebhookStoreConformance : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.coord_prune_interval_ms = 0;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }
  void TearDown() override {
    ledger_.reset();
    store_.reset();
  }

  Result<EndpointOutcome> run(Command c) {
    CommandResult r = ledger_->run(std::move(c));
    if (!r) return r.error();
    return std::get<EndpointOutcome>(r.value());
  }
  Result<EndpointOutcome> create(std::string url, std::optional<std::string> account = std::nullopt) {
    CreateEndpointCommand c;
    c.url = std::move(url);
    c.account_id = std::move(account);
    return run(std::move(c));
  }
  webhooks::Endpoint stored(const std::string& id) {
    auto r = store_->webhooks().get_endpoint(id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : webhooks::Endpoint{};
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

TEST_P(WebhookStoreConformance, ACreatedEndpointIsStoredWithANewIdAndSecretAndReadBackWhole) {
  CreateEndpointCommand c;
  c.url = "https://hooks.example/tollgate";
  c.event_types = {"balance_low", "balance_depleted"};
  c.description = "kiosk owner";
  auto made = run(c);
  ASSERT_OK(made);
  const webhooks::Endpoint& e = made->endpoint;
  EXPECT_EQ(e.endpoint_id.substr(0, 3), "we_");
  EXPECT_EQ(e.endpoint_id.size(), 19u);
  EXPECT_EQ(e.secret.substr(0, 6), "whsec_");
  EXPECT_EQ(webhooks::secret_key(e.secret)->size(), limits::kWebhookSecretBytes);
  EXPECT_EQ(e.status, webhooks::EndpointStatus::enabled);
  EXPECT_EQ(e.created_at_ms, clock_.now_ms());
  EXPECT_EQ(stored(e.endpoint_id), e);
  // Another endpoint: another id, another secret.
  auto other = run(c);
  ASSERT_OK(other);
  EXPECT_NE(other->endpoint.endpoint_id, e.endpoint_id);
  EXPECT_NE(other->endpoint.secret, e.secret);
}

TEST_P(WebhookStoreConformance, AnAccountFilterMustNameAnAccountOneMadeEarlierInTheSameBatchCounts) {
  EXPECT_CODE(create("https://h.example/", "nobody"), Code::not_found);
  auto page = store_->webhooks().list_endpoints(PageRequest{});
  ASSERT_OK(page);
  EXPECT_TRUE(page->items.empty());
  ASSERT_OK(ledger_->create_account(CreateAccountCommand{"kiosk-1", 0, std::nullopt}));
  auto made = create("https://h.example/", "kiosk-1");
  ASSERT_OK(made);
  EXPECT_EQ(stored(made->endpoint.endpoint_id).account_id, std::optional<std::string>("kiosk-1"));
  // One batch: the account, then an endpoint filtered on it (ids and secret as the ledger fills them).
  CreateEndpointCommand c;
  c.url = "https://h.example/same-batch";
  c.account_id = "kiosk-2";
  c.endpoint_id = "we_00000000000000b2";
  c.secret = webhooks::secret_from_random(std::string(limits::kWebhookSecretBytes, '\x07'));
  const std::vector<Command> batch{CreateAccountCommand{"kiosk-2", 0, std::nullopt}, c};
  std::vector<CommandResult> results;
  ASSERT_OK(store_->apply(batch, results));
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[1].ok()) << results[1].error().detail;
  EXPECT_EQ(stored("we_00000000000000b2").account_id, std::optional<std::string>("kiosk-2"));
}

TEST_P(WebhookStoreConformance, UpdatesChangeWhatTheyNameAndDeletesForget) {
  auto made = create("https://h.example/a");
  ASSERT_OK(made);
  const std::string id = made->endpoint.endpoint_id;
  clock_.advance_ms(1'000);
  webhooks::UpdateEndpointCommand u;
  u.endpoint_id = id;
  u.status = webhooks::EndpointStatus::disabled;
  u.event_types = std::vector<std::string>{"credited"};
  auto changed = run(u);
  ASSERT_OK(changed);
  webhooks::Endpoint e = stored(id);
  EXPECT_EQ(e.status, webhooks::EndpointStatus::disabled);
  EXPECT_EQ(e.event_types, std::vector<std::string>{"credited"});
  EXPECT_EQ(e.url, "https://h.example/a");
  EXPECT_EQ(e.secret, made->endpoint.secret);
  EXPECT_EQ(e.updated_at_ms, e.created_at_ms + 1'000);
  u = {};
  u.endpoint_id = id;
  u.event_types = std::vector<std::string>{};  // every type again
  u.status = webhooks::EndpointStatus::enabled;
  ASSERT_OK(run(u));
  EXPECT_TRUE(stored(id).event_types.empty());
  EXPECT_EQ(stored(id).status, webhooks::EndpointStatus::enabled);

  auto deleted = run(webhooks::DeleteEndpointCommand{id});
  ASSERT_OK(deleted);
  EXPECT_TRUE(deleted->deleted);
  EXPECT_CODE(store_->webhooks().get_endpoint(id), Code::not_found);
  EXPECT_CODE(run(webhooks::DeleteEndpointCommand{id}), Code::not_found);
  EXPECT_CODE(run(u), Code::not_found);
  EXPECT_CODE(run(webhooks::RotateEndpointSecretCommand{id, ""}), Code::not_found);
}

TEST_P(WebhookStoreConformance, ARotatedSecretSignsBesideTheNewOneFor24HoursThenNoMore) {
  auto made = create("https://h.example/r");
  ASSERT_OK(made);
  const std::string id = made->endpoint.endpoint_id;
  const std::string old_secret = made->endpoint.secret;
  clock_.advance_ms(5'000);
  const std::int64_t rotated_at = clock_.now_ms();
  auto rotated = run(webhooks::RotateEndpointSecretCommand{id, ""});
  ASSERT_OK(rotated);
  const std::string new_secret = rotated->endpoint.secret;
  EXPECT_NE(new_secret, old_secret);
  const webhooks::Endpoint e = stored(id);
  EXPECT_EQ(e.previous_secret, std::optional<std::string>(old_secret));
  EXPECT_EQ(e.previous_secret_until_ms, std::optional<std::int64_t>(rotated_at + limits::kWebhookPreviousSecretMs));

  // Within the window a delivery carries both signatures; a receiver with either secret accepts it.
  const std::string body = R"({"type":"credited"})";
  auto header_at = [&](std::int64_t now_ms) {
    const auto secrets = webhooks::signing_secrets(stored(id), now_ms);
    return webhooks::signature_header(secrets, "evt_1", now_ms / 1000, body);
  };
  clock_.advance_ms(limits::kWebhookPreviousSecretMs - 1);
  std::string header = header_at(clock_.now_ms());
  EXPECT_TRUE(webhooks::verify(header, old_secret, "evt_1", clock_.now_ms() / 1000, body));
  EXPECT_TRUE(webhooks::verify(header, new_secret, "evt_1", clock_.now_ms() / 1000, body));
  // From 24 h on, only the new one.
  clock_.advance_ms(1);
  header = header_at(clock_.now_ms());
  EXPECT_FALSE(webhooks::verify(header, old_secret, "evt_1", clock_.now_ms() / 1000, body));
  EXPECT_TRUE(webhooks::verify(header, new_secret, "evt_1", clock_.now_ms() / 1000, body));
  // And a read no longer shows the old secret or its window's end (which has passed).
  EXPECT_EQ(stored(id).previous_secret, std::nullopt);
  EXPECT_EQ(stored(id).previous_secret_until_ms, std::nullopt);

  // Two rotations in a row: the first secret is gone at once (at most two sign).
  ASSERT_OK(run(webhooks::RotateEndpointSecretCommand{id, ""}));
  auto again = run(webhooks::RotateEndpointSecretCommand{id, ""});
  ASSERT_OK(again);
  const auto secrets = webhooks::signing_secrets(stored(id), clock_.now_ms());
  ASSERT_EQ(secrets.size(), 2u);
  EXPECT_EQ(secrets[0], again->endpoint.secret);
  EXPECT_NE(secrets[1], new_secret);
}

TEST_P(WebhookStoreConformance, NoMoreThanTheLimitOfEndpointsEvenInOneBatch) {
  std::vector<Command> creates;
  for (std::int64_t i = 0; i < limits::kWebhookEndpointsMax + 3; ++i) {
    CreateEndpointCommand c;
    c.url = "https://h.example/" + std::to_string(i);
    creates.push_back(c);
  }
  int made = 0, refused = 0;
  for (Command& c : creates) {
    auto r = run(std::move(c));
    if (r.ok()) ++made;
    else {
      ++refused;
      EXPECT_CODE(r, Code::invalid_request);
      EXPECT_NE(r.error().detail.find("delete one first"), std::string::npos) << r.error().detail;
    }
  }
  EXPECT_EQ(made, limits::kWebhookEndpointsMax);
  EXPECT_EQ(refused, 3);
  // Paged in creation order, every one once.
  std::set<std::string> seen;
  PageRequest page;
  page.limit = 7;
  std::int64_t last_created = 0;
  for (;;) {
    auto p = store_->webhooks().list_endpoints(page);
    ASSERT_OK(p);
    for (const auto& e : p->items) {
      EXPECT_TRUE(seen.insert(e.endpoint_id).second);
      EXPECT_GE(e.created_at_ms, last_created);
      last_created = e.created_at_ms;
    }
    if (!p->has_more) break;
    page.starting_after = p->items.back().endpoint_id;
  }
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), limits::kWebhookEndpointsMax);
  page.starting_after = "we_ffffffffffffffff";
  EXPECT_CODE(store_->webhooks().list_endpoints(page), Code::invalid_request);
  // A delete makes room for one more.
  ASSERT_OK(run(webhooks::DeleteEndpointCommand{*seen.begin()}));
  ASSERT_OK(create("https://h.example/again"));
  EXPECT_CODE(create("https://h.example/too-many"), Code::invalid_request);
}

TEST_P(WebhookStoreConformance, BadCommandsAreRefusedByNameBeforeTheBatch) {
  auto bad_url = create("ftp://h.example/");
  EXPECT_CODE(bad_url, Code::invalid_request);
  EXPECT_NE(bad_url.error().detail.find("url"), std::string::npos);
  CreateEndpointCommand c;
  c.url = "https://h.example/";
  c.event_types = {"credited", "credited"};
  EXPECT_CODE(run(c), Code::invalid_request);
  c.event_types = {};
  c.description = std::string(limits::kWebhookDescriptionBytesMax + 1, 'd');
  EXPECT_CODE(run(c), Code::invalid_request);
  auto page = store_->webhooks().list_endpoints(PageRequest{});
  ASSERT_OK(page);
  EXPECT_TRUE(page->items.empty());
}

// The deliverer's records are fenced: once a deliverer with fence F recorded progress, one holding
// an older fence (it lost the delivery lock) is refused, and so is a record whose cursor_from is not
// the endpoint's cursor (a replay or another deliverer moved it) — nothing of either is written.
TEST_P(WebhookStoreConformance, ARecordWithAnOlderFenceOrAStaleCursorIsRefusedAndChangesNothing) {
  auto made = create("https://h.example/fenced");
  ASSERT_OK(made);
  const std::string id = made->endpoint.endpoint_id;
  const std::int64_t start = made->endpoint.delivery_cursor;
  ASSERT_OK(ledger_->create_account(CreateAccountCommand{"kiosk-f", 0, std::nullopt}));
  ASSERT_OK(ledger_->credit(CreditCommand{"kiosk-f", 5, "fence-1"}));
  ASSERT_OK(ledger_->credit(CreditCommand{"kiosk-f", 6, "fence-2"}));
  auto feed = ledger_->read_feed(start, 10);
  ASSERT_OK(feed);
  ASSERT_EQ(feed->events.size(), 2u);  // the two credits (making an account writes no event)
  auto attempts_of = [&](const std::vector<Event>& events, bool delivered) {
    std::vector<webhooks::DeliveryAttempt> out;
    for (const Event& ev : events) {
      webhooks::DeliveryAttempt a;
      a.event_id = ev.event_id;
      a.event_type = std::string(event_type_name(ev.type));
      a.account_id = ev.account_id;
      a.event_at_ms = ev.at_ms;
      a.at_ms = clock_.now_ms();
      a.delivered = delivered;
      a.status_code = delivered ? 200 : 500;
      a.error = delivered ? "" : "answered HTTP 500";
      out.push_back(a);
    }
    return out;
  };
  auto record = [&](std::int64_t fence, std::optional<std::int64_t> from, std::int64_t to,
                    std::vector<webhooks::DeliveryAttempt> attempts) {
    webhooks::RecordDeliveriesCommand c;
    c.endpoint_id = id;
    c.fence = fence;
    c.cursor_from = from;
    c.cursor_to = to;
    c.attempts = std::move(attempts);
    return ledger_->run(Command(std::move(c)));
  };
  auto deliveries = [&] {
    auto page = ledger_->list_webhook_deliveries(id, std::nullopt, PageRequest{});
    EXPECT_TRUE(page.ok()) << page.error().detail;
    return page.ok() ? page->items : std::vector<webhooks::Delivery>{};
  };
  const std::int64_t head = feed->events.back().event_id;
  // The first event, by the deliverer with fence 7: recorded, the cursor moved.
  CommandResult first = record(7, start, feed->events[0].event_id, attempts_of({feed->events[0]}, true));
  ASSERT_TRUE(first.ok()) << first.error().detail;
  EXPECT_EQ(std::get<webhooks::DeliveriesOutcome>(first.value()).recorded, 1);
  const webhooks::Endpoint after_first = stored(id);
  EXPECT_EQ(after_first.delivery_cursor, feed->events[0].event_id);
  EXPECT_EQ(after_first.delivery_fence, 7);
  const auto deliveries_after_first = deliveries();
  ASSERT_EQ(deliveries_after_first.size(), 1u);

  // Fence 6 (lost the lock): refused, whatever its cursor.
  CommandResult older = record(6, feed->events[0].event_id, head, attempts_of({feed->events[1]}, false));
  ASSERT_FALSE(older.ok());
  EXPECT_CODE(older, Code::lock_lost);
  EXPECT_EQ(stored(id), after_first);
  EXPECT_EQ(deliveries(), deliveries_after_first);

  // Fence 7 again with the cursor it started from (stale): refused as a conflict.
  CommandResult stale = record(7, start, head, attempts_of(feed->events, false));
  ASSERT_FALSE(stale.ok());
  EXPECT_CODE(stale, Code::conflict);
  EXPECT_EQ(stored(id), after_first);
  EXPECT_EQ(deliveries(), deliveries_after_first);

  // A newer fence from the right cursor is taken, and from then on fence 7 is refused too.
  CommandResult newer = record(8, feed->events[0].event_id, head, attempts_of({feed->events[1]}, false));
  ASSERT_TRUE(newer.ok()) << newer.error().detail;
  EXPECT_EQ(stored(id).delivery_cursor, head);
  EXPECT_EQ(stored(id).delivery_fence, 8);
  EXPECT_CODE(record(7, std::nullopt, 0, attempts_of({feed->events[1]}, true)), Code::lock_lost);
  EXPECT_EQ(deliveries().size(), 2u);
  for (const auto& d : deliveries()) {
    if (d.event_id == head) {
      EXPECT_EQ(d.status, webhooks::DeliveryStatus::pending);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, WebhookStoreConformance, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

}  // namespace
}  // namespace tollgate
