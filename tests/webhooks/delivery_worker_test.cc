// The deliverer (webhooks/delivery_worker.h) in-process: a Ledger on a real store (a SQLite file;
// a PostgreSQL schema in CI) and the worker sending to real HTTP receivers on 127.0.0.1 — the
// reference receiver (the `standardwebhooks` library in a Node process) where signatures are
// checked, and a scripted receiver written here (Boost.Beast) where the answers follow a script and
// time is a ManualClock: the reference library refuses time stamps 5 minutes off the real clock,
// and the retry schedule runs for hours. The worker's scans and renewals are made small
// (fast_options) so that a retry made due by advancing the clock is sent within milliseconds.
//
// What is asserted: every event reaches the receiver, signed and verified, with webhook-id
// evt_{event_id}; filters deliver only what they name; failed, dropped and slow attempts are
// retried on the schedule (a failure at T is due in [T+4.5 s, T+5.5 s]) and recorded (attempts,
// status code, error); the 8th failure fails the delivery; 5 days of failures disable the endpoint;
// a slow endpoint does not hold up another; a replay sends the same webhook-ids again.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "http/json_codec.h"
#include "ledger/ledger.h"
#include "slices.h"
#include "store/store.h"
#include "support/backends.h"
#include "support/reference_receiver.h"
#include "webhooks/delivery_worker.h"
#include "webhooks/signature.h"
#include "webhooks/webhook.h"

namespace tollgate::webhooks {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail

// --- a scripted receiver ----------------------------------------------------------------------------

// What the scripted receiver saw of one request.
struct ScriptedRequest {
  std::string path;
  std::string webhook_id, webhook_timestamp, webhook_signature, body;
  int attempt_seen = 0;  // requests with this path and webhook-id so far, this one included
};

// What it does with one request.
struct ScriptedAnswer {
  unsigned status = 200;  // 0: closes the connection without answering
  int delay_ms = 0;       // waits this long first (other connections are served meanwhile)
};

// An HTTP/1.1 receiver on its own thread (C++20 coroutines on one io_context): records every
// request, then answers as `script` says.
class ScriptedReceiver {
 public:
  using Script = std::function<ScriptedAnswer(const ScriptedRequest&)>;

  explicit ScriptedReceiver(Script script) : script_(std::move(script)) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen(1024);
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ScriptedReceiver() {
    io_.stop();
    thread_.join();
  }

