// tollgate jobs: the workers of one instance — run each job's provider call to its end.
//
// A JobRunner takes the jobs its instance accepted (start(), at once: no polling delay between a
// submit and the provider's request) and the jobs whose lease expired anywhere (recovery, every
// recovery_interval_ms and at start), and drives each through the provider contract
// (provider_protocol.h) through a Provider (provider.h: over HTTP, ProviderClient; in tests, a fake):
//
//   claim (running, lease, attempt counted: written BEFORE the request is sent)
//     → send → after_send():  complete → end(completed) — the hold is committed in the same batch
//                             fail     → end(failed)    — the hold is released in the same batch
//                             ask_status → wait status_poll_delay() → renew the lease (the answer
//                                          seen goes into the history) → ask_status → after_status()
//                             send_again → claim (attempt counted) → send, same Idempotency-Key
//
// The lease is short (limits::kJobLeaseMs, a few seconds), not the provider's time-out: while this
// runner drives a job it renews the lease every limits::kJobLeaseRenewIntervalMs — a ClaimJob by the
// same owner that counts no attempt and sends nothing to the provider — through the request in
// flight, the waits between status questions and the questions themselves; at most one renewal per
// job is in the ledger at a time. So a job whose worker died (kill -9, a lost machine) is taken over
// by any instance's recovery within a lease and a recovery scan (limits::kJobRecoveryIntervalMs).
// stop() (a graceful SIGTERM) hands every job it claimed back at once: their lease ends now
// (limits::kJobHandBackLeaseMs), so the next instance — another one, or this one restarted — takes
// them over at its next scan and asks the status URL; nothing is sent to the provider again.
//
// A recovered job (its worker died, stopped, or lost the database) is never started afresh: it was running
// and may have been received, so it is asked about at its status URL when the provider has one,
// otherwise sent again with the same key while attempts remain, then failed and released. A job
// that was never sent (attempts 0) is simply sent.
//
// Every write goes through the ledger's batches (Claim/EndJobCommand); a job ends exactly once
// whatever races for it — the store decides, the runner just stops when a claim says the job ended
// or is leased by someone else. cancel(): after the job was cancelled in the store, aborts its
// in-flight request here (another instance's request ends when its answer is recorded as late).
//
// Bounded: at most in_flight_max jobs run at once per instance; up to queued_max more wait in
// memory (pending in the store; beyond that they wait for their lease to expire and recovery).
//
// Thread safety: every public method from any thread. Work runs on the provider's threads,
// the ledger's callbacks and the runner's one timer thread; each job's steps run one at a time.
#pragma once

#include <array>
#include <atomic>
#include <vector>
#include <condition_variable>
#include <functional>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "config/config.h"
#include "core/counters.h"
#include "core/thread_annotations.h"
#include "jobs/job.h"
#include "jobs/provider.h"
#include "jobs/provider_protocol.h"
#include "ledger/ledger.h"

