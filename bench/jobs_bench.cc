// tollgate bench: jobs — what a paid call costs in bookkeeping, how soon it reaches its provider,
// and how many one instance holds in flight. In-process: SqliteStore (durable: the WAL flushed before
// any answer) + Ledger + JobRunner + ProviderClient, against the fake provider (demo/fake_provider.h).
//
//   1. rate     --callers K threads each submit a job (Ledger::submit_job, durable), start it as the
//               HTTP edge does (JobRunner::start) and wait for its end (durable), against a fake
//               provider that answers at once: jobs per second. In the same run, the same K callers
//               do the ledger's own durable reserve + commit lifecycle on one account: lifecycles
//               per second. A job is three durable batches (submit, claim, end) plus one HTTP call,
//               a lifecycle two; the ratio is the bookkeeping cost of running the call through tollgate.
//   2. latency  one job at a time on an idle instance: from the submit call to the provider's
//               receipt of the POST (the fake's on_post hook), p50 and p99 (--latency-jobs).
//   3. in flight --in-flight N jobs against a fake provider in a child process whose every answer
//               takes 20 s (the issue's default latency), submitted at once; once the provider holds
//               all N (or 60 s passed) the process's resident memory is read: (RSS after − RSS
//               before) / N is the memory per job in flight (connections, parsers, timers, the
//               runner's state; the provider's side is in the other process).
//
// Output: a table, then as the LAST line one JSON object.
// Options: --seconds S (rate window, default 3), --callers K (default 32), --latency-jobs N (default
// 200), --in-flight N (default 10000; 0 skips), --quick (CI smoke: 0.5 s, 20 jobs, 200 in flight),
// --dir PATH (database folder; default a new one under /var/tmp).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "demo/fake_provider.h"
#include "jobs/provider_client.h"
#include "jobs/runner.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"

namespace tg = tollgate;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  double seconds = 3;
  int callers = 32;
  int latency_jobs = 200;
  int in_flight = 10'000;
  std::string dir;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "jobs_bench: %s\n", why.c_str());
  std::exit(1);
}

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

// One instance: store, ledger, provider client, runner — on a fresh database in `dir`.
struct Instance {
  tg::SystemClock clock;
  std::unique_ptr<tg::Store> store;
  std::unique_ptr<tg::Ledger> ledger;
  std::unique_ptr<tg::jobs::ProviderClient> client;
  std::unique_ptr<tg::jobs::JobRunner> runner;

  // Waiters for job ends, by id.
  std::mutex mu;
  std::unordered_map<std::string, std::promise<tg::jobs::Job>> ends;

