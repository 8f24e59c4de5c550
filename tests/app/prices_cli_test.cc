// Prices at the edges (api.md, Prices): `price set|show|list|versions`, `hold reserve --feature
// --quantity`, `hold commit --quantity`, `hold check` (exit 14 when a reservation would be refused)
// and their usage errors (exit 2, nothing sent) — each against a real server process.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/cli_output.h"
#include "support/server_process.h"

namespace tollgate {
namespace {

namespace json = boost::json;
using testing::ProcessResult;
using testing::ServerProcess;
using testing::describe;
using testing::one_document;
using testing::run_tollgate;

class PricesCliTest : public ::testing::Test {
 protected:
  ProcessResult cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--url", server_.url(), "--key", server_.admin_key()});
    return run_tollgate(args);
  }
  json::object json_of(std::vector<std::string> args, int exit_code = 0) {
    args.push_back("--json");
    const ProcessResult r = cli(std::move(args));
    EXPECT_EQ(r.exit_code, exit_code) << describe(r);
    const json::value v = one_document(r);
    return v.is_object() ? v.as_object() : json::object{};
  }

  ServerProcess server_;
};

std::int64_t num(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_int64() ? v->as_int64() : -1;
}

TEST_F(PricesCliTest, APriceIsSetVersionedAndChargedAtItsFrozenUnitPrice) {
  ProcessResult r = cli({"price", "set", "photo", "3"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("photo now costs 3 credits per unit (version 1)"), std::string::npos) << r.out;
  r = cli({"price", "set", "photo", "3"});
  EXPECT_NE(r.out.find("nothing changed"), std::string::npos) << r.out;
  ASSERT_EQ(cli({"account", "create", "ann"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "ann", "50", "--reference", "buy-1"}).exit_code, 0);

  const json::object hold = json_of({"hold", "reserve", "ann", "--feature", "photo", "--quantity", "4"});
  EXPECT_EQ(num(hold, "amount"), 12);
  EXPECT_EQ(num(hold, "unit_price"), 3);
  ASSERT_EQ(cli({"price", "set", "photo", "10"}).exit_code, 0);
  const json::object committed =
      json_of({"hold", "commit", std::string(hold.at("hold_id").as_string()), "--quantity", "2"});
  EXPECT_EQ(num(committed, "committed_amount"), 6);  // 2 × 3, the price the hold was made at

  r = cli({"price", "versions", "photo"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("VERSION  CREDITS_PER_UNIT"), std::string::npos) << r.out;
  // Newest first: version 2 at 10, then version 1 at 3.
  const std::size_t v2 = r.out.find("\n      2  ");
  const std::size_t v1 = r.out.find("\n      1  ");
  ASSERT_NE(v2, std::string::npos) << r.out;
  ASSERT_NE(v1, std::string::npos) << r.out;
  EXPECT_LT(v2, v1) << r.out;
  EXPECT_EQ(r.out.substr(v2, v1 - v2).find(" 10  "), r.out.substr(v2, v1 - v2).rfind(" 10  ")) << r.out;
  EXPECT_NE(r.out.substr(v2, v1 - v2).find(" 10  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(v1).find(" 3  "), std::string::npos) << r.out;
  r = cli({"price", "list"});
  EXPECT_NE(r.out.find("photo"), std::string::npos) << r.out;
  const json::object shown = json_of({"price", "show", "photo"});
  EXPECT_EQ(num(shown, "version"), 2);
}

TEST_F(PricesCliTest, ACheckSaysWhetherAReservationWouldBeMadeAndReservesNothing) {
  ASSERT_EQ(cli({"price", "set", "print", "4"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "create", "bob"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "bob", "10", "--reference", "buy-2"}).exit_code, 0);
  ProcessResult r = cli({"hold", "check", "bob", "10"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("allowed: 10 of 10 available on bob"), std::string::npos) << r.out;
  r = cli({"hold", "check", "bob", "--feature", "print", "--quantity", "3"});
  EXPECT_EQ(r.exit_code, 14) << describe(r);
  EXPECT_NE(r.out.find("refused (insufficient_credits): Not enough credits: 10 available, 12 needed."),
            std::string::npos)
      << r.out;
  const json::object account = json_of({"account", "show", "bob"});
  EXPECT_EQ(num(account, "available"), 10);
  EXPECT_EQ(num(account, "reserved"), 0);
}

TEST_F(PricesCliTest, AmountAndFeatureTogetherOrNeitherIsAUsageErrorAndSendsNothing) {
  ASSERT_EQ(cli({"account", "create", "cat"}).exit_code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"hold", "reserve", "cat", "3", "--feature", "photo"},
        std::vector<std::string>{"hold", "reserve", "cat"},
        std::vector<std::string>{"hold", "reserve", "cat", "3", "--quantity", "2"},
        std::vector<std::string>{"hold", "check", "cat"},
        std::vector<std::string>{"hold", "commit", "hold_1_0123456789abcdef", "--amount", "1", "--quantity", "1"},
        std::vector<std::string>{"price", "set", "photo", "0"}}) {
    const ProcessResult r = cli(args);
    EXPECT_EQ(r.exit_code, 2) << describe(r);
  }
  const ProcessResult unknown = cli({"hold", "reserve", "cat", "--feature", "nope"});
  EXPECT_EQ(unknown.exit_code, 1) << describe(unknown);
  EXPECT_NE(unknown.err.find("unknown feature \"nope\""), std::string::npos) << unknown.err;
  const ProcessResult holds = cli({"hold", "list", "--account", "cat", "--json"});
  EXPECT_NE(holds.out.find("\"holds\":[]"), std::string::npos) << holds.out;
}

}  // namespace
}  // namespace tollgate