namespace tollgate::jobs {

struct JobRunnerOptions {
  std::string instance_id;  // the lease owner this instance writes (unique per process)
  std::map<std::string, ProviderConfig> providers;
  std::size_t in_flight_max = limits::kJobsInFlightMaxDefault;
  std::size_t queued_max = limits::kJobsQueuedMax;
  // How often expired leases are looked for (also once at start); 0: never (tests call recover_once()).
  std::int64_t recovery_interval_ms = limits::kJobRecoveryIntervalMs;
  std::uint64_t seed = 0;  // of the status polls' jitter; 0 seeds from the operating system
  // Called once per job this runner ended (its end is durable), on the ledger's callback thread:
  // benchmarks count with it. Keep it short.
  std::function<void(const Job&)> on_end;
};

// Counted since start (metrics).
struct JobRunnerStats {
  std::uint64_t in_flight = 0;  // jobs being driven now
  std::uint64_t queued = 0;     // accepted, waiting for a slot
  std::uint64_t sends = 0;      // provider requests begun (first sends and re-sends)
  std::uint64_t resends = 0;    // of which sent again with the same key
  std::uint64_t status_questions = 0;
  std::uint64_t recovered = 0;  // jobs claimed after their lease expired
  std::uint64_t lease_renewals = 0;    // renewals written (each a ClaimJob: no attempt, nothing sent)
  std::uint64_t renewals_refused = 0;  // renewals the store refused (the job ended, or another owns it)
  std::uint64_t handed_back = 0;       // jobs whose lease stop() ended at once
  std::uint64_t completed = 0, failed = 0, cancelled = 0;  // ended by this runner (cancelled: aborted here)
  std::uint64_t answers_2xx = 0, answers_4xx = 0, answers_5xx = 0, timeouts = 0, connection_lost = 0,
                not_connected = 0;
};

// Each figure of JobRunnerStats and where it is shown (core/counters.h): a row with an empty family is
// counted (stats(), the CLI, tests) but not on /metrics. in_flight and queued are gauges of the
// runner's state, filled in by stats(); the rest are counted in the table's atomics.
inline constexpr metrics::Family kJobsEndedFamily{"tollgate_jobs_ended_total", metrics::Type::counter,
                                                  "Jobs this instance ended, by status."};
inline constexpr metrics::Family kJobLeaseRenewalsFamily{
    "tollgate_job_lease_renewals_total", metrics::Type::counter,
    "Renewals of the short leases of jobs this instance drives, by outcome (refused: the job ended or another "
    "instance took it)."};
inline constexpr auto kJobRunnerFields = std::to_array<metrics::Field<JobRunnerStats>>({
    {&JobRunnerStats::in_flight,
     {"tollgate_jobs_in_flight", metrics::Type::gauge, "Jobs this instance is driving (provider calls and their settling)."},
     ""},
    {&JobRunnerStats::queued,
     {"tollgate_jobs_queued", metrics::Type::gauge, "Jobs accepted here, waiting for a free slot."}, ""},
    {&JobRunnerStats::completed, kJobsEndedFamily, "status=\"completed\""},
    {&JobRunnerStats::failed, kJobsEndedFamily, "status=\"failed\""},
    {&JobRunnerStats::cancelled,
     {"tollgate_jobs_aborted_total", metrics::Type::counter, "In-flight provider calls aborted by a cancel."}, ""},
    {&JobRunnerStats::sends,
     {"tollgate_provider_requests_total", metrics::Type::counter, "Provider requests begun (sends and re-sends)."},
     ""},
    {&JobRunnerStats::resends,
     {"tollgate_provider_resends_total", metrics::Type::counter, "Requests sent again with the same Idempotency-Key."},
     ""},
    {&JobRunnerStats::status_questions,
     {"tollgate_provider_status_questions_total", metrics::Type::counter, "Status URL questions asked."}, ""},
    {&JobRunnerStats::recovered,
     {"tollgate_jobs_recovered_total", metrics::Type::counter, "Jobs claimed after their lease expired (reconciliations)."},
     ""},
    {&JobRunnerStats::lease_renewals, kJobLeaseRenewalsFamily, "outcome=\"renewed\""},
    {&JobRunnerStats::renewals_refused, kJobLeaseRenewalsFamily, "outcome=\"refused\""},
    {&JobRunnerStats::handed_back, {}, ""},
    {&JobRunnerStats::answers_2xx, {}, ""},
    {&JobRunnerStats::answers_4xx, {}, ""},
    {&JobRunnerStats::answers_5xx, {}, ""},
    {&JobRunnerStats::timeouts, {}, ""},
    {&JobRunnerStats::connection_lost, {}, ""},
    {&JobRunnerStats::not_connected, {}, ""},
});

// One provider's figures since start (metrics): what its requests saw and how long they took.
struct ProviderStats {
  // Upper bounds (seconds) of the request-duration histogram's buckets; +Inf follows.
  static constexpr std::array<double, 13> kBucketsS{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 60, 120};
  std::string provider;
  std::uint64_t answers_2xx = 0, answers_4xx = 0, answers_5xx = 0, timeouts = 0, connection_lost = 0,
                not_connected = 0, status_questions = 0;
  std::array<std::uint64_t, kBucketsS.size()> buckets{};  // cumulative counts, as Prometheus wants them
  std::uint64_t requests = 0;                             // sends (the histogram's count)
  double seconds_sum = 0;
};

class JobRunner {
 public:
  // `ledger` and `provider` must outlive the runner.
  JobRunner(Ledger& ledger, Provider& provider, JobRunnerOptions options);
  // stop(). Destroy the runner only after the ledger stopped: until then the ledger may still
  // answer a claim or an end the runner submitted (its callbacks touch the runner).
  ~JobRunner();