  std::string url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<ScriptedRequest> requests(const std::string& path = "") const {
    std::lock_guard lock(mu_);
    std::vector<ScriptedRequest> out;
    for (const auto& r : requests_) {
      if (path.empty() || r.path == path) out.push_back(r);
    }
    return out;
  }
  int answered(const std::string& path) const {
    std::lock_guard lock(mu_);
    auto it = answered_.find(path);
    return it == answered_.end() ? 0 : it->second;
  }
  // Waits until `done(requests)` holds; false after `timeout`.
  bool wait_for(const std::function<bool(const std::vector<ScriptedRequest>&)>& done,
                milliseconds timeout = milliseconds(10'000)) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done(requests_); });
  }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(io_, serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      bhttp::request<bhttp::string_body> request;
      auto [ec, n] = co_await bhttp::async_read(socket, buffer, request, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      ScriptedRequest seen{std::string(request.target()), std::string(request["webhook-id"]),
                           std::string(request["webhook-timestamp"]), std::string(request["webhook-signature"]),
                           request.body()};
      {
        std::lock_guard lock(mu_);
        seen.attempt_seen = ++attempts_[{seen.path, seen.webhook_id}];
      }
      const ScriptedAnswer answer = script_(seen);
      {
        std::lock_guard lock(mu_);
        requests_.push_back(seen);
        cv_.notify_all();
      }
      if (answer.delay_ms > 0) {
        asio::steady_timer timer(io_, milliseconds(answer.delay_ms));
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      if (answer.status == 0) co_return;  // the socket closes, nothing answered
      bhttp::response<bhttp::string_body> out{static_cast<bhttp::status>(answer.status), 11};
      out.body() = "{}";
      out.keep_alive(true);
      out.prepare_payload();
      auto [wec, wn] = co_await bhttp::async_write(socket, out, asio::as_tuple(asio::use_awaitable));
      if (wec) co_return;
      std::lock_guard lock(mu_);
      ++answered_[seen.path];
      cv_.notify_all();
    }
  }

  asio::io_context io_;  // first: destroyed last
  tcp::acceptor acceptor_{io_};
  Script script_;
  unsigned short port_ = 0;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<ScriptedRequest> requests_;                          // protected by mu_
  std::map<std::pair<std::string, std::string>, int> attempts_;   // protected by mu_
  std::map<std::string, int> answered_;                            // protected by mu_
  std::thread thread_;
};

ScriptedAnswer ok() { return {}; }

std::set<std::string> ids_of(const std::vector<ScriptedRequest>& requests) {
  std::set<std::string> out;
  for (const auto& r : requests) out.insert(r.webhook_id);
  return out;
}

// --- the fixture --------------------------------------------------------------------------------------

// Polls `done` every 10 ms of real time; false after `timeout`.
bool eventually(const std::function<bool()>& done, milliseconds timeout = milliseconds(10'000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

class DeliveryWorkerTest : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void TearDown() override {
    if (worker_) worker_->stop();
    worker_.reset();
    ledger_.reset();
    store_.reset();
  }

  // The ledger on a fresh store, both on `clock` (manual_clock_ unless a test needs the real one).
  void open(const Clock& clock) {
    clock_ = &clock;
    store_ = GetParam().open_fresh(clock);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.coord_prune_interval_ms = 0;
    ledger_ = std::make_unique<Ledger>(*store_, clock, options);
  }

  static DeliveryWorkerOptions fast_options() {
    DeliveryWorkerOptions o;
    o.owner = "delivery-worker-test";
    o.body = http::webhook_body;
    o.refresh_ms = 50;
    o.due_scan_ms = 20;
    o.idle_wait_ms = 200;
    o.lock_renew_ms = 100;
    o.lock_ttl_ms = 1'000;
    o.timeout_ms = 2'000;
    o.seed = 28;
    return o;
  }
  void start_worker(DeliveryWorkerOptions options = fast_options()) {
    worker_ = std::make_unique<DeliveryWorker>(*ledger_, *clock_, std::move(options));
    worker_->start();
  }

  Endpoint endpoint(const std::string& url, std::vector<std::string> types = {},
                    std::optional<std::string> account = std::nullopt) {
    CreateEndpointCommand c;
    c.url = url;
    c.event_types = std::move(types);
    c.account_id = std::move(account);
    CommandResult r = ledger_->run(Command(std::move(c)));
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? std::get<EndpointOutcome>(r.value()).endpoint : Endpoint{};
  }
  void account(const std::string& id) {
    auto r = ledger_->create_account(CreateAccountCommand{id, 1'000, std::nullopt});
    ASSERT_TRUE(r.ok()) << r.error().detail;
  }
  // Credits (or debits, when amount < 0) `account`; the event it wrote.
  std::int64_t move(const std::string& account, std::int64_t amount) {
    const std::string reference = "ref-" + std::to_string(++references_);
    if (amount >= 0) {
      auto r = ledger_->credit(CreditCommand{account, amount, reference});
      EXPECT_TRUE(r.ok()) << r.error().detail;
    } else {
      DebitCommand d;
      d.account_id = account;
      d.amount = -amount;
      d.reference = reference;
      auto r = ledger_->debit(d);
      EXPECT_TRUE(r.ok()) << r.error().detail;
    }
    auto head = ledger_->last_event_id();
    EXPECT_TRUE(head.ok());
    return head.ok() ? *head : 0;
  }
  std::vector<webhooks::Delivery> deliveries(const std::string& endpoint_id) {
    PageRequest page;
    page.limit = 100;
    auto r = ledger_->list_webhook_deliveries(endpoint_id, std::nullopt, page);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->items : std::vector<webhooks::Delivery>{};
  }
  std::optional<webhooks::Delivery> delivery(const std::string& endpoint_id, std::int64_t event_id) {
    for (webhooks::Delivery& d : deliveries(endpoint_id)) {
      if (d.event_id == event_id) return d;
    }
    return std::nullopt;
  }
  // Waits until the event's delivery has been recorded with `attempts` attempts.
  std::optional<webhooks::Delivery> recorded(const std::string& endpoint_id, std::int64_t event_id, std::int64_t attempts) {
    std::optional<webhooks::Delivery> found;
    eventually([&] {
      found = delivery(endpoint_id, event_id);
      return found && found->attempts >= attempts;
    });
    return found;
  }

  ManualClock manual_clock_;
  SystemClock system_clock_;
  const Clock* clock_ = nullptr;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<DeliveryWorker> worker_;
  int references_ = 0;
};

// --- signed and verified -----------------------------------------------------------------------------

TEST_P(DeliveryWorkerTest, EveryEventReachesAReferenceReceiverVerifiedWithWebhookIdEvtEventId) {
  REQUIRE_REFERENCE_RECEIVER();
  open(system_clock_);  // the library checks time stamps against the real clock
  const Endpoint e = endpoint("http://127.0.0.1:1/placeholder");
  testing::ReferenceReceiver receiver(testing::ReferenceReceiverOptions{.secrets = {e.secret}});
  UpdateEndpointCommand u;
  u.endpoint_id = e.endpoint_id;
  u.url = receiver.url();
  ASSERT_TRUE(ledger_->run(Command(u)).ok());
  account("kiosk-1");
  std::vector<std::int64_t> events;
  for (int i = 1; i <= 5; ++i) events.push_back(move("kiosk-1", i % 2 == 0 ? -i : 10 * i));
  start_worker();
  ASSERT_TRUE(receiver.wait_for([&](const auto& all) { return all.size() >= events.size(); }))
      << receiver.log();  // the five moves (making an account writes no event)

  std::set<std::int64_t> event_ids;
  for (const testing::ReceivedRequest& r : receiver.entries()) {
    EXPECT_TRUE(r.verified) << r.webhook_id << ": " << r.error;
    ASSERT_TRUE(r.event_id.has_value()) << r.webhook_id;
    EXPECT_EQ(r.webhook_id, webhook_id(*r.event_id));
    EXPECT_EQ(r.webhook_id, "evt_" + std::to_string(*r.event_id));
    EXPECT_EQ(r.answered, 200);
    EXPECT_EQ(r.attempt_seen, 1) << "sent once: " << r.webhook_id;
    event_ids.insert(*r.event_id);
  }
  for (std::int64_t id : events) EXPECT_TRUE(event_ids.contains(id)) << id;
  for (std::int64_t id : events) {
    const auto d = recorded(e.endpoint_id, id, 1);
    ASSERT_TRUE(d.has_value()) << id;
    EXPECT_EQ(d->status, DeliveryStatus::delivered);
    EXPECT_EQ(d->attempts, 1);
    EXPECT_EQ(d->last_status_code, std::optional<std::int64_t>(200));
    EXPECT_EQ(d->last_error, "");
  }
}

// --- filters -------------------------------------------------------------------------------------------

TEST_P(DeliveryWorkerTest, TypeAndAccountFiltersDeliverOnlyWhatTheyName) {
  open(manual_clock_);
  ScriptedReceiver receiver([](const ScriptedRequest&) { return ok(); });
  const Endpoint all = endpoint(receiver.url("/all"));
  account("kiosk-a");
  account("kiosk-b");
  const Endpoint debits = endpoint(receiver.url("/debits"), {"debited"});
  const Endpoint of_b = endpoint(receiver.url("/b"), {}, "kiosk-b");
  const std::int64_t a_credit = move("kiosk-a", 50);
  const std::int64_t a_debit = move("kiosk-a", -5);
  const std::int64_t b_credit = move("kiosk-b", 70);
  const std::int64_t b_debit = move("kiosk-b", -7);
  start_worker();
  // The unfiltered endpoint gets all four moves; once it has, and the filtered ones' cursors have
  // passed the last event, nothing more is coming to them.
  ASSERT_TRUE(eventually([&] { return receiver.requests("/all").size() >= 4; })) << receiver.requests("/all").size();
  ASSERT_TRUE(eventually([&] {
    auto d = ledger_->get_webhook_endpoint(debits.endpoint_id);
    auto b = ledger_->get_webhook_endpoint(of_b.endpoint_id);
    return d.ok() && b.ok() && d->delivery_cursor >= b_debit && b->delivery_cursor >= b_debit;
  }));
  EXPECT_EQ(ids_of(receiver.requests("/debits")), (std::set<std::string>{webhook_id(a_debit), webhook_id(b_debit)}));
  EXPECT_EQ(ids_of(receiver.requests("/b")), (std::set<std::string>{webhook_id(b_credit), webhook_id(b_debit)}));
  EXPECT_TRUE(ids_of(receiver.requests("/all")).contains(webhook_id(a_credit)));
  EXPECT_EQ(receiver.requests("/debits").size(), 2u);
  EXPECT_EQ(receiver.requests("/b").size(), 2u);
  EXPECT_EQ(deliveries(debits.endpoint_id).size(), 2u);
  EXPECT_EQ(deliveries(of_b.endpoint_id).size(), 2u);
  (void)all;
}

// --- retries on the schedule ------------------------------------------------------------------------

TEST_P(DeliveryWorkerTest, ADroppedThenRefusedAttemptIsRetriedOnTheScheduleAndEachAttemptIsRecorded) {
  open(manual_clock_);
  // Each event: the 1st attempt's connection closed unanswered, the 2nd answered 500, the 3rd 200.
  ScriptedReceiver receiver([](const ScriptedRequest& r) {
    return r.attempt_seen == 1 ? ScriptedAnswer{0} : r.attempt_seen == 2 ? ScriptedAnswer{500} : ok();
  });
  account("kiosk-1");  // before the endpoint: its one event is the credit
  const Endpoint e = endpoint(receiver.url());
  const std::int64_t event = move("kiosk-1", 10);
  // The clock jumps 5 s, then 5 min: a lease of 1 s would run out at each jump, and the worker would
  // lose the lock and take it again (its figures are shown only while it delivers), a race with
  // the reads of the figures below. Handing over is the crash tests'; here the lease outlives the jumps.
  DeliveryWorkerOptions options = fast_options();
  options.lock_ttl_ms = 3'600'000;
  start_worker(options);
  const std::int64_t t1 = manual_clock_.now_ms();

  auto d = recorded(e.endpoint_id, event, 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->status, DeliveryStatus::pending);
  EXPECT_EQ(d->last_status_code, std::nullopt);
  EXPECT_NE(d->last_error.find("connection was lost"), std::string::npos) << d->last_error;
  EXPECT_EQ(d->last_attempt_at_ms, t1);
  ASSERT_TRUE(d->next_attempt_at_ms.has_value());
  EXPECT_GE(*d->next_attempt_at_ms, t1 + 4'500);
  EXPECT_LE(*d->next_attempt_at_ms, t1 + 5'500);

  // Not due yet: no retry however long the worker runs (its scans run every 20 ms).
  manual_clock_.set_ms(*d->next_attempt_at_ms - 1);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(receiver.requests().size(), 1u) << "the first attempt only";
  // The metrics' figures for the endpoint: the pending event's age, one attempt failed and retrying.
  const auto figures = [&] {
    for (const auto& f : worker_->endpoint_stats()) {
      if (f.endpoint_id == e.endpoint_id) return f;
    }
    ADD_FAILURE() << "no figures for " << e.endpoint_id;
    return webhooks::EndpointDeliveryStats{};
  };
  const auto event_at = recorded(e.endpoint_id, event, 1)->event_at_ms;
  EXPECT_EQ(figures().oldest_undelivered_ms, manual_clock_.now_ms() - event_at);
  EXPECT_EQ(figures().retrying, 1u);
  EXPECT_EQ(figures().delivered, 0u);

  // Due: retried, refused with 500, scheduled 5 min (±10%) after the retry.
  manual_clock_.set_ms(*d->next_attempt_at_ms);
  const std::int64_t t2 = manual_clock_.now_ms();
  d = recorded(e.endpoint_id, event, 2);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->status, DeliveryStatus::pending);
  EXPECT_EQ(d->last_status_code, std::optional<std::int64_t>(500));
  EXPECT_EQ(d->last_error, "answered HTTP 500");
  ASSERT_TRUE(d->next_attempt_at_ms.has_value());
  EXPECT_GE(*d->next_attempt_at_ms, t2 + 270'000);
  EXPECT_LE(*d->next_attempt_at_ms, t2 + 330'000);

  manual_clock_.set_ms(*d->next_attempt_at_ms);
  d = recorded(e.endpoint_id, event, 3);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->status, DeliveryStatus::delivered);
  EXPECT_EQ(d->last_status_code, std::optional<std::int64_t>(200));
  EXPECT_EQ(d->last_error, "");
  EXPECT_EQ(d->next_attempt_at_ms, std::nullopt);
  std::vector<int> attempts_seen;
  for (const auto& r : receiver.requests()) {
    if (r.webhook_id == webhook_id(event)) attempts_seen.push_back(r.attempt_seen);
  }
  EXPECT_EQ(attempts_seen, (std::vector<int>{1, 2, 3})) << "one request per attempt, same webhook-id";
  ASSERT_TRUE(eventually([&] { return figures().delivered == 1; }));  // counted once its record is answered
  EXPECT_EQ(figures().oldest_undelivered_ms, 0) << "caught up";
  EXPECT_EQ(figures().retrying, 2u);
  EXPECT_EQ(figures().failed, 0u);
}

TEST_P(DeliveryWorkerTest, AnAnswerAfterTheTimeOutIsAFailedAttemptASlowOneWithinItIsDelivered) {
  open(manual_clock_);
  ScriptedReceiver receiver([](const ScriptedRequest& r) {
    return r.attempt_seen == 1 ? ScriptedAnswer{200, 1'500} : ScriptedAnswer{200, 300};
  });
  account("kiosk-1");
  const Endpoint e = endpoint(receiver.url());
  const std::int64_t event = move("kiosk-1", 10);
  DeliveryWorkerOptions options = fast_options();
  options.timeout_ms = 1'000;
  start_worker(options);
  auto d = recorded(e.endpoint_id, event, 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->status, DeliveryStatus::pending);
  EXPECT_EQ(d->last_status_code, std::nullopt);
  EXPECT_NE(d->last_error.find("no answer within"), std::string::npos) << d->last_error;
  ASSERT_TRUE(d->next_attempt_at_ms.has_value());
  manual_clock_.set_ms(*d->next_attempt_at_ms);
  d = recorded(e.endpoint_id, event, 2);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->status, DeliveryStatus::delivered);
  EXPECT_EQ(d->last_status_code, std::optional<std::int64_t>(200));
}

TEST_P(DeliveryWorkerTest, AfterTheEighthFailedAttemptTheDeliveryFailsAndFiveDaysOfFailuresDisableTheEndpoint) {
  open(manual_clock_);
  ScriptedReceiver receiver([](const ScriptedRequest&) { return ScriptedAnswer{503}; });
  account("kiosk-1");
  const Endpoint e = endpoint(receiver.url(), {"credited"});
  const std::int64_t first_failure_at = manual_clock_.now_ms();
  const std::int64_t event = move("kiosk-1", 10);
  start_worker();
  const std::int64_t attempts_max = std::size(kDeliveryRetryDelaysMs) + 1;
  ASSERT_EQ(attempts_max, 8);
  for (std::int64_t attempt = 1; attempt <= attempts_max; ++attempt) {
    auto d = recorded(e.endpoint_id, event, attempt);
    ASSERT_TRUE(d.has_value() && d->attempts == attempt) << "attempt " << attempt;
    EXPECT_EQ(d->last_status_code, std::optional<std::int64_t>(503));
    if (attempt < attempts_max) {
      EXPECT_EQ(d->status, DeliveryStatus::pending) << attempt;
      ASSERT_TRUE(d->next_attempt_at_ms.has_value()) << attempt;
      const std::int64_t delay = kDeliveryRetryDelaysMs[attempt - 1];
      EXPECT_GE(*d->next_attempt_at_ms, d->last_attempt_at_ms + delay * 9 / 10) << attempt;
      EXPECT_LE(*d->next_attempt_at_ms, d->last_attempt_at_ms + delay * 11 / 10) << attempt;
      manual_clock_.set_ms(*d->next_attempt_at_ms);
    } else {
      EXPECT_EQ(d->status, DeliveryStatus::failed);
      EXPECT_EQ(d->next_attempt_at_ms, std::nullopt);
    }
  }
  EXPECT_EQ(receiver.requests().size(), static_cast<std::size_t>(attempts_max));
  auto still = ledger_->get_webhook_endpoint(e.endpoint_id);
  ASSERT_OK(still);
  EXPECT_EQ(still->status, EndpointStatus::enabled) << "failing for a day and a bit only";
  EXPECT_EQ(still->failing_since_ms, std::optional<std::int64_t>(first_failure_at));

  // Five days after the first failure, one more failed attempt disables the endpoint.
  manual_clock_.set_ms(first_failure_at + limits::kWebhookDisableAfterFailingMs);
  const std::int64_t late = move("kiosk-1", 1);
  ASSERT_TRUE(recorded(e.endpoint_id, late, 1).has_value());
  ASSERT_TRUE(eventually([&] {
    auto now = ledger_->get_webhook_endpoint(e.endpoint_id);
    return now.ok() && now->status == EndpointStatus::disabled;
  })) << "not disabled after 5 days of failures";
  // A disabled endpoint gets nothing more, even when retries fall due.
  const std::size_t sent = receiver.requests().size();
  move("kiosk-1", 2);
  manual_clock_.advance_ms(3'600'000);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(receiver.requests().size(), sent);
}

// --- endpoints apart ----------------------------------------------------------------------------------

TEST_P(DeliveryWorkerTest, ASlowEndpointDoesNotDelayAnotherEndpointsDeliveries) {
  open(manual_clock_);
  ScriptedReceiver receiver([](const ScriptedRequest& r) {
    return r.path == "/slow" ? ScriptedAnswer{200, 3'000} : ok();
  });
  account("kiosk-1");
  const Endpoint slow = endpoint(receiver.url("/slow"));
  const Endpoint fast = endpoint(receiver.url("/fast"));
  std::vector<std::int64_t> events;
  DeliveryWorkerOptions options = fast_options();
  options.timeout_ms = 10'000;
  start_worker(options);
  // The slow endpoint's first request is in flight (3 s) before the next events are written.
  events.push_back(move("kiosk-1", 1));
  ASSERT_TRUE(receiver.wait_for([](const auto& all) {
    for (const auto& r : all) {
      if (r.path == "/slow") return true;
    }
    return false;
  }));
  for (int i = 2; i <= 5; ++i) events.push_back(move("kiosk-1", i));
  // (Waited for as long as it takes: the assertion is the order — every one of them before the slow
  // endpoint's first answer, 3 s after its request — not a time.)
  ASSERT_TRUE(eventually([&] { return receiver.requests("/fast").size() >= events.size(); }))
      << "the fast endpoint got " << receiver.requests("/fast").size() << " of " << events.size();
  EXPECT_EQ(receiver.answered("/slow"), 0) << "the fast one's deliveries came while the slow one's were in flight";
  std::set<std::string> want;
  for (std::int64_t id : events) want.insert(webhook_id(id));
  EXPECT_EQ(ids_of(receiver.requests("/fast")), want);
  // And the slow one gets them all too, in the end.
  ASSERT_TRUE(eventually([&] {
    auto d = ledger_->get_webhook_endpoint(slow.endpoint_id);
    return d.ok() && d->delivery_cursor >= events.back() && deliveries(slow.endpoint_id).size() == events.size();
  }, milliseconds(15'000)));
  for (const webhooks::Delivery& d : deliveries(slow.endpoint_id)) EXPECT_EQ(d.status, DeliveryStatus::delivered) << d.event_id;
  (void)fast;
}

// --- replay -----------------------------------------------------------------------------------------

TEST_P(DeliveryWorkerTest, AReplaySendsTheEventsAfterItsCursorAgainWithTheSameWebhookIds) {
  open(manual_clock_);
  ScriptedReceiver receiver([](const ScriptedRequest&) { return ok(); });
  account("kiosk-1");
  const Endpoint e = endpoint(receiver.url(), {"credited"});
  std::vector<std::int64_t> events;
  for (int i = 1; i <= 4; ++i) events.push_back(move("kiosk-1", i));
  start_worker();
  ASSERT_TRUE(receiver.wait_for([&](const auto& all) { return all.size() >= events.size(); }));
  ASSERT_TRUE(eventually([&] { return deliveries(e.endpoint_id).size() == events.size(); }));

  CommandResult r = ledger_->run(Command(ReplayEndpointCommand{e.endpoint_id, events[1]}));
  ASSERT_TRUE(r.ok()) << r.error().detail;
  ASSERT_TRUE(receiver.wait_for([&](const auto& all) { return all.size() >= events.size() + 2; }));
  std::this_thread::sleep_for(milliseconds(200));  // nothing more comes
  const auto all = receiver.requests();
  ASSERT_EQ(all.size(), events.size() + 2);
  EXPECT_EQ(ids_of({all.begin() + 4, all.end()}), (std::set<std::string>{webhook_id(events[2]), webhook_id(events[3])}));
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].attempt_seen, i < events.size() ? 1 : 2) << all[i].webhook_id;
  }
  // Each replayed delivery started a new run: delivered at its first attempt.
  for (std::int64_t id : events) {
    auto d = recorded(e.endpoint_id, id, 1);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->status, DeliveryStatus::delivered);
    EXPECT_EQ(d->attempts, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeliveryWorkerTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

}  // namespace
}  // namespace tollgate::webhooks