  Instance(const std::string& path, const std::string& provider_base, std::int64_t expected_ms) {
    tg::SqliteOptions so;
    so.path = path;
    auto opened = tg::SqliteStore::open(so, clock);
    if (!opened) die("open " + path + ": " + opened.error().detail);
    store = std::move(opened).value();
    tg::LedgerOptions lo;
    lo.reaper_interval_ms = 0;
    ledger = std::make_unique<tg::Ledger>(*store, clock, lo);
    client = std::make_unique<tg::jobs::ProviderClient>(tg::jobs::ProviderClientOptions{});
    tg::jobs::JobRunnerOptions ro;
    ro.instance_id = "bench";
    ro.recovery_interval_ms = 0;
    tg::ProviderConfig p;
    p.url = provider_base + "/generate";
    p.status_url = provider_base + "/status/{id}";
    p.expected_duration_ms = expected_ms;
    p.timeout_ms = std::max<std::int64_t>(60'000, 3 * expected_ms);
    ro.providers["fake"] = p;
    ro.on_end = [this](const tg::jobs::Job& j) {
      std::lock_guard lock(mu);
      auto it = ends.find(j.client_request_id);
      if (it == ends.end()) return;
      it->second.set_value(j);
      ends.erase(it);
    };
    runner = std::make_unique<tg::jobs::JobRunner>(*ledger, *client, ro);
    if (!ledger->create_account({"bench", 0, std::nullopt}).ok()) die("create account");
    if (!ledger->credit({"bench", (std::int64_t{1} << 40), "bench-credits"}).ok()) die("credit");
  }
  ~Instance() {
    runner->stop();
    ledger->stop();
    client.reset();
    runner.reset();
  }

  tg::SubmitJobCommand job(const std::string& id) {
    tg::SubmitJobCommand c;
    c.client_request_id = id;
    c.account_id = "bench";
    c.cost = 1;
    c.provider = "fake";
    c.input_json = R"({"prompt":"a cat"})";
    c.owner = runner->instance_id();
    c.lease_ms = tg::jobs::JobRunner::lease_ms(*runner->provider("fake"));
    return c;
  }

  // Submits, starts and waits for the end of one job (as the HTTP edge and a waiting client would).
  tg::jobs::Job run_job(const std::string& id) {
    std::future<tg::jobs::Job> end;
    {
      std::lock_guard lock(mu);
      end = ends[id].get_future();
    }
    auto submitted = ledger->submit_job(job(id));
    if (!submitted) die("submit " + id + ": " + submitted.error().detail);
    runner->start(submitted->job);
    return end.get();
  }
};

std::string fresh_db(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--seconds") a.seconds = std::stod(next());
    else if (arg == "--callers") a.callers = std::stoi(next());
    else if (arg == "--latency-jobs") a.latency_jobs = std::stoi(next());
    else if (arg == "--in-flight") a.in_flight = std::stoi(next());
    else if (arg == "--dir") a.dir = next();
    else if (arg == "--quick") { a.seconds = 0.5; a.latency_jobs = 20; a.in_flight = 200; a.callers = 8; }
    else die("unknown option " + arg + " (see the top of bench/jobs_bench.cc)");
  }
  if (a.dir.empty()) {
    char tmpl[] = "/var/tmp/tollgate-jobs-bench.XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp");
    a.dir = tmpl;
  }
  // 2 sockets per job in flight in this process at most (client side only: the provider is a child).
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  // --- 1 and 2: a provider answering at once, in this process -----------------------------------
  std::mutex arrivals_mu;
  std::unordered_map<std::string, Clock::time_point> arrivals;
  tg::jobs::FakeProviderOptions fo;
  fo.latency_min_ms = 0;
  fo.latency_max_ms = 0;
  fo.on_post = [&](std::string_view id) {
    const auto now = Clock::now();
    std::lock_guard lock(arrivals_mu);
    arrivals.emplace(std::string(id), now);
  };
  tg::jobs::FakeProvider fast(fo);

  double jobs_per_s = 0, lifecycles_per_s = 0, p50_ms = 0, p99_ms = 0;
  {
    Instance inst(fresh_db(a.dir, "rate"), fast.base_url(), 1000);
    // Warm-up, then the window: K callers, each a job at a time.
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> done{0};
    std::atomic<int> next_id{0};
    auto jobs_window = [&](double seconds) {
      stop = false;
      done = 0;
      std::vector<std::thread> callers;
      for (int c = 0; c < a.callers; ++c) {
        callers.emplace_back([&] {
          while (!stop.load()) {
            const auto j = inst.run_job("rate-" + std::to_string(next_id.fetch_add(1)));
            if (j.status != tg::jobs::JobStatus::completed || !j.charged) die("job " + j.client_request_id + " not charged");
            done.fetch_add(1);
          }
        });
      }
      const auto start = Clock::now();
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      const auto counted = done.load();
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      stop = true;
      for (auto& t : callers) t.join();
      return static_cast<double>(counted) / elapsed;
    };
    jobs_window(std::min(0.5, a.seconds));
    jobs_per_s = jobs_window(a.seconds);
    // The ledger's own lifecycle, same store, same callers.
    stop = false;
    done = 0;
    std::vector<std::thread> callers;
    for (int c = 0; c < a.callers; ++c) {
      callers.emplace_back([&] {
        while (!stop.load()) {
          const std::string id = "life-" + std::to_string(next_id.fetch_add(1));
          auto h = inst.ledger->reserve({"bench", 1, id, std::nullopt, "", ""});
          if (!h) die("reserve: " + h.error().detail);
          if (!inst.ledger->commit({h->hold.hold_id, std::nullopt}).ok()) die("commit");
          done.fetch_add(1);
        }
      });
    }
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
    const auto counted = done.load();
    lifecycles_per_s = static_cast<double>(counted) / std::chrono::duration<double>(Clock::now() - start).count();
    stop = true;
    for (auto& t : callers) t.join();
    auto audit = inst.store->audit(std::nullopt);
    if (!audit || !audit->violations.empty()) die("audit after the rate cells is not clean");
  }
  {
    Instance inst(fresh_db(a.dir, "latency"), fast.base_url(), 1000);
    std::vector<double> ms;
    for (int i = 0; i < a.latency_jobs + 10; ++i) {
      const std::string id = "lat-" + std::to_string(i);
      const auto t0 = Clock::now();
      inst.run_job(id);
      std::lock_guard lock(arrivals_mu);
      if (i >= 10) ms.push_back(std::chrono::duration<double, std::milli>(arrivals.at(id) - t0).count());  // 10 warm-up
    }
    p50_ms = percentile(ms, 0.50);
    p99_ms = percentile(ms, 0.99);
  }
  fast.stop();

  // --- 3: jobs held in flight against a 20-s provider in a child process ------------------------
  double rss_per_job_kib = 0, rss_before = 0, rss_after = 0;
  std::size_t held = 0;
  if (a.in_flight > 0) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "tollgate";
    const std::string cmd = self + " fake-provider --listen 127.0.0.1:0 --latency-ms 20000..20000 2>/dev/null";
    FILE* child = popen(cmd.c_str(), "r");
    if (!child) die("cannot start " + cmd);
    char line[256] = {0};
    if (!std::fgets(line, sizeof line, child)) die("the fake provider printed nothing");
    std::string listening(line);
    const auto at = listening.find("listening on ");
    if (at == std::string::npos) die("unexpected first line: " + listening);
    std::string address = listening.substr(at + 13);
    while (!address.empty() && (address.back() == '\n' || address.back() == '\r')) address.pop_back();
    {
      Instance inst(fresh_db(a.dir, "inflight"), "http://" + address, 20'000);
      rss_before = rss_mib();
      std::atomic<int> accepted{0};
      for (int i = 0; i < a.in_flight; ++i) {
        inst.ledger->submit(inst.job("fl-" + std::to_string(i)), [&](tg::CommandResult r) {
          if (!r.ok()) die("submit: " + r.error().detail);
          inst.runner->start(std::get<tg::JobOutcome>(r.value()).job);
          accepted.fetch_add(1);
        });
      }
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      while (Clock::now() < deadline) {
        const auto s = inst.runner->stats();
        held = s.sends;
        if (accepted.load() == a.in_flight && s.sends >= static_cast<std::uint64_t>(a.in_flight) &&
            inst.client->in_flight() >= static_cast<std::size_t>(a.in_flight)) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // every request written
      rss_after = rss_mib();
      held = inst.client->in_flight();
      rss_per_job_kib = held ? (rss_after - rss_before) * 1024.0 / static_cast<double>(held) : 0;
    }
    // The child is stopped by closing the pipe's reader: it gets SIGPIPE or is killed below.
    std::string kill = "pkill -f 'fake-provider --listen 127.0.0.1:0 --latency-ms 20000..20000'";
    if (std::system(kill.c_str()) < 0) die("pkill");
    pclose(child);
  }

  std::printf("%-44s %12s\n", "figure", "value");
  std::printf("%-44s %12.0f\n", "jobs/s (provider answers at once)", jobs_per_s);
  std::printf("%-44s %12.0f\n", "ledger reserve+commit lifecycles/s", lifecycles_per_s);
  std::printf("%-44s %12.2f\n", "jobs/s ÷ lifecycles/s", lifecycles_per_s > 0 ? jobs_per_s / lifecycles_per_s : 0);
  std::printf("%-44s %12.2f\n", "submit → provider request p50 (ms)", p50_ms);
  std::printf("%-44s %12.2f\n", "submit → provider request p99 (ms)", p99_ms);
  std::printf("%-44s %12zu\n", "jobs held in flight (20-s provider)", held);
  std::printf("%-44s %12.1f\n", "RSS per job in flight (KiB)", rss_per_job_kib);
  std::printf(
      "{\"bench\":\"jobs\",\"callers\":%d,\"jobs_per_s\":%.0f,\"ledger_lifecycles_per_s\":%.0f,\"ratio\":%.3f,"
      "\"submit_to_provider_p50_ms\":%.3f,\"submit_to_provider_p99_ms\":%.3f,\"in_flight_target\":%d,"
      "\"in_flight_held\":%zu,\"rss_before_mib\":%.1f,\"rss_after_mib\":%.1f,\"rss_per_job_kib\":%.2f}\n",
      a.callers, jobs_per_s, lifecycles_per_s, lifecycles_per_s > 0 ? jobs_per_s / lifecycles_per_s : 0, p50_ms,
      p99_ms, a.in_flight, held, rss_before, rss_after, rss_per_job_kib);
  return 0;
}
