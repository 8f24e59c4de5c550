// The workers of one instance (runner.h).
#include "jobs/runner.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/log.h"

namespace tollgate::jobs {

struct JobRunner::PerProvider {
  std::atomic<std::uint64_t> answers_2xx{0}, answers_4xx{0}, answers_5xx{0}, timeouts{0}, connection_lost{0},
      not_connected{0}, status_questions{0}, requests{0};
  std::array<std::atomic<std::uint64_t>, ProviderStats::kBucketsS.size()> buckets{};  // per bucket (not cumulative)
  std::atomic<std::uint64_t> micros_sum{0};
};

// One job being driven. Its steps run one at a time (each starts the next from its callback);
// only cancel() reaches in from another thread, under `mu`.
struct JobRunner::Run {
  Job job;
  const ProviderConfig* provider = nullptr;
  PerProvider* figures = nullptr;  // of `provider`
  Mode mode = Mode::fresh;
  int questions = 0;  // status questions asked since the last send
  // The job's id and hold, copied once before the run is shared: renewals and the hand-back read
  // them on other threads while the steps replace `job`.
  std::string id, hold_id;
  Mutex mu;
  bool cancelled GUARDED_BY(mu) = false;
  std::shared_ptr<CallHandle> call GUARDED_BY(mu);  // the provider call in flight
  bool claimed GUARDED_BY(mu) = false;   // a claim of this run was submitted (stop() hands it back)
  bool leased GUARDED_BY(mu) = false;    // a claim succeeded and no renewal was refused since (renew it)
  bool renewing GUARDED_BY(mu) = false;  // a renewal is in the ledger (one at a time)
  bool ended GUARDED_BY(mu) = false;     // the store said the job ended (nothing to hand back)
};

struct JobRunner::Timer {
  boost::asio::steady_timer timer;
  std::shared_ptr<Run> run;  // finished instead of `work` when the runner stops first; may be null
  std::function<void()> work;
};

namespace {


std::string describe(const Exchange& e) {
  switch (e.kind) {
    case Exchange::Kind::answered: {
      std::string body = e.body.substr(0, 200);
      return "answered " + std::to_string(e.status) + (body.empty() ? "" : ": " + body);
    }
    case Exchange::Kind::timed_out: return "timed out" + (e.body.empty() ? "" : " (" + e.body + ")");
    case Exchange::Kind::connection_lost: return "connection lost" + (e.body.empty() ? "" : " (" + e.body + ")");
    case Exchange::Kind::not_connected: return "not connected" + (e.body.empty() ? "" : " (" + e.body + ")");
  }
  return "?";
}

// A write refused for a reason that passes (a busy or full database, a full queue): try it again.
bool worth_retrying(Code code) {
  return code == Code::unavailable || code == Code::overloaded || code == Code::storage_full;
}

std::uint64_t seed_or_random(std::uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

JobRunner::JobRunner(Ledger& ledger, Provider& provider, JobRunnerOptions options)
    : ledger_(ledger),
      provider_(provider),
      options_(std::move(options)),
      timers_work_(boost::asio::make_work_guard(timers_)),
      rng_(seed_or_random(options_.seed)) {
  TG_ASSERT(!options_.instance_id.empty() && options_.in_flight_max >= 1);
  for (const auto& [name, config] : options_.providers) per_provider_.emplace(name, std::make_unique<PerProvider>());
  timer_thread_ = std::thread([this] { timers_.run(); });
  if (options_.recovery_interval_ms > 0) recovery_thread_ = std::thread([this] { recovery_loop(); });
  renewal_loop();
}

JobRunner::~JobRunner() { stop(); }

const ProviderConfig* JobRunner::provider(std::string_view name) const {
  auto it = options_.providers.find(std::string(name));
  return it == options_.providers.end() ? nullptr : &it->second;
}

std::int64_t JobRunner::poll_cap_ms(const ProviderConfig& p) {
  return std::min<std::int64_t>(limits::kStatusPollMaxMs, std::max<std::int64_t>(p.expected_duration_ms, 50));
}

std::int64_t JobRunner::lease_ms(const ProviderConfig&) {
  // Not the provider's time-out: the runner renews it every kJobLeaseRenewIntervalMs while it
  // drives the job, so that a job whose worker died is taken over within seconds.
  return limits::kJobLeaseMs;
}

bool JobRunner::stopping() const {
  MutexLock lock(mu_);
  return stopping_;
}

double JobRunner::jitter() {
  MutexLock lock(mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

void JobRunner::start(const Job& job) {
  auto run = std::make_shared<Run>();
  run->job = job;
  run->provider = provider(job.provider);
  if (run->provider) run->figures = per_provider_.at(job.provider).get();
  run->mode = Mode::fresh;
  if (!run->provider) {
    // Configured when it was accepted, gone after a restart with another configuration.
    tollgate::log("error", "job " + job.client_request_id + " names provider " + job.provider + ", which is not configured");
    return;
  }
  admit(std::move(run));
}

void JobRunner::admit(std::shared_ptr<Run> run) {
  run->id = run->job.client_request_id;  // not shared yet (or only by the queue, which reads neither)
  run->hold_id = run->job.hold_id;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    if (running_.count(run->job.client_request_id) != 0) return;  // already driven here
    if (running_.size() >= options_.in_flight_max) {
      // Pending in the store either way; beyond the queue, recovery takes it once its lease expired.
      if (queue_.size() < options_.queued_max) queue_.push_back(std::move(run));
      return;
    }
    running_.emplace(run->job.client_request_id, run);
  }
  if (run->mode == Mode::recover) counters_.add<&JobRunnerStats::recovered>();
  const bool fresh = run->mode == Mode::fresh;
  claim(std::move(run), fresh, "");
}

void JobRunner::claim(std::shared_ptr<Run> run, bool begin_attempt, std::string note, int tries) {
  // Stopping: no new claim (no new attempt); stop() hands back what was claimed.
  if (stopping()) return finish(run, run->job.status, false);
  {
    MutexLock lock(run->mu);
    run->claimed = true;
  }
  ClaimJobCommand c{run->job.client_request_id, run->job.hold_id, options_.instance_id,
                    lease_ms(*run->provider),   begin_attempt,           note};
  ledger_.submit(std::move(c), [this, run, begin_attempt, note, tries](CommandResult r) {
    if (r.ok()) return after_claim(run, std::get<JobOutcome>(r.value()).job, begin_attempt);
    if (worth_retrying(r.code()) && tries + 1 < limits::kJobWriteTriesMax) {
      return after(limits::kJobWriteRetryMs, run,
                   [this, run, begin_attempt, note, tries] { claim(run, begin_attempt, note, tries + 1); });
    }
    // Ended, leased by another instance, or the database stays away: not ours to drive.
    finish(run, run->job.status, false);
  });
}

void JobRunner::after_claim(const std::shared_ptr<Run>& run, const Job& job, bool began_attempt) {
  run->job = job;
  if (is_ended(job.status)) {  // a pending job whose hold expired
    {
      MutexLock lock(run->mu);
      run->ended = true;
    }
    return finish(run, job.status, true);
  }
  bool cancelled = false;
  {
    MutexLock lock(run->mu);
    run->leased = true;  // ours until now + lease_ms: renewed from here on
    cancelled = run->cancelled;
  }
  if (cancelled) return finish(run, JobStatus::cancelled, false);
  if (began_attempt) return send(run);
  // Recovered: it may have been received. Ask, or send again with the same key, or give up.
  if (run->job.attempts == 0) return claim(run, true, "");
  if (run->provider->status_url) {
    run->questions = 0;
    return ask_status(run);
  }
  if (run->job.attempts < run->provider->max_attempts) {
    counters_.add<&JobRunnerStats::resends>();
    return claim(run, true, "recovered: the outcome of attempt " + std::to_string(run->job.attempts) +
                                " is unknown and there is no status URL: sending again with the same key");
  }
  end(run, JobStatus::failed, std::nullopt,
      "the outcome of the last of " + std::to_string(run->job.attempts) +
          " attempts is unknown (its worker stopped) and the provider has no status URL",
      EndedBy::recovery, "");
}

void JobRunner::send(std::shared_ptr<Run> run) {
  counters_.add<&JobRunnerStats::sends>();
  MutexLock lock(run->mu);
  if (run->cancelled) {
    lock.unlock();
    return finish(run, JobStatus::cancelled, false);
  }
  const auto sent_at = std::chrono::steady_clock::now();
  run->call = provider_.send_job(*run->provider, run->job.client_request_id, run->job.input_json,
                                 [this, run, sent_at](Exchange seen) {
    count_answer(seen, *run->figures, std::chrono::steady_clock::now() - sent_at);
    {
      MutexLock lock(run->mu);
      run->call.reset();
      if (run->cancelled) return finish(run, JobStatus::cancelled, false);
    }
    const Decision d = after_send(seen, run->provider->status_url.has_value(), run->job.attempts,
                                  static_cast<int>(run->provider->max_attempts));
    act(run, d, seen, false);
  });
}

void JobRunner::ask_status(std::shared_ptr<Run> run) {
  ++run->questions;
  counters_.add<&JobRunnerStats::status_questions>();
  run->figures->status_questions.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(run->mu);
  if (run->cancelled) {
    lock.unlock();
    return finish(run, JobStatus::cancelled, false);
  }
  run->call = provider_.ask_status(*run->provider, run->job.client_request_id, [this, run](Exchange seen) {
    {
      MutexLock lock(run->mu);
      run->call.reset();
      if (run->cancelled) return finish(run, JobStatus::cancelled, false);
    }
    const Decision d = after_status(seen, run->job.attempts, static_cast<int>(run->provider->max_attempts));
    act(run, d, seen, true);
  });
}

void JobRunner::act(std::shared_ptr<Run> run, const Decision& d, const Exchange& seen, bool from_status) {
  const std::string attempt = "attempt " + std::to_string(run->job.attempts);
  const std::string seen_text = (from_status ? "status URL " : attempt + " ") + describe(seen);
  switch (d.next) {
    case Next::complete:
      return end(run, JobStatus::completed, d.result_json, std::nullopt, EndedBy::provider, seen_text);
    case Next::fail: {
      // A refusal the provider gave (4xx, or its status URL said failed) or every attempt unknown.
      const bool provider_said =
          seen.kind == Exchange::Kind::answered && (from_status || (seen.status >= 400 && seen.status < 500));
      return end(run, JobStatus::failed, std::nullopt, d.reason, provider_said ? EndedBy::provider : EndedBy::attempts,
                 seen_text);
    }
    case Next::ask_status: {
      // Backing off to the provider's expected duration (at most limits::kStatusPollMaxMs).
      const auto delay =
          std::min<std::chrono::milliseconds>(status_poll_delay(run->questions + 1, jitter()),
                                              std::chrono::milliseconds(poll_cap_ms(*run->provider)));
      // The lease is renewed (and what was seen recorded) before each question.
      return after(delay.count(), run, [this, run, seen_text] {
        ClaimJobCommand c{run->job.client_request_id, run->job.hold_id, options_.instance_id,
                          lease_ms(*run->provider), false, seen_text};
        ledger_.submit(c, [this, run](CommandResult r) {
          if (!r.ok()) return finish(run, run->job.status, false);  // ended, taken over, or no database
          run->job = std::get<JobOutcome>(r.value()).job;
          if (is_ended(run->job.status)) return finish(run, run->job.status, false);
          ask_status(run);
        });
      });
    }
    case Next::send_again:
      counters_.add<&JobRunnerStats::resends>();
      run->questions = 0;
      return after(std::min<std::int64_t>(100LL * run->job.attempts, 2'000), run,
                   [this, run, seen_text] { claim(run, true, seen_text); });
  }
}

void JobRunner::end(std::shared_ptr<Run> run, JobStatus status, std::optional<std::string> result,
                    std::optional<std::string> error, EndedBy by, std::string note, int tries) {
  EndJobCommand c;
  c.client_request_id = run->job.client_request_id;
  c.hold_id = run->job.hold_id;
  c.end = status;
  c.result_json = result;
  c.error = error;
  c.by = by;
  c.note = note;
  ledger_.submit(std::move(c), [=, this](CommandResult r) {
    if (r.ok()) {
      run->job = std::get<JobOutcome>(r.value()).job;
      {
        MutexLock lock(run->mu);
        run->ended = true;
      }
      return finish(run, run->job.status, true);
    }
    if (worth_retrying(r.code()) && tries + 1 < limits::kJobWriteTriesMax) {
      return after(limits::kJobWriteRetryMs, run, [=, this] { end(run, status, result, error, by, note, tries + 1); });
    }
    tollgate::log("error", "job " + run->job.client_request_id + ": its end could not be written (" + r.error().detail +
               "); recovery settles it once its lease expires");
    finish(run, run->job.status, false);
  });
}

void JobRunner::finish(const std::shared_ptr<Run>& run, JobStatus outcome, bool ended_here) {
  if (ended_here && options_.on_end) options_.on_end(run->job);
  if (ended_here) {
    if (outcome == JobStatus::completed) counters_.add<&JobRunnerStats::completed>();
    if (outcome == JobStatus::failed) counters_.add<&JobRunnerStats::failed>();
  }
  if (outcome == JobStatus::cancelled && !ended_here) counters_.add<&JobRunnerStats::cancelled>();
  std::shared_ptr<Run> next;
  {
    MutexLock lock(mu_);
    auto it = running_.find(run->job.client_request_id);
    if (it != running_.end() && it->second == run) running_.erase(it);
    if (!stopping_ && !queue_.empty()) {
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    if (running_.empty()) idle_.notify_all();
  }
  if (next) admit(std::move(next));
}

void JobRunner::cancel(std::string_view client_request_id) {
  std::shared_ptr<Run> run;
  {
    MutexLock lock(mu_);
    auto it = running_.find(std::string(client_request_id));
    if (it != running_.end()) run = it->second;
    // A queued one: dropped (it has ended in the store).
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [&](const auto& r) { return r->job.client_request_id == client_request_id; }),
                 queue_.end());
  }
  if (!run) return;
  std::shared_ptr<CallHandle> call;
  {
    MutexLock lock(run->mu);
    run->cancelled = true;
    call = run->call;
  }
  if (call) call->cancel();  // its `done` then finishes the run
}

std::size_t JobRunner::recover_once() {
  std::size_t free_slots = 0;
  {
    MutexLock lock(mu_);
    if (stopping_) return 0;
    free_slots = options_.in_flight_max > running_.size() ? options_.in_flight_max - running_.size() : 0;
  }
  if (free_slots == 0) return 0;
  auto jobs = ledger_.jobs_to_recover(static_cast<std::int64_t>(std::min<std::size_t>(free_slots, 1000)));
  if (!jobs) return 0;  // the database is away: next time
  std::size_t started = 0;
  for (const Job& j : *jobs) {
    auto run = std::make_shared<Run>();
    run->job = j;
    run->provider = provider(j.provider);
    if (!run->provider) continue;  // not configured here: an instance that has it recovers it
    run->figures = per_provider_.at(j.provider).get();
    // Never sent: claim and send, as if accepted here. Else ask (or re-send) before anything.
    run->mode = j.attempts == 0 && j.status == JobStatus::pending ? Mode::fresh : Mode::recover;
    admit(std::move(run));  // a job already driven here is left alone
    ++started;
  }
  return started;
}

void JobRunner::recovery_loop() {
  MutexLock lock(recovery_mu_);
  while (!recovery_stopping_) {
    lock.unlock();
    recover_once();
    lock.lock();
    recovery_wake_.wait_for(recovery_mu_, std::chrono::milliseconds(options_.recovery_interval_ms),
                            [&]() REQUIRES(recovery_mu_) { return recovery_stopping_; });
  }
}

void JobRunner::after(std::int64_t delay_ms, std::shared_ptr<Run> run, std::function<void()> work) {
  auto t = std::make_shared<Timer>(
      Timer{boost::asio::steady_timer(timers_, std::chrono::milliseconds(delay_ms)), std::move(run), std::move(work)});
  const auto drop = [this](const std::shared_ptr<Timer>& dropped) {
    if (dropped->run) finish(dropped->run, dropped->run->job.status, false);
  };
  std::uint64_t id = 0;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      id = 0;
    } else {
      id = ++next_timer_;
      timers_waiting_.emplace(id, t);
    }
  }
  if (id == 0) return drop(t);
  // Every operation on a timer runs on the timer thread (stop() cancels them there).
  boost::asio::post(timers_, [this, t, id, drop] {
    if (stopping()) {
      {
        MutexLock lock(mu_);
        timers_waiting_.erase(id);
      }
      return drop(t);
    }
    t->timer.async_wait([this, t, id, drop](const boost::system::error_code& ec) {
      bool stop = false;
      {
        MutexLock lock(mu_);
        timers_waiting_.erase(id);
        stop = stopping_;
      }
      if (ec || stop) return drop(t);
      t->work();
    });
  });
}

void JobRunner::renewal_loop() {
  after(limits::kJobLeaseRenewIntervalMs, nullptr, [this] {
    renew_leases();
    renewal_loop();
  });
}

void JobRunner::renew_leases() {
  std::vector<std::shared_ptr<Run>> runs;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    for (const auto& [id, run] : running_) runs.push_back(run);
  }
  for (const auto& run : runs) {
    {
      MutexLock lock(run->mu);
      if (!run->leased || run->renewing || run->cancelled) continue;
      run->renewing = true;
    }
    // The same owner, a lease from now: no attempt counted, nothing sent, nothing in the history.
    ClaimJobCommand c{run->id, run->hold_id, options_.instance_id, limits::kJobLeaseMs, false, ""};
    ledger_.submit(std::move(c), [this, run](CommandResult r) {
      // Refused: the job ended (its end raced this renewal) or another instance took it over after
      // this lease ran out (the database was away) — stop renewing; the run's steps carry on, and
      // the store decides which end counts. Unavailable: the next tick tries again.
      const bool refused = !r.ok() && (r.code() == Code::conflict || r.code() == Code::not_found);
      {
        MutexLock lock(run->mu);
        run->renewing = false;
        if (refused) run->leased = false;
      }
      if (r.ok()) counters_.add<&JobRunnerStats::lease_renewals>();
      if (refused) counters_.add<&JobRunnerStats::renewals_refused>();
    });
  }
}

void JobRunner::hand_back(const std::vector<std::shared_ptr<Run>>& runs) {
  struct Waiting {
    Mutex mu;
    CondVar done;
    std::size_t left GUARDED_BY(mu) = 0;
    std::size_t handed_back GUARDED_BY(mu) = 0;
  };
  auto waiting = std::make_shared<Waiting>();  // the callbacks may come after stop() returned
  std::vector<std::shared_ptr<Run>> claimed;
  for (const auto& run : runs) {
    MutexLock lock(run->mu);
    if (run->claimed && !run->ended) claimed.push_back(run);
  }
  {
    MutexLock lock(waiting->mu);  // not shared yet: for the analysis, which cannot know that
    waiting->left = claimed.size();
  }
  for (const auto& run : claimed) {
    // Submitted after every earlier write of the run (one writer, in submission order): a claim
    // still in the ledger lands first, and this one ends the lease now.
    ClaimJobCommand c{run->id, run->hold_id, options_.instance_id, limits::kJobHandBackLeaseMs, false, ""};
    ledger_.submit(std::move(c), [waiting](CommandResult r) {
      MutexLock lock(waiting->mu);
      if (r.ok()) ++waiting->handed_back;  // else it ended, or is another's: nothing to hand back
      if (--waiting->left == 0) waiting->done.notify_all();
    });
  }
  MutexLock lock(waiting->mu);
  waiting->done.wait_for(waiting->mu, std::chrono::milliseconds(limits::kJobHandBackWaitMs),
                         [&]() REQUIRES(waiting->mu) { return waiting->left == 0; });
  counters_.add<&JobRunnerStats::handed_back>(waiting->handed_back);
  if (!claimed.empty()) {
    tollgate::log("info", "stopping: handed back " + std::to_string(waiting->handed_back) + " of " +
                              std::to_string(claimed.size()) + " jobs in flight (their lease ends now" +
                              (waiting->left > 0 ? "; " + std::to_string(waiting->left) + " writes unanswered" : "") +
                              "): the next instance asks their providers");
  }
}

void JobRunner::count_answer(const Exchange& seen, PerProvider& p, std::chrono::steady_clock::duration took) {
  constexpr auto relaxed = std::memory_order_relaxed;
  switch (seen.kind) {
    case Exchange::Kind::answered:
      if (seen.status >= 200 && seen.status < 300) {
        counters_.add<&JobRunnerStats::answers_2xx>();
        p.answers_2xx.fetch_add(1, relaxed);
      } else if (seen.status >= 400 && seen.status < 500) {
        counters_.add<&JobRunnerStats::answers_4xx>();
        p.answers_4xx.fetch_add(1, relaxed);
      } else if (seen.status >= 500) {
        counters_.add<&JobRunnerStats::answers_5xx>();
        p.answers_5xx.fetch_add(1, relaxed);
      }
      break;
    case Exchange::Kind::timed_out:
      counters_.add<&JobRunnerStats::timeouts>();
      p.timeouts.fetch_add(1, relaxed);
      break;
    case Exchange::Kind::connection_lost:
      counters_.add<&JobRunnerStats::connection_lost>();
      p.connection_lost.fetch_add(1, relaxed);
      break;
    case Exchange::Kind::not_connected:
      counters_.add<&JobRunnerStats::not_connected>();
      p.not_connected.fetch_add(1, relaxed);
      break;
  }
  const double seconds = std::chrono::duration<double>(took).count();
  p.requests.fetch_add(1, relaxed);
  p.micros_sum.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), relaxed);
  for (std::size_t i = 0; i < ProviderStats::kBucketsS.size(); ++i) {
    if (seconds <= ProviderStats::kBucketsS[i]) {
      p.buckets[i].fetch_add(1, relaxed);
      break;
    }
  }
}

