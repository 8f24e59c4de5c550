// tollgate's webhook signatures checked by an implementation nobody here wrote: deliveries signed by
// webhooks::signature_header and POSTed by tollgate's own HTTP client (jobs::ProviderClient, with
// the webhook-* headers) to a real receiver process built on the reference library of Standard
// Webhooks (tests/webhooks/receiver/receiver.mjs, `standardwebhooks` 1.3.0 from npm;
// support/reference_receiver.h). It accepts every delivery — one secret, and both sides of a
// rotation — and refuses one whose body, secret or webhook-id changed. The receiver's retry
// behaviours, which the delivery tests rely on, are checked here too.
//
// Needs the receiver (TOLLGATE_WEBHOOK_RECEIVER, set by scripts/test after tests/webhooks/receiver/install): skipped
// without it, failed under TOLLGATE_REQUIRE_WEBHOOK_RECEIVER=1. The library checks the
// webhook-timestamp against the real clock (5 minutes either way), so these deliveries are stamped
// with the wall clock.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "core/limits.h"
#include "jobs/provider_client.h"
#include "support/reference_receiver.h"
#include "webhooks/signature.h"
#include "webhooks/webhook.h"

namespace tollgate::webhooks {
namespace {

using ReceiverOptions = testing::ReferenceReceiverOptions;
using Received = std::vector<testing::ReceivedRequest>;

std::string secret_of_byte(char byte) { return secret_from_random(std::string(limits::kWebhookSecretBytes, byte)); }

std::int64_t wall_clock_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One delivery as the worker sends it: the body and its three webhook-* headers.
struct Delivery {
  std::string webhook_id;
  std::int64_t timestamp_s = 0;
  std::string body;
  std::string signature;  // the webhook-signature header
};

Delivery signed_delivery(const std::vector<std::string>& secrets, std::int64_t event_id, const std::string& type,
                         std::int64_t timestamp_s = wall_clock_s()) {
  Delivery d;
  d.webhook_id = webhook_id(event_id);
  d.timestamp_s = timestamp_s;
  d.body = R"({"type":")" + type + R"(","timestamp":"2026-01-01T00:00:00.000Z","data":{"event_id":)" +
           std::to_string(event_id) + R"(,"type":")" + type + R"(","account_id":"kiosk-7","note":"café — ü"}})";
  d.signature = signature_header(secrets, d.webhook_id, d.timestamp_s, d.body);
  return d;
}

// POSTs the delivery with tollgate's HTTP client; what the transport saw (at most 10 s).
jobs::Exchange post(const testing::ReferenceReceiver& receiver, const Delivery& d) {
  jobs::ProviderClient client({});
  jobs::ProviderRequest request;
  request.url = receiver.url();
  request.body = d.body;
  request.headers = {{"webhook-id", d.webhook_id},
                     {"webhook-timestamp", std::to_string(d.timestamp_s)},
                     {"webhook-signature", d.signature}};
  request.timeout = std::chrono::seconds(10);
  std::promise<jobs::Exchange> answer;
  auto future = answer.get_future();
  client.start(std::move(request), [&answer](jobs::Exchange e) { answer.set_value(std::move(e)); });
  return future.get();  // the client's time-out bounds the wait
}

bool is_2xx(const jobs::Exchange& e) { return e.kind == jobs::Exchange::Kind::answered && e.status / 100 == 2; }

// The receiver's log entry of the only request with this webhook-id.
testing::ReceivedRequest only_entry_of(const testing::ReferenceReceiver& receiver, const std::string& id) {
  Received found;
  for (const auto& e : receiver.entries()) {
    if (e.webhook_id == id) found.push_back(e);
  }
  EXPECT_EQ(found.size(), 1u) << id;
  return found.empty() ? testing::ReceivedRequest{} : found.front();
}

const std::string kOld = secret_of_byte('\x01');
const std::string kNew = secret_of_byte('\x02');
const std::string kOther = secret_of_byte('\x03');

TEST(WebhookReferenceReceiver, AcceptsEveryDeliverySignedWithItsSecret) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}});
  const std::vector<Delivery> deliveries{signed_delivery({kNew}, 1, "account_created"),
                                         signed_delivery({kNew}, 2, "credited"),
                                         signed_delivery({kNew}, 9007199254740991, "balance_low")};
  for (const Delivery& d : deliveries) {
    const jobs::Exchange answer = post(receiver, d);
    EXPECT_TRUE(is_2xx(answer)) << d.webhook_id << ": " << answer.status << " " << answer.body;
    const auto entry = only_entry_of(receiver, d.webhook_id);
    EXPECT_TRUE(entry.verified) << d.webhook_id << ": " << entry.error;
    EXPECT_EQ(entry.answered, 200);
    EXPECT_EQ(entry.timestamp_s, d.timestamp_s);
    EXPECT_EQ(entry.attempt_seen, 1);
  }
  const Received all = receiver.entries();
  ASSERT_EQ(all.size(), 3u) << receiver.log();
  EXPECT_EQ(all[1].type, "credited");
  EXPECT_EQ(all[1].event_id, 2);
  EXPECT_EQ(all[2].event_id, 9007199254740991);
}

