// The deliverer (see delivery_worker.h).
#include "webhooks/delivery_worker.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "webhooks/signature.h"

namespace tollgate::webhooks {

struct DeliveryWorker::Item {
  Event event;
  DeliveryAttempt attempt;  // retry_of_attempts set from the start for a retry; the rest once answered
  std::shared_ptr<jobs::ProviderCall> call;
};

struct DeliveryWorker::Round {
  Endpoint endpoint;  // as read when the round began: its URL and secrets sign every send
  std::int64_t fence = 0;
  std::optional<std::int64_t> cursor_from;  // set: the round moves the cursor to cursor_to
  std::int64_t cursor_to = 0;
  std::vector<Item> items;
  std::size_t next = 0;       // items[next..] not sent yet
  std::size_t in_flight = 0;  // sent, not answered
  std::size_t answered = 0;
};

struct DeliveryWorker::EndpointState {
  Endpoint endpoint;                    // as last read or recorded
  std::shared_ptr<Round> round;         // the round running, if any
  std::vector<Delivery> due;            // due retries from the last scan, not yet in a round
  bool caught_up = false;               // the last look after the cursor found nothing
  bool gone = false;                    // not listed any more: forgotten once its round ends
  Steady::time_point not_before{};      // a pause after a record that failed
  std::uint64_t delivered = 0, retrying = 0, failed = 0;
  std::uint64_t recorded_epoch = 0;     // records_epoch_ when a record last set `endpoint`
};

namespace {

void log_warn(const std::string& what) { tollgate::log("warn", "webhook delivery: " + what); }

// What a failed attempt saw, in words, at most limits::kWebhookDeliveryErrorBytesMax bytes.
std::string error_of(const jobs::Exchange& ex, std::int64_t timeout_ms) {
  std::string out;
  switch (ex.kind) {
    case jobs::Exchange::Kind::answered: out = "answered HTTP " + std::to_string(ex.status); break;
    case jobs::Exchange::Kind::timed_out:
      out = "no answer within " + std::to_string(timeout_ms / 1000) + " s";
      break;
    case jobs::Exchange::Kind::connection_lost: out = "the connection was lost: " + ex.body; break;
    case jobs::Exchange::Kind::not_connected: out = "could not connect: " + ex.body; break;
  }
  if (out.size() > limits::kWebhookDeliveryErrorBytesMax) {
    out.resize(limits::kWebhookDeliveryErrorBytesMax);
    // Do not end inside a UTF-8 sequence (continuation bytes are 10xxxxxx).
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80) != 0) out.pop_back();
  }
  return out;
}

}  // namespace

DeliveryWorker::DeliveryWorker(Ledger& ledger, const Clock& clock, DeliveryWorkerOptions options,
                               jobs::ProviderClientOptions http)
    : ledger_(ledger), clock_(clock), options_(std::move(options)) {
  TG_ASSERT(!options_.owner.empty() && options_.body);
  TG_ASSERT(options_.in_flight_per_endpoint_max >= 1 && options_.in_flight_max >= options_.in_flight_per_endpoint_max);
  TG_ASSERT(options_.lock_renew_ms >= 1 && options_.lock_renew_ms * 2 < options_.lock_ttl_ms);
  http.response_body_max_bytes = limits::kWebhookAnswerBodyBytesMax;
  http_ = std::make_unique<jobs::ProviderClient>(std::move(http));
  rng_.seed(options_.seed != 0 ? options_.seed : std::random_device{}());
}

DeliveryWorker::~DeliveryWorker() { stop(); }

void DeliveryWorker::start() {
  MutexLock lock(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { run(); });
}