std::vector<ProviderStats> JobRunner::provider_stats() const {
  std::vector<ProviderStats> out;
  for (const auto& [name, p] : per_provider_) {
    ProviderStats s;
    s.provider = name;
    s.answers_2xx = p->answers_2xx.load();
    s.answers_4xx = p->answers_4xx.load();
    s.answers_5xx = p->answers_5xx.load();
    s.timeouts = p->timeouts.load();
    s.connection_lost = p->connection_lost.load();
    s.not_connected = p->not_connected.load();
    s.status_questions = p->status_questions.load();
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < s.buckets.size(); ++i) {
      cumulative += p->buckets[i].load();
      s.buckets[i] = cumulative;
    }
    s.requests = p->requests.load();
    s.seconds_sum = static_cast<double>(p->micros_sum.load()) / 1e6;
    out.push_back(std::move(s));
  }
  return out;
}

void JobRunner::stop() {
  std::vector<std::shared_ptr<Run>> runs;
  {
    MutexLock lock(mu_);
    if (stopping_ && !timer_thread_.joinable()) return;
    stopping_ = true;
    queue_.clear();
    for (auto& [id, run] : running_) runs.push_back(run);
  }
  {
    MutexLock lock(recovery_mu_);
    recovery_stopping_ = true;
  }
  recovery_wake_.notify_all();
  if (recovery_thread_.joinable()) recovery_thread_.join();
  for (auto& run : runs) {
    std::shared_ptr<CallHandle> call;
    {
      MutexLock lock(run->mu);
      run->cancelled = true;
      call = run->call;
    }
    if (call) call->cancel();
  }
  // Aborted calls answer promptly; their callbacks must have run before the provider may go.
  for (int i = 0; i < limits::kJobStopPollsMax && provider_.in_flight() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(limits::kJobStopPollMs));
  }
  // Timers that have not fired are cancelled, and their runs finished (no renewal is written after
  // this); the thread ends once they have.
  boost::asio::post(timers_, [this] {
    std::vector<std::shared_ptr<Timer>> waiting;
    {
      MutexLock lock(mu_);
      for (const auto& [id, t] : timers_waiting_) waiting.push_back(t);
    }
    for (const auto& t : waiting) t->timer.cancel();
  });
  timers_work_.reset();
  if (timer_thread_.joinable()) timer_thread_.join();
  hand_back(runs);
  // Runs between steps (a claim or an end in the ledger) finish when their callback comes: wait at
  // most a bounded time for them.
  MutexLock lock(mu_);
  idle_.wait_for(mu_, std::chrono::milliseconds(limits::kJobStopWaitMs), [&]() REQUIRES(mu_) { return running_.empty(); });
  running_.clear();
}

JobRunnerStats JobRunner::stats() const {
  JobRunnerStats s = counters_.snapshot();
  MutexLock lock(mu_);
  s.in_flight = running_.size();
  s.queued = queue_.size();
  return s;
}

}  // namespace tollgate::jobs
