// `tollgate demo kiosk` as a real process (issue 10): 4 kiosks, 10 credits, 20 guests, the server
// killed with SIGKILL in the middle and restarted. The demo checks tollgate's figures itself (exit
// code 0 only when they hold); this test reads its --json line and checks them again, and that the
// textbook flow it simulates on the same arrivals shows the damage tollgate prevents. The provider's
// fates and the simulation are functions of the seed, so the naive figures are deterministic. The
// kiosk owner's webhook receiver (in the demo's process) must be told "credits low" and "no credits".
// The credits are bought at Stripe (a signed checkout.session.completed, delivered twice: credited
// once), and one completed print "jams" at the end: its refund, sent twice, moves one credit once.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "demo/demo_kiosk.h"
#include "support/server_process.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::int64_t get(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr || !v->is_number()) {
    ADD_FAILURE() << "no number " << key << " in " << json::serialize(o);
    return -999;
  }
  return v->to_number<std::int64_t>();
}

TEST(DemoKiosk, CrashMidRunChargesExactlyTheCreditsAndTheTextbookFlowDoesNot) {
  const auto r = run_tollgate({"demo", "kiosk", "--json", "--kiosks", "4", "--credits", "10", "--guests", "20", "--seed", "42"},
                              {}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << "\n" << r.err;
  EXPECT_LT(r.duration.count(), 30'000) << "the demo should take well under 30 s";
  json::value parsed;
  ASSERT_NO_THROW(parsed = json::parse(last_line(r.out))) << r.out;
  ASSERT_TRUE(parsed.is_object()) << r.out;
  const auto& j = parsed.as_object();

  EXPECT_EQ(get(j, "credits"), 10);
  EXPECT_TRUE(j.at("crashed").as_bool()) << "the server was not killed in the middle";
  EXPECT_GT(get(j, "in_flight_at_crash"), 0);
  // The owner bought the 10 credits at Stripe: one signed checkout event, credited once under
  // stripe:{session}; the same event delivered again moved nothing.
  EXPECT_EQ(j.at("purchase_outcome").as_string(), "credited");
  EXPECT_EQ(j.at("purchase_replay_outcome").as_string(), "replayed");
  EXPECT_EQ(get(j, "purchase_credits"), 10);
  const std::string session(j.at("purchase_session").as_string());
  EXPECT_EQ(session.rfind("cs_demo_", 0), 0u) << session;
  EXPECT_EQ(j.at("purchase_reference").as_string(), "stripe:" + session);
  EXPECT_EQ(get(j, "credit_events"), 1);
  EXPECT_EQ(get(j, "credited"), 10);
  EXPECT_EQ(get(j, "purchased"), 10);
  EXPECT_NE(r.err.find("purchase: the owner bought the pack kiosk at Stripe; its signed checkout.session.completed (session " +
                       session + ") -> credited 10 credits; the same event delivered again -> replayed; purchased 10"),
            std::string::npos)
      << r.err;

  // 20 guests for 10 credits: exactly 10 images charged, the rest refused or failed (released); then
  // one print jammed: its credit given back once, though the refund was sent twice.
  EXPECT_EQ(get(j, "images_charged"), 10);
  EXPECT_EQ(get(j, "charged"), 10);
  EXPECT_EQ(get(j, "charge_events"), 10);
  EXPECT_TRUE(j.at("refund_job").is_string()) << json::serialize(j);
  EXPECT_EQ(j.at("refund_request_id").as_string(), "kiosk-jammed-print");
  EXPECT_EQ(get(j, "refunded"), 1);
  EXPECT_EQ(get(j, "refund_events"), 1);
  EXPECT_EQ(get(j, "refund_resend_moved"), 0);
  EXPECT_EQ(get(j, "used"), 9);
  EXPECT_EQ(get(j, "available"), 1);
  EXPECT_NE(r.err.find("'s print jammed; its credit given back (POST /v1/jobs/"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("refunded 1, used 10 -> 9; sent again: refunded 1, used 9 (nothing moved)"), std::string::npos)
      << r.err;
  EXPECT_EQ(get(j, "provider_works_completed"), 10);
  EXPECT_EQ(get(j, "audit_violations"), 0);
  EXPECT_EQ(get(j, "lost_credits"), 0);
  EXPECT_EQ(get(j, "double_charges"), 0);
  EXPECT_EQ(get(j, "reserved"), 0);
  EXPECT_EQ(get(j, "guests_unresolved"), 0);
  EXPECT_TRUE(j.at("checks_passed").as_bool()) << json::serialize(j.at("failures"));

  // The owner is told by webhook (issue 28): the account's threshold is a quarter of the credits; its
  // balance falls below it, then to nothing, and the demo's own receiver gets both notices, each
  // signature verified with webhooks::verify, each told once (a repeat after the crash is ignored).
  EXPECT_EQ(get(j, "low_balance_threshold"), 3);
  EXPECT_EQ(get(j, "owner_bad_signatures"), 0);
  std::vector<std::string> notices;
  for (const auto& n : j.at("owner_notices").as_array()) notices.emplace_back(n.as_string());
  EXPECT_NE(std::find(notices.begin(), notices.end(), "balance_low"), notices.end()) << r.out;
  EXPECT_NE(std::find(notices.begin(), notices.end(), "balance_depleted"), notices.end()) << r.out;
  EXPECT_EQ(static_cast<std::int64_t>(notices.size()), get(j, "owner_notice_events"));
  EXPECT_NE(r.err.find("owner told by webhook at"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("balance_low (credits low"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("balance_depleted (no credits: 0 available"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("owner told by webhook (threshold 3; each signature verified with webhooks::verify): "),
            std::string::npos)
      << r.out;

  // The textbook flow on the same arrivals: credits spent twice, a negative balance, free work.
  EXPECT_GT(get(j, "naive_double_spends"), 0);
  EXPECT_LT(get(j, "naive_min_balance"), 0);
  EXPECT_GT(get(j, "naive_free_generations"), 0);
  EXPECT_GT(get(j, "naive_frozen_credits"), 0);
  EXPECT_GT(get(j, "naive_images"), 10);
  EXPECT_EQ(get(j, "naive_refunded"), 2) << "the textbook flow gives the jammed print's credit back twice";
}

// The simulation alone: deterministic, and without a crash nothing is frozen.
TEST(DemoKiosk, TextbookSimulationIsDeterministic) {
  app::DemoKioskOptions o;
  o.kiosks = 4;
  o.credits = 10;
  o.guests = 20;
  o.seed = 42;
  const auto a = app::simulate_naive(o, 1000, 500);
  const auto b = app::simulate_naive(o, 1000, 500);
  EXPECT_EQ(a.charged, b.charged);
  EXPECT_EQ(a.min_balance, b.min_balance);
  EXPECT_EQ(a.free_generations, b.free_generations);
  EXPECT_EQ(a.frozen_credits, 4) << "the crash swallows the call of every kiosk";
  EXPECT_EQ(a.charged, a.images_delivered);
  EXPECT_EQ(a.double_spends, std::max<std::int64_t>(0, a.charged - o.credits));
  EXPECT_EQ(a.refunded, a.images_delivered > 0 ? 2 : 0) << "the jammed print's refund, sent twice, counted twice";
  o.crash = false;
  const auto c = app::simulate_naive(o, 1000, 500);
  EXPECT_EQ(c.frozen_credits, 0);
  EXPECT_EQ(c.calls, 20 - c.refused);
}

}  // namespace
}  // namespace tollgate::testing
