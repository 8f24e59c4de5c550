// tollgate demo: `tollgate demo kiosk` — the story that motivates the project, end to end, in one
// command with no set-up (issue 10).
//
//   tollgate demo kiosk [--kiosks N=8] [--credits C=20] [--guests G=40] [--seed S=42] [--json]
//       [--no-crash] [--time-scale X=25] [--keep]
//
// In a temporary folder it starts an in-process jobs::FakeProvider (15–25 s generations divided by
// the time scale, some refusals, lost answers, late answers and connections closed unanswered), and
// `tollgate serve` as a child process (this binary, /proc/self/exe) on a fresh SQLite file with
// that provider configured (status_url set) and Stripe payments configured ([payments.stripe]
// signing_secrets = a whsec_ secret made per run, [payments.stripe.packs] kiosk = C), and creates
// one account and a key for the kiosks. The owner buys the account's C credits at Stripe, no admin
// credit: the demo, as Stripe, posts a checkout.session.completed event (a session id made per run,
// payment_status paid, client_reference_id = the account, metadata.tollgate_pack = kiosk) to POST
// /v1/payments/stripe with its Stripe-Signature (payments::stripe_signature), then delivers the
// very same event again, as Stripe does: the first answers outcome "credited", the second
// "replayed", and the account was credited once, under the reference stripe:{session}. N kiosk
// threads share the account; G guests arrive at once and queue. Each guest: POST /v1/jobs (own
// client_request_id, cost 1), sent again with the SAME id on connection errors and 503 (never a new
// id); a 409 insufficient_credits while some credits are still reserved by jobs in flight waits and
// asks again (they may come back), a 409 with nothing reserved means sold out: the guest gets
// nothing; then GET /v1/jobs/{id}?wait_ms until the job ended. A failed job gives the guest nothing
// either. Unless --no-crash, the server is killed with SIGKILL in the middle and started again on
// the same database and port; the kiosks keep retrying and recovery settles the jobs that were in
// flight. A live progress line goes to stderr. The kiosk owner is told by webhook (issue 28): the
// account's low_balance_threshold is a quarter of the credits, an endpoint for its balance notices
// points at a demo::WebhookReceiver in this process, which checks each signature with
// webhooks::verify, tells each webhook-id once and prints balance_low, balance_depleted (and
// balance_recovered) as they arrive; every balance event of the account must reach it. When the
// guests are done one completed print "jammed" (the first guest's, in guest order, whose job
// completed): the owner gives its credit back with POST /v1/jobs/{id}/refund, reason "the print
// jammed", sent twice with one fixed request_id — the first moves 1 from used to available, the
// second nothing. With no completed job it says so and refunds nothing.
//
// At the end it checks (never assumes) tollgate's figures — images charged == completed jobs ==
// charge events == works the provider completed (id by id); used == images charged − refunded;
// purchased == the C credits bought, one `credited` event under stripe:{session}; one `refunded`
// event for the jammed print (its request_id, its job); audit violations 0; lost credits (purchased
// − available − reserved − used) 0; nothing left reserved; no job charged twice — and prints them
// next to what the textbook check-then-charge flow does with the same arrivals and the same
// provider fates (simulate_naive below). With --json the last stdout line is one JSON object. Exit
// code: 0 when every check of tollgate's figures holds, 1 when one does not, 3 when the server
// could not be started.
//
// Thread safety: registration and the command run on main()'s thread only; simulate_naive is pure.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "demo/fake_provider.h"

namespace tollgate::app {

struct DemoKioskOptions {
  int kiosks = 8;
  std::int64_t credits = 20;
  int guests = 40;
  std::uint64_t seed = 42;
  bool json = false;
  bool crash = true;
  bool keep = false;       // keep the temporary folder (database, configuration, server log)
  double time_scale = 25;  // 15–25 s generations → 600–1000 ms
};

// The provider the demo runs (and the textbook flow is simulated against).
jobs::FakeProviderOptions demo_provider_options(const DemoKioskOptions& options);
// The client_request_id of guest `guest` (0-based).
std::string demo_guest_id(const DemoKioskOptions& options, int guest);
// When the demo kills the server, in ms after the guests arrived.
std::int64_t demo_crash_at_ms(const DemoKioskOptions& options);

// The textbook flow on the same arrivals, simulated in memory (deterministic): each kiosk takes the
// next guest, reads the balance (no lock, no hold: other kiosks' calls in flight are invisible),
// refuses when it is below the cost, else marks the generation "in progress" (a row the app clears
// when the call ends), calls the provider with the guest's id (same fate as in tollgate's run:
// plan_request), gives up after `client_timeout_ms` (clearing the mark), and on a 2xx answer in time
// subtracts the cost — unconditionally, since it checked before. The app dies at the demo's crash
// time: the calls in flight are forgotten (their work still happens at the provider, their marks
// stay — frozen credits, no reaper) and the guests at those kiosks press again after the restart
// (a new call). After the guests the jammed print's refund reaches the app twice, as in tollgate's
// run; with no request id each adds the credit back.
struct NaiveFigures {
  std::int64_t calls = 0;             // provider calls made
  std::int64_t images_delivered = 0;  // 2xx answers in time, charged
  std::int64_t charged = 0;           // credits subtracted
  std::int64_t double_spends = 0;     // credits subtracted beyond what was purchased (spent twice)
  std::int64_t free_generations = 0;  // works the provider did that nobody paid for
  std::int64_t min_balance = 0;       // the lowest balance seen
  std::int64_t final_balance = 0;
  std::int64_t frozen_credits = 0;    // "in progress" marks left by the crash
  std::int64_t refused = 0;           // guests turned away by the balance check
  std::int64_t failed = 0;            // calls that ended without an image for the guest
  std::int64_t refunded = 0;          // credits the jammed print's refund, sent twice, gave back
};
NaiveFigures simulate_naive(const DemoKioskOptions& options, std::int64_t client_timeout_ms, std::int64_t restart_ms);

// Runs the demo; the exit code.
int run_demo_kiosk(const DemoKioskOptions& options);

// Adds `demo kiosk` to `app`; the command stores its exit code in `exit_code`, which must outlive
// app.parse().
void add_demo_command(CLI::App& app, int& exit_code);

}  // namespace tollgate::app
