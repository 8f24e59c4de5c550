// tollgate cli: `lock …`, `idem …`, `ratelimit …` — the client side of routes_coord.cc.

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/limits.h"
#include "core/result.h"
#include "core/suggest.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

namespace {

// The refusals a script branches on get their own exit codes (cli.h); with --json their problem
// document is printed on stdout too (retry_after_ms, expires_at), as the answer would have been.
int coordination_exit_code(std::string_view code) {
  if (code == "lock_held") return kExitLockHeld;
  if (code == "lock_lost") return kExitLockLost;
  if (code == "lock_cancelled") return kExitLockCancelled;
  if (code == "in_progress") return kExitInProgress;
  if (code == "rate_limited") return kExitRateLimited;
  return -1;
}

// run() for the coordination commands: the refusals above exit with their own code.
template <typename Call, typename Print>
int run_coordination(const std::string& command, const Connection& connection, Call call, Print print) {
  Client client = make_client(connection);
  const Response r = call(client);
  if (r.ok()) {
    if (connection.json) {
      print_json_line(r.json());
    } else {
      print(r);
    }
    return kExitOk;
  }
  const int failed = report_failure(command, connection, r);
  if (!r.is_problem()) return failed;
  const int own = coordination_exit_code(r.problem().code);
  if (own < 0) return failed;
  if (connection.json && r.problem().body.is_object()) print_json_line(r.problem().body);
  return own;
}

const CLI::Validator kFingerprint(
    [](std::string& s) -> std::string {
      if (s.empty() || s.size() > limits::kFingerprintLengthMax) {
        return "must be 1 to " + std::to_string(limits::kFingerprintLengthMax) + " bytes, got " +
               std::to_string(s.size());
      }
      return {};
    },
    "TEXT", "fingerprint");

// --response: a JSON value (not null: null means "no response"), at most the stored size.
const CLI::Validator kResponseJson(
    [](std::string& s) -> std::string {
      boost::system::error_code ec;
      const json::value v = json::parse(s, ec);
      if (ec) return "must be JSON (" + ec.message() + "), got '" + s + "'";
      if (v.is_null()) return "must be a JSON value other than null (the response to replay)";
      const std::size_t size = json::serialize(v).size();
      if (size > limits::kIdempotencyResponseBytesMax) {
        return "must be at most " + std::to_string(limits::kIdempotencyResponseBytesMax) + " bytes of JSON, got " +
               std::to_string(size);
      }
      return {};
    },
    "JSON", "response");

// "lock K held by O: fence F, until T" for an answer that names a holder, else how it is.
void print_lock(const json::value& lock) {
  if (member(lock, "held").is_bool() && member(lock, "held").get_bool()) {
    std::printf("lock %s held by %s: fence %s, until %s\n", field(lock, "key").c_str(), field(lock, "owner").c_str(),
                field(lock, "fence").c_str(), field(lock, "expires_at").c_str());
  } else {
    std::printf("lock %s is free (last fence %s)\n", field(lock, "key").c_str(), field(lock, "fence").c_str());
  }
  print_fields(lock);
}

}  // namespace