TEST(WebhookReferenceReceiver, DuringARotationAReceiverKnowingOnlyTheNewSecretOrOnlyTheOldOneAccepts) {
  REQUIRE_REFERENCE_RECEIVER();
  // The header carries two signatures, the previous secret's and the new one's.
  const Delivery d = signed_delivery({kOld, kNew}, 5, "credited");
  ASSERT_NE(d.signature.find(' '), std::string::npos) << d.signature;
  for (const std::string& known : {kNew, kOld}) {
    testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {known}});
    const jobs::Exchange answer = post(receiver, d);
    EXPECT_TRUE(is_2xx(answer)) << answer.status << " " << answer.body;
    const auto entry = only_entry_of(receiver, d.webhook_id);
    EXPECT_TRUE(entry.verified) << entry.error;
  }
}

TEST(WebhookReferenceReceiver, RefusesABodyChangedAfterSigning) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}});
  Delivery d = signed_delivery({kNew}, 6, "debited");
  d.body.replace(d.body.find("kiosk-7"), 7, "kiosk-8");
  const jobs::Exchange answer = post(receiver, d);
  EXPECT_EQ(answer.status, 400u) << answer.body;
  const auto entry = only_entry_of(receiver, d.webhook_id);
  EXPECT_FALSE(entry.verified);
  EXPECT_EQ(entry.error, "No matching signature found");
  EXPECT_EQ(entry.answered, 400);
}

TEST(WebhookReferenceReceiver, RefusesASignatureMadeWithAnotherSecret) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}});
  const Delivery d = signed_delivery({kOther}, 7, "credited");
  EXPECT_EQ(post(receiver, d).status, 400u);
  const auto entry = only_entry_of(receiver, d.webhook_id);
  EXPECT_FALSE(entry.verified);
  EXPECT_EQ(entry.error, "No matching signature found");
}

TEST(WebhookReferenceReceiver, RefusesAChangedWebhookId) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}});
  Delivery d = signed_delivery({kNew}, 8, "credited");
  d.webhook_id = webhook_id(80);
  EXPECT_EQ(post(receiver, d).status, 400u);
  const auto entry = only_entry_of(receiver, "evt_80");
  EXPECT_FALSE(entry.verified);
  EXPECT_EQ(entry.event_id, 8);
}

// What the delivery tests must know: the library's time-stamp check is fixed at 5 minutes of the
// real clock, both ways (its verify() has no option for it).
TEST(WebhookReferenceReceiver, RefusesATimestampMoreThanFiveMinutesFromTheRealClock) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}});
  const Delivery old = signed_delivery({kNew}, 9, "credited", wall_clock_s() - 10 * 60);
  const Delivery ahead = signed_delivery({kNew}, 10, "credited", wall_clock_s() + 10 * 60);
  const Delivery recent = signed_delivery({kNew}, 11, "credited", wall_clock_s() - 60);
  EXPECT_EQ(post(receiver, old).status, 400u);
  EXPECT_EQ(only_entry_of(receiver, old.webhook_id).error, "Message timestamp too old");
  EXPECT_EQ(post(receiver, ahead).status, 400u);
  EXPECT_EQ(only_entry_of(receiver, ahead.webhook_id).error, "Message timestamp too new");
  EXPECT_EQ(post(receiver, recent).status, 200u);
}

TEST(WebhookReferenceReceiver, DropsThenFailsTheFirstAttemptsOfEachWebhookIdThenAccepts) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}, .drop_first = 1, .fail_first = 2});
  const Delivery d = signed_delivery({kNew}, 12, "credited");
  EXPECT_EQ(post(receiver, d).kind, jobs::Exchange::Kind::connection_lost);
  EXPECT_EQ(post(receiver, d).status, 500u);
  EXPECT_EQ(post(receiver, d).status, 500u);
  EXPECT_EQ(post(receiver, d).status, 200u);
  EXPECT_EQ(post(receiver, signed_delivery({kNew}, 13, "credited")).kind, jobs::Exchange::Kind::connection_lost)
      << "counted per webhook-id";

  const Received all = receiver.entries();
  ASSERT_EQ(all.size(), 5u) << receiver.log();
  std::vector<std::pair<int, int>> attempts_answers;
  for (const auto& e : all) {
    EXPECT_TRUE(e.verified) << e.error;
    attempts_answers.emplace_back(e.attempt_seen, e.answered);
  }
  EXPECT_EQ(attempts_answers, (std::vector<std::pair<int, int>>{{1, 0}, {2, 500}, {3, 500}, {4, 200}, {1, 0}}));
  EXPECT_TRUE(all[0].dropped());
}

TEST(WebhookReferenceReceiver, AnswersItsConfiguredStatusAfterItsConfiguredDelay) {
  REQUIRE_REFERENCE_RECEIVER();
  testing::ReferenceReceiver receiver(ReceiverOptions{.secrets = {kNew}, .slow_ms = 300, .status = 410});
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(post(receiver, signed_delivery({kNew}, 14, "credited")).status, 410u);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(300));
  // A request that does not verify is answered 400 whatever the configured status.
  EXPECT_EQ(post(receiver, signed_delivery({kOther}, 15, "credited")).status, 400u);
  EXPECT_TRUE(receiver.wait_for([](const Received& all) { return all.size() == 2; }, std::chrono::seconds(1)));
}

}  // namespace
}  // namespace tollgate::webhooks
