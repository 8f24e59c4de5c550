#include "demo/fake_provider_command.h"

#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "app/cli.h"
#include "core/parse.h"
#include "demo/fake_provider.h"

namespace tollgate::app {
namespace {

struct FakeProviderArgs {
  jobs::FakeProviderOptions options;
  std::string listen = "127.0.0.1:9000";
  std::string latency_ms;  // "MIN..MAX" or "N"; empty: the options' default
};

bool parse_int(std::string_view s, std::int64_t& out) {
  const auto n = tollgate::parse_int(s, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                                     Sign::minus_allowed);
  if (n) out = *n;
  return n.has_value();
}

// "HOST:PORT" (the last colon splits, so "[::1]:0" and "::1:0" both work) into the options.
void parse_listen(const std::string& listen, jobs::FakeProviderOptions& o) {
  const auto colon = listen.rfind(':');
  std::int64_t port = -1;
  if (colon == std::string::npos || colon == 0 || !parse_int(std::string_view(listen).substr(colon + 1), port) ||
      port < 0 || port > 65535) {
    throw CLI::ValidationError("--listen", "must be HOST:PORT with a port from 0 to 65535, got \"" + listen + "\"");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  o.host = host;
  o.port = static_cast<std::uint16_t>(port);
}

void parse_latency(const std::string& text, jobs::FakeProviderOptions& o) {
  if (text.empty()) return;
  const auto dots = text.find("..");
  std::int64_t min = 0, max = 0;
  const bool ok = dots == std::string::npos
                      ? parse_int(text, min) && ((max = min), true)
                      : parse_int(std::string_view(text).substr(0, dots), min) &&
                            parse_int(std::string_view(text).substr(dots + 2), max);
  if (!ok || min < 0 || max < min) {
    throw CLI::ValidationError("--latency-ms", "must be MIN..MAX (or N) in ms with 0 <= MIN <= MAX, got \"" + text + "\"");
  }
  o.latency_min_ms = min;
  o.latency_max_ms = max;
}

int run_fake_provider(FakeProviderArgs& args) {
  jobs::FakeProviderOptions& o = args.options;
  parse_listen(args.listen, o);
  parse_latency(args.latency_ms, o);
  if (const std::string why = jobs::options_error(o); !why.empty()) throw CLI::ValidationError("fake-provider", why);

  // SIGINT and SIGTERM are waited for by this thread: blocked before the provider's threads start,
  // so that they inherit the mask and the signal comes to sigwait().
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<jobs::FakeProvider> provider;
  try {
    provider = std::make_unique<jobs::FakeProvider>(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tollgate: fake-provider: %s\n", e.what());
    return kExitUnavailable;
  }
  std::printf("listening on %s:%u\n", o.host.c_str(), static_cast<unsigned>(provider->port()));
  std::fflush(stdout);
  std::fprintf(stderr,
               "tollgate: fake-provider: %s seed %llu, latency %lld..%lld ms / time scale %g, rates: fail %g, "
               "lost answer %g, late answer %g (+%lld ms), never received %g\n",
               provider->base_url().c_str(), static_cast<unsigned long long>(o.seed),
               static_cast<long long>(o.latency_min_ms), static_cast<long long>(o.latency_max_ms), o.time_scale,
               o.fail_rate, o.lost_answer_rate, o.late_answer_rate, static_cast<long long>(o.late_extra_ms),
               o.never_received_rate);
  int signal = 0;
  sigwait(&signals, &signal);
  provider->stop();
  std::fprintf(stderr, "%s\n", jobs::stats_json(provider->stats()).c_str());
  return kExitOk;
}

}  // namespace

void add_fake_provider_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<FakeProviderArgs>();
  jobs::FakeProviderOptions& o = a->options;
  auto* cmd = app.add_subcommand(
      "fake-provider",
      "run a fake paid provider (an AI image service: POST /generate, GET /status/{id}) for tests and demos");
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: any; the first line on stdout says which)")
      ->default_str(a->listen);
  cmd->add_option("--seed", o.seed, "what happens to each id is a function of (seed, id)")->default_str("0");
  cmd->add_option("--latency-ms", a->latency_ms, "MIN..MAX: each work takes a uniform draw from it (before --time-scale)")
      ->default_str("15000..25000");
  cmd->add_option("--time-scale", o.time_scale, "every duration is divided by this (100: 15-25 s become 150-250 ms)")
      ->default_str("1")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--fail-rate", o.fail_rate, "share answered 422 at once, work not done")
      ->default_str("0")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--lost-answer-rate", o.lost_answer_rate, "share whose work completes but the POST answers 500")
      ->default_str("0")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--late-answer-rate", o.late_answer_rate, "share answered --late-extra-ms after the work completed")
      ->default_str("0")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--never-received-rate", o.never_received_rate,
                  "share whose connection is closed unanswered, nothing recorded (status 404)")
      ->default_str("0")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--late-extra-ms", o.late_extra_ms, "how much later a late answer comes (before --time-scale)")
      ->default_str("120000")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--threads", o.threads, "I/O threads")->default_str("1")->check(CLI::Range(1, 256));
  cmd->footer(
      "Each delivery meets at most one fault: the four rates must add up to at most 1. A POST with an\n"
      "Idempotency-Key seen before never starts the work again (GET /stats: work_started counts ids).");
  cmd->callback([a, &exit_code] { exit_code = run_fake_provider(*a); });
}

}  // namespace tollgate::app