  // The provider a job may name (configured), or nullptr.
  const ProviderConfig* provider(std::string_view name) const;
  // The lease a claim (and a submit) takes: limits::kJobLeaseMs for every provider — short, renewed
  // while this runner drives the job, whatever the provider's time-out.
  static std::int64_t lease_ms(const ProviderConfig& provider);
  // The longest wait between status questions: the provider's expected duration, at most
  // limits::kStatusPollMaxMs (a 20-s generation is asked about every 10 s at most; a fast one sooner).
  static std::int64_t poll_cap_ms(const ProviderConfig& provider);
  const std::string& instance_id() const { return options_.instance_id; }
  const std::map<std::string, ProviderConfig>& providers() const { return options_.providers; }

  // A job this instance just accepted (its SubmitJob is durable): run it now, or queue it.
  void start(const Job& job);
  // The job was cancelled in the store: abort its request here, if it runs here.
  void cancel(std::string_view client_request_id);
  // Claims every job whose lease expired (up to the free slots) and runs it. Returns how many.
  std::size_t recover_once();
  // Stops recovery, renewals and timers, aborts requests in flight (their jobs stay running in the
  // store), then hands back every job it claimed — a ClaimJob by this owner whose lease ends now —
  // and waits for those writes (at most limits::kJobHandBackWaitMs), so that whichever instance runs
  // next takes them over at once and asks their status URL. Call it while the ledger still runs.
  void stop();

  JobRunnerStats stats() const;
  // Per configured provider, by name.
  std::vector<ProviderStats> provider_stats() const;

 private:
  struct Run;
  enum class Mode { fresh, recover };
  void admit(std::shared_ptr<Run> run);
  void claim(std::shared_ptr<Run> run, bool begin_attempt, std::string note, int tries = 0);
  void after_claim(const std::shared_ptr<Run>& run, const Job& job, bool began_attempt);
  void send(std::shared_ptr<Run> run);
  void ask_status(std::shared_ptr<Run> run);
  void act(std::shared_ptr<Run> run, const Decision& decision, const Exchange& seen, bool from_status);
  void end(std::shared_ptr<Run> run, JobStatus status, std::optional<std::string> result,
           std::optional<std::string> error, EndedBy by, std::string note, int tries = 0);
  void finish(const std::shared_ptr<Run>& run, JobStatus outcome, bool ended_here);
  // Runs `work` on the timer thread after `delay_ms`. If the runner stops first, `run` (when given)
  // is finished instead — never left waiting for a timer that will not fire.
  void after(std::int64_t delay_ms, std::shared_ptr<Run> run, std::function<void()> work);
  void renewal_loop();
  void renew_leases();
  void hand_back(const std::vector<std::shared_ptr<Run>>& runs);
  bool stopping() const;
  struct PerProvider;
  void count_answer(const Exchange& seen, PerProvider& p, std::chrono::steady_clock::duration took);
  void recovery_loop();
  double jitter();

  Ledger& ledger_;
  Provider& provider_;
  const JobRunnerOptions options_;

  boost::asio::io_context timers_;  // the runner's timers, on timer_thread_
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> timers_work_;
  std::thread timer_thread_;
  struct Timer;

  mutable Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Run>> running_ GUARDED_BY(mu_);  // by client_request_id
  std::deque<std::shared_ptr<Run>> queue_ GUARDED_BY(mu_);
  std::map<std::uint64_t, std::shared_ptr<Timer>> timers_waiting_ GUARDED_BY(mu_);  // cancelled by stop()
  std::uint64_t next_timer_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  CondVar idle_;  // running_ became empty

  Mutex recovery_mu_;
  CondVar recovery_wake_;
  // stop() was called: the recovery loop ends. Its own flag under recovery_mu_ (not stopping_ under
  // mu_), so that stop()'s wake-up cannot fall between the loop's check and its wait.
  bool recovery_stopping_ GUARDED_BY(recovery_mu_) = false;
  std::thread recovery_thread_;

  metrics::Counters<JobRunnerStats, kJobRunnerFields> counters_;
  // One per configured provider, made at construction (the map never changes afterwards).
  std::map<std::string, std::unique_ptr<PerProvider>, std::less<>> per_provider_;
};

}  // namespace tollgate::jobs