void add_lock_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* lock = app.add_subcommand("lock", "lease locks with fencing: one holder per key across every instance (admin key)");
  lock->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* acquire = lock->add_subcommand(
      "acquire", "take KEY for --owner for --ttl-ms (the same owner again: same fence, lease renewed); exit 8 if "
                 "another owner holds it, 10 if it was cancelled");
  acquire->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  acquire->add_option("--owner", a->owner, "who takes it (a worker's id)")->required()->check(kId);
  acquire->add_option("--ttl-ms", a->ttl_ms, "the lease, from now (renew before it runs out)")
      ->required()
      ->transform(integer_range(1, limits::kLockTtlMsMax));
  add_connection_options(acquire, a->connection);
  acquire->callback([a, &exit_code] {
    exit_code = run_coordination(
        "lock acquire", a->connection, [&](Client& c) { return c.acquire_lock(a->lock_key, a->owner, a->ttl_ms); },
        [](const Response& r) { print_lock(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* renew = lock->add_subcommand(
      "renew", "extend --owner's lease on KEY to now + --ttl-ms; exit 9 if it is not the holder any more, 10 if the "
               "lock was cancelled (stop the work: the lock is freed)");
  renew->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  renew->add_option("--owner", a->owner, "the holder")->required()->check(kId);
  renew->add_option("--ttl-ms", a->ttl_ms, "the new lease, from now")
      ->required()
      ->transform(integer_range(1, limits::kLockTtlMsMax));
  auto* renew_fence = renew->add_option("--fence", a->fence,
                                        "the fence that acquire answered: without it only the owner name is checked")
                          ->transform(integer_range(1, std::numeric_limits<std::int64_t>::max()));
  add_connection_options(renew, a->connection);
  renew->callback([a, &exit_code, renew_fence] {
    client::LockHolder holder{a->lock_key, a->owner, std::nullopt};
    if (renew_fence->count() > 0) holder.fence = a->fence;
    exit_code = run_coordination(
        "lock renew", a->connection, [&](Client& c) { return c.renew_lock(holder, a->ttl_ms); },
        [](const Response& r) { print_lock(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* release = lock->add_subcommand("release", "let go of KEY; exit 9 if --owner (and --fence) is not the holder");
  release->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  release->add_option("--owner", a->owner, "the holder")->required()->check(kId);
  auto* release_fence = release->add_option("--fence", a->fence,
                                            "the fence that acquire answered: without it only the owner name is checked")
                            ->transform(integer_range(1, std::numeric_limits<std::int64_t>::max()));
  add_connection_options(release, a->connection);
  release->callback([a, &exit_code, release_fence] {
    client::LockHolder holder{a->lock_key, a->owner, std::nullopt};
    if (release_fence->count() > 0) holder.fence = a->fence;
    exit_code = run_coordination(
        "lock release", a->connection, [&](Client& c) { return c.release_lock(holder); },
        [&](const Response& r) {
          std::printf("lock %s released by %s\n", a->lock_key.c_str(), a->owner.c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* cancel = lock->add_subcommand(
      "cancel", "ask KEY's holder to stop: its next renew answers lock_cancelled and the lock is freed");
  cancel->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  add_connection_options(cancel, a->connection);
  cancel->callback([a, &exit_code] {
    exit_code = run_coordination(
        "lock cancel", a->connection, [&](Client& c) { return c.cancel_lock(a->lock_key); },
        [&](const Response& r) {
          const json::value& l = r.json();
          if (member(l, "cancelled").is_bool() && member(l, "cancelled").get_bool()) {
            std::printf("lock %s: its holder %s is asked to stop; its next renew frees the lock\n", a->lock_key.c_str(),
                        field(l, "owner").c_str());
          } else {
            std::printf("lock %s is not held; nothing to cancel\n", a->lock_key.c_str());
          }
          print_fields(l);
        });
  });

  a = std::make_shared<Args>();
  auto* show = lock->add_subcommand("show", "show KEY's lock: holder, fence, lease");
  show->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run_coordination(
        "lock show", a->connection, [&](Client& c) { return c.get_lock(a->lock_key); },
        [](const Response& r) { print_lock(r.json()); });
  });
}

void add_idempotency_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* idem = app.add_subcommand(
      "idem", "idempotency keys for your own side effects: begin, do it once, finish (admin key)");
  idem->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* begin = idem->add_subcommand(
      "begin", "claim KEY for the request --fingerprint names: exit 0 go ahead; 11 finished before (its response is "
               "printed: do not do it again); 12 in progress elsewhere");
  begin->add_option("KEY", a->lock_key, "the idempotency key")->required()->check(kId);
  begin->add_option("--fingerprint", a->fingerprint, "what the request is (e.g. a hash of its body), 1-256 bytes")
      ->required()
      ->check(kFingerprint);
  begin->add_option("--ttl-ms", a->ttl_ms, "the claim, from now: finish or abandon before it runs out")
      ->required()
      ->transform(integer_range(1, limits::kIdempotencyTtlMsMax));
  add_connection_options(begin, a->connection);
  begin->callback([a, &exit_code] {
    Response last = Response::success(0, nullptr);
    exit_code = run_coordination(
        "idem begin", a->connection,
        [&](Client& c) {
          last = c.begin_idempotency(a->lock_key, a->fingerprint, a->ttl_ms);
          return last;
        },
        [&](const Response& r) {
          if (r.status() == 201) {
            std::printf("idempotency key %s started: go ahead, then finish it before %s\n", a->lock_key.c_str(),
                        field(r.json(), "expires_at").c_str());
          } else {
            std::printf("idempotency key %s finished at %s; its response:\n%s\n", a->lock_key.c_str(),
                        field(r.json(), "finished_at").c_str(), json::serialize(member(r.json(), "response")).c_str());
          }
          print_fields(r.json());
        });
    if (exit_code == kExitOk && last.status() != 201) {
      note("idem begin", "already finished: replay its response, do not do it again (exit " +
                             std::to_string(kExitReplayed) + ")");
      exit_code = kExitReplayed;
    }
  });

  a = std::make_shared<Args>();
  auto* finish = idem->add_subcommand("finish", "store KEY's outcome (--response) to replay to every later begin");
  finish->add_option("KEY", a->lock_key, "the idempotency key")->required()->check(kId);
  finish->add_option("--fingerprint", a->fingerprint, "the fingerprint it was begun with")
      ->required()
      ->check(kFingerprint);
  finish->add_option("--response", a->response, "the JSON value to replay (not null, at most 32 KiB)")
      ->required()
      ->check(kResponseJson);
  add_connection_options(finish, a->connection);
  finish->callback([a, &exit_code] {
    const json::value response = json::parse(a->response);
    exit_code = run_coordination(
        "idem finish", a->connection,
        [&](Client& c) { return c.finish_idempotency(a->lock_key, a->fingerprint, response); },
        [&](const Response& r) {
          std::printf("idempotency key %s finished; its response is replayed to every later begin\n",
                      a->lock_key.c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* abandon = idem->add_subcommand("abandon", "give KEY back after a failure that did nothing: it can be begun again");
  abandon->add_option("KEY", a->lock_key, "the idempotency key")->required()->check(kId);
  abandon->add_option("--fingerprint", a->fingerprint, "the fingerprint it was begun with")
      ->required()
      ->check(kFingerprint);
  add_connection_options(abandon, a->connection);
  abandon->callback([a, &exit_code] {
    exit_code = run_coordination(
        "idem abandon", a->connection, [&](Client& c) { return c.abandon_idempotency(a->lock_key, a->fingerprint); },
        [&](const Response& r) {
          std::printf("idempotency key %s abandoned: it can be begun again\n", a->lock_key.c_str());
          print_fields(r.json());
        });
  });
}

void add_ratelimit_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* ratelimit = app.add_subcommand("ratelimit", "rate limits of the policies in the server's configuration (admin key)");
  ratelimit->require_subcommand(1);

  // The limited key is the second word, not --key: --key is the API key of every command.
  a = std::make_shared<Args>();
  auto* check = ratelimit->add_subcommand(
      "check", "count one attempt of KEY under POLICY; exit 13 if refused (retry_after_ms on stderr)");
  check->add_option("POLICY", a->policy, "a policy named in the server's configuration")->required()->check(kId);
  check->add_option("KEY", a->lock_key, "what is limited: a user, an address…")->required()->check(kId);
  auto* cost = check->add_option("--cost", a->cost, "units this attempt counts (default 1; at most the policy's limit)")
                   ->transform(integer_range(1, limits::kRateLimitMax));
  add_connection_options(check, a->connection);
  check->callback([a, &exit_code, cost] {
    std::optional<std::int64_t> units;
    if (cost->count() > 0) units = a->cost;
    exit_code = run_coordination(
        "ratelimit check", a->connection, [&](Client& c) { return c.check_ratelimit(a->policy, a->lock_key, units); },
        [&](const Response& r) {
          std::printf("allowed: %s remaining, a full budget again in %s ms\n", field(r.json(), "remaining").c_str(),
                      field(r.json(), "reset_after_ms").c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* reset = ratelimit->add_subcommand("reset", "forget KEY under POLICY: a full budget again (e.g. after a good login)");
  reset->add_option("POLICY", a->policy, "a policy named in the server's configuration")->required()->check(kId);
  reset->add_option("KEY", a->lock_key, "what is limited")->required()->check(kId);
  add_connection_options(reset, a->connection);
  reset->callback([a, &exit_code] {
    exit_code = run_coordination(
        "ratelimit reset", a->connection, [&](Client& c) { return c.reset_ratelimit(a->policy, a->lock_key); },
        [&](const Response& r) {
          std::printf("rate limit %s: %s has a full budget again\n", a->policy.c_str(), a->lock_key.c_str());
          print_fields(r.json());
        });
  });
}


}  // namespace tollgate::app::cli