void DeliveryWorker::stop() {
  {
    MutexLock lock(mu_);
    if (!started_ || stopping_) {
      stopping_ = true;
      return;
    }
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  {
    MutexLock lock(mu_);
    for (auto& [id, state] : endpoints_) {
      if (!state->round) continue;
      for (Item& item : state->round->items) {
        if (item.call) item.call->cancel();
      }
      // A round with nothing in flight (waiting for room, or all answered and being recorded):
      // one waiting for room is abandoned here; one being recorded ends with its record.
      const Round& r = *state->round;
      if (r.in_flight == 0 && r.answered < r.items.size()) {
        state->round.reset();
        --records_pending_;
      }
    }
    // The answers of cancelled requests come promptly; the records submitted are answered by the
    // ledger (still running); the feed waiter fires by its deadline.
    wake_.wait(mu_, [&]() REQUIRES(mu_) { return in_flight_ == 0 && records_pending_ == 0 && !feed_waiter_armed_; });
  }
  release_lock();
}

// --- the worker's thread ----------------------------------------------------------------------------

void DeliveryWorker::run() {
  MutexLock lock(mu_);
  while (!stopping_) {
    const auto now = Steady::now();
    if (now >= next_lock_) {
      lock.unlock();
      take_or_renew_lock();
      lock.lock();
      continue;
    }
    auto deadline = next_lock_;
    if (fence_ != 0) {
      if (now >= next_refresh_ || now >= next_due_scan_) {
        const bool refresh = now >= next_refresh_;
        lock.unlock();
        if (refresh) {
          refresh_endpoints();
        } else {
          scan_due();
        }
        lock.lock();
        continue;
      }
      lock.unlock();
      start_rounds();
      lock.lock();
      if (const auto after = feed_waiter_to_arm()) {
        lock.unlock();
        wait_for_feed(*after);
        lock.lock();
      }
      deadline = std::min({deadline, next_refresh_, next_due_scan_});
    }
    wake_.wait_until(mu_, deadline, [&]() REQUIRES(mu_) { return stopping_ || poked_; });
    poked_ = false;
  }
}

void DeliveryWorker::take_or_renew_lock() {
  std::int64_t fence = 0;
  {
    MutexLock lock(mu_);
    fence = fence_;
  }
  if (fence == 0) {
    // No endpoint, nothing to deliver: the lock is not asked for (no write every renew interval).
    PageRequest one;
    one.limit = 1;
    auto any = ledger_.list_webhook_endpoints(one);
    if (!any || any->items.empty()) {
      MutexLock lock(mu_);
      next_lock_ = Steady::now() + std::chrono::milliseconds(options_.lock_renew_ms);
      return;
    }
  }
  LockCommand c;
  c.key = std::string(limits::kWebhookDeliveryLockKey);
  c.owner = options_.owner;
  c.ttl_ms = options_.lock_ttl_ms;
  c.op = fence != 0 ? coord::LockOp::renew : coord::LockOp::acquire;
  if (fence != 0) c.fence = fence;
  auto r = ledger_.lock(std::move(c));
  MutexLock lock(mu_);
  const auto now = Steady::now();
  next_lock_ = now + std::chrono::milliseconds(options_.lock_renew_ms);
  const bool holds = r.ok() && r->decision != coord::LockDecision::stopped;
  if (!holds) {
    // Held by another instance (lock_held), or this one's lease was lost: not the deliverer.
    if (fence_ != 0) {
      log_warn("this instance lost the delivery lock (" + (r.ok() ? std::string("cancelled") : r.error().detail) + ")");
      lose_lock();
    }
    return;
  }
  if (fence_ == 0 || fence_ != r->lock.fence) {
    fence_ = r->lock.fence;
    ++stats_.lock_acquired;
    next_refresh_ = now;  // read every endpoint afresh: their cursors moved under another deliverer
    next_due_scan_ = now;
  }
}

void DeliveryWorker::lose_lock() {
  fence_ = 0;
  for (auto& [id, state] : endpoints_) {
    state->due.clear();
    state->caught_up = false;
  }
}

void DeliveryWorker::release_lock() {
  std::int64_t fence = 0;
  {
    MutexLock lock(mu_);
    fence = std::exchange(fence_, 0);
  }
  if (fence == 0) return;
  LockCommand c;
  c.op = coord::LockOp::release;
  c.key = std::string(limits::kWebhookDeliveryLockKey);
  c.owner = options_.owner;
  c.fence = fence;
  if (auto r = ledger_.lock(std::move(c)); !r) log_warn("releasing the delivery lock: " + r.error().detail);
}

void DeliveryWorker::refresh_endpoints() {
  std::uint64_t epoch = 0;
  {
    MutexLock lock(mu_);
    epoch = records_epoch_;
  }
  PageRequest page;
  page.limit = limits::kWebhookEndpointsMax;
  auto listed = ledger_.list_webhook_endpoints(page);
  MutexLock lock(mu_);
  next_refresh_ = Steady::now() + std::chrono::milliseconds(options_.refresh_ms);
  if (!listed) {
    log_warn("reading the endpoints: " + listed.error().detail);
    return;
  }
  for (auto& [id, state] : endpoints_) state->gone = true;
  for (const Endpoint& e : listed->items) {
    auto& state = endpoints_[e.endpoint_id];
    if (!state) state = std::make_unique<EndpointState>();
    state->gone = false;
    // A running round keeps the endpoint it began with; its record brings the new one (or is
    // refused when a replay moved the cursor, and the next refresh reads it). A record answered
    // since this read began may be newer than the row read: it stays (else a cursor it moved would
    // move back, and the next round would send those events again).
    if (!state->round && state->recorded_epoch <= epoch) state->endpoint = e;
  }
  std::erase_if(endpoints_, [](const auto& entry) { return entry.second->gone && !entry.second->round; });
}

void DeliveryWorker::scan_due() {
  auto due = ledger_.webhook_reads().due_deliveries(limits::kWebhookRetriesPerRoundMax * 4);
  MutexLock lock(mu_);
  next_due_scan_ = Steady::now() + std::chrono::milliseconds(options_.due_scan_ms);
  if (!due) {
    log_warn("reading the due retries: " + due.error().detail);
    return;
  }
  for (auto& [id, state] : endpoints_) {
    if (!state->round) state->due.clear();
  }
  for (const Delivery& d : *due) {
    auto it = endpoints_.find(d.endpoint_id);
    if (it == endpoints_.end()) continue;
    EndpointState& state = *it->second;
    if (state.round || state.due.size() >= static_cast<std::size_t>(limits::kWebhookRetriesPerRoundMax)) continue;
    state.due.push_back(d);
  }
}

// Starts a round for every enabled endpoint that has something to do and no round running, while
// requests in flight leave room.
void DeliveryWorker::start_rounds() {
  struct Candidate {
    Endpoint endpoint;
    std::vector<Delivery> due;
    bool read_feed = false;
  };
  std::vector<Candidate> candidates;
  std::int64_t fence = 0;
  {
    MutexLock lock(mu_);
    fence = fence_;
    const auto now = Steady::now();
    for (auto& [id, state] : endpoints_) {
      if (fence == 0 || stopping_) break;
      if (state->round || state->gone || state->endpoint.status != EndpointStatus::enabled) continue;
      if (now < state->not_before || (state->caught_up && state->due.empty())) continue;
      candidates.push_back({state->endpoint, std::move(state->due), !state->caught_up});
      state->due.clear();
    }
  }
  for (Candidate& c : candidates) {
    auto round = std::make_shared<Round>();
    round->endpoint = c.endpoint;
    round->fence = fence;
    bool read_failed = false;
    if (c.read_feed) {
      auto feed = ledger_.read_feed(c.endpoint.delivery_cursor, limits::kWebhookFeedEventsPerRoundMax);
      if (!feed) {
        log_warn("reading the feed for " + c.endpoint.endpoint_id + ": " + feed.error().detail);
        read_failed = true;
      } else if (!feed->events.empty()) {
        round->cursor_from = c.endpoint.delivery_cursor;
        round->cursor_to = feed->events.back().event_id;
        for (Event& ev : feed->events) {
          if (wants_event(c.endpoint, event_type_name(ev.type), ev.account_id)) round->items.push_back({std::move(ev)});
        }
      }
    }
    for (const Delivery& d : c.due) {
      const bool again = std::any_of(round->items.begin(), round->items.end(),
                                     [&](const Item& i) { return i.event.event_id == d.event_id; });
      if (again) continue;  // replayed: sent fresh in this round
      auto one = ledger_.read_feed(d.event_id - 1, 1);
      if (!one || one->events.size() != 1 || one->events.front().event_id != d.event_id) continue;
      Item retry{std::move(one->events.front())};
      retry.attempt.retry_of_attempts = d.attempts;
      round->items.push_back(std::move(retry));
    }
    MutexLock lock(mu_);
    auto it = endpoints_.find(c.endpoint.endpoint_id);
    if (it == endpoints_.end() || stopping_ || fence_ != fence) continue;
    EndpointState& state = *it->second;
    if (read_failed) state.not_before = Steady::now() + std::chrono::milliseconds(options_.refresh_ms);
    if (round->items.empty() && !round->cursor_from) {
      if (c.read_feed && !read_failed) state.caught_up = true;  // nothing after the cursor: wait for the feed
      continue;
    }
    state.caught_up = false;
    state.round = round;
    ++records_pending_;  // the round's record (or its abandonment) is owed from here on
    if (round->items.empty()) {
      lock.unlock();
      record(round);  // only the cursor moves: no event after it was for this endpoint
      continue;
    }
    send_more(round);
  }
}

std::optional<std::int64_t> DeliveryWorker::feed_waiter_to_arm() {
  if (feed_waiter_armed_ || fence_ == 0 || stopping_) return std::nullopt;
  std::optional<std::int64_t> after;
  for (const auto& [id, state] : endpoints_) {
    if (!state->caught_up || state->round || state->endpoint.status != EndpointStatus::enabled) continue;
    after = std::min(after.value_or(state->endpoint.delivery_cursor), state->endpoint.delivery_cursor);
  }
  if (after) feed_waiter_armed_ = true;
  return after;
}

void DeliveryWorker::wait_for_feed(std::int64_t after) {
  const auto deadline = Steady::now() + std::chrono::milliseconds(options_.idle_wait_ms);
  // `ready` runs on the waiters' thread — or at once, here, when they refuse (shutting down, full):
  // so this is called without mu_.
  ledger_.when_events_after(after, deadline, [this](const Status& s) {
    MutexLock lock(mu_);
    feed_waiter_armed_ = false;
    if (s.ok()) {
      for (auto& [id, state] : endpoints_) state->caught_up = false;
      poked_ = true;
    }
    wake_.notify_all();
  });
}

// --- a round's sends and their answers --------------------------------------------------------------

void DeliveryWorker::send_more(const std::shared_ptr<Round>& round) {
  while (round->next < round->items.size() && round->in_flight < options_.in_flight_per_endpoint_max &&
         in_flight_ < options_.in_flight_max && !stopping_) {
    send(round, round->next++);
  }
}

void DeliveryWorker::send(const std::shared_ptr<Round>& round, std::size_t index) {
  Item& item = round->items[index];
  const Event& ev = item.event;
  const std::int64_t at_ms = clock_.now_ms();
  DeliveryAttempt& a = item.attempt;
  a.event_id = ev.event_id;
  a.event_type = std::string(event_type_name(ev.type));
  a.account_id = ev.account_id;
  a.event_at_ms = ev.at_ms;
  a.at_ms = at_ms;
  jobs::ProviderRequest request;
  request.url = round->endpoint.url;
  request.body = options_.body(ev);
  request.timeout = std::chrono::milliseconds(options_.timeout_ms);
  const std::string id = webhook_id(ev.event_id);
  const std::int64_t timestamp_s = at_ms / 1000;
  const auto secrets = signing_secrets(round->endpoint, at_ms);
  request.headers = {{"webhook-id", id},
                     {"webhook-timestamp", std::to_string(timestamp_s)},
                     {"webhook-signature", signature_header(secrets, id, timestamp_s, request.body)}};
  ++in_flight_;
  ++round->in_flight;
  // start() never runs `done` inside itself; `done` takes mu_ on the client's thread.
  item.call = http_->start(std::move(request),
                           [this, round, index](jobs::Exchange ex) { answered(round, index, ex); });
}

void DeliveryWorker::answered(const std::shared_ptr<Round>& round, std::size_t index, const jobs::Exchange& ex) {
  MutexLock lock(mu_);
  Item& item = round->items[index];
  DeliveryAttempt& a = item.attempt;
  a.delivered = ex.kind == jobs::Exchange::Kind::answered && ex.status >= 200 && ex.status < 300;
  if (ex.kind == jobs::Exchange::Kind::answered) a.status_code = static_cast<std::int64_t>(ex.status);
  if (!a.delivered) a.error = error_of(ex, options_.timeout_ms);
  a.jitter_permille = std::uniform_int_distribution<std::int64_t>(-kDeliveryJitterPermilleMax,
                                                                  kDeliveryJitterPermilleMax)(rng_);
  item.call.reset();
  --in_flight_;
  --round->in_flight;
  ++round->answered;
  wake_.notify_all();  // room for other endpoints' sends (and for stop(), waiting for none in flight)
  poked_ = true;
  if (stopping_) {
    if (round->in_flight == 0) {
      // Abandoned: not recorded. The next deliverer sends these events again.
      if (auto it = endpoints_.find(round->endpoint.endpoint_id); it != endpoints_.end()) it->second->round.reset();
      --records_pending_;
    }
    return;
  }
  send_more(round);
  // The slot freed may be the one another endpoint's round waits for (in_flight_max over all).
  for (auto& [id, state] : endpoints_) {
    if (state->round && state->round != round) send_more(state->round);
  }
  if (round->answered < round->items.size()) return;
  lock.unlock();
  record(round);
}

void DeliveryWorker::record(const std::shared_ptr<Round>& round) {
  RecordDeliveriesCommand c;
  c.endpoint_id = round->endpoint.endpoint_id;
  c.fence = round->fence;
  c.cursor_from = round->cursor_from;
  c.cursor_to = round->cursor_to;
  c.attempts.reserve(round->items.size());
  for (const Item& item : round->items) c.attempts.push_back(item.attempt);
  ledger_.submit(Command(std::move(c)), [this, round](CommandResult r) { recorded(round, r); });
}

void DeliveryWorker::recorded(const std::shared_ptr<Round>& round, const CommandResult& r) {
  MutexLock lock(mu_);
  --records_pending_;
  poked_ = true;
  wake_.notify_all();
  auto it = endpoints_.find(round->endpoint.endpoint_id);
  EndpointState* state = it != endpoints_.end() ? it->second.get() : nullptr;
  if (state != nullptr) state->round.reset();
  if (!r) {
    ++stats_.records_refused;
    const Code code = r.error().code;
    if (code == Code::not_found) {
      if (state != nullptr) endpoints_.erase(it);  // deleted meanwhile
    } else if (code == Code::lock_lost && round->fence == fence_) {
      lose_lock();
    } else if (code == Code::conflict || code == Code::lock_lost) {
      next_refresh_ = Steady::now();  // a replay (or another deliverer) moved the cursor: read it
    } else {
      log_warn("recording deliveries to " + round->endpoint.endpoint_id + ": " + r.error().detail);
      if (state != nullptr) state->not_before = Steady::now() + std::chrono::milliseconds(options_.refresh_ms);
    }
    return;
  }
  const auto& outcome = std::get<DeliveriesOutcome>(r.value());
  std::uint64_t delivered = 0, failed_attempts = 0;
  for (const Item& item : round->items) (item.attempt.delivered ? delivered : failed_attempts) += 1;
  const auto failed = static_cast<std::uint64_t>(outcome.failed);
  const std::uint64_t retrying = failed_attempts >= failed ? failed_attempts - failed : 0;
  ++stats_.rounds;
  stats_.delivered += delivered;
  stats_.retrying += retrying;
  stats_.failed += failed;
  if (outcome.disabled) {
    log_warn("endpoint " + outcome.endpoint.endpoint_id + " disabled: its deliveries have failed for 5 days");
  }
  if (state == nullptr) return;
  state->endpoint = outcome.endpoint;
  state->recorded_epoch = ++records_epoch_;
  state->delivered += delivered;
  state->retrying += retrying;
  state->failed += failed;
}

// --- figures ------------------------------------------------------------------------------------------

DeliveryStats DeliveryWorker::stats() const {
  MutexLock lock(mu_);
  DeliveryStats out = stats_;
  out.delivering = fence_ != 0;
  return out;
}

std::vector<EndpointDeliveryStats> DeliveryWorker::endpoint_stats() const {
  std::vector<EndpointDeliveryStats> out;
  std::vector<std::optional<std::int64_t>> oldest;  // per endpoint of `out`: its round's oldest fresh event
  {
    MutexLock lock(mu_);
    if (fence_ == 0) return out;
    for (const auto& [id, state] : endpoints_) {
      out.push_back({id, state->delivered, state->retrying, state->failed, 0});
      std::optional<std::int64_t> at;
      if (state->round) {
        for (const Item& item : state->round->items) {
          if (!item.attempt.retry_of_attempts) at = std::min(at.value_or(item.event.at_ms), item.event.at_ms);
        }
      }
      oldest.push_back(at);
    }
  }
  // Pending retries are older still: one indexed read per endpoint, made here (a scrape), not by the
  // worker's loop.
  const std::int64_t now = clock_.now_ms();
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto pending = ledger_.webhook_reads().oldest_pending_event_at(out[i].endpoint_id);
    std::optional<std::int64_t> at = oldest[i];
    if (pending && *pending) at = std::min(at.value_or(**pending), **pending);
    if (at) out[i].oldest_undelivered_ms = std::max<std::int64_t>(0, now - *at);
  }
  return out;
}

}  // namespace tollgate::webhooks
