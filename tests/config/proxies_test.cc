// trusted_proxies (config/proxies.h): CIDRs of both families, and the client's address as the
// rightmost untrusted hop of X-Forwarded-For or Forwarded, believed only from a trusted peer.
#include <gtest/gtest.h>

#include "config/proxies.h"

namespace tollgate {
namespace {

TrustedProxies trusting(std::initializer_list<const char*> cidrs) {
  std::vector<Cidr> out;
  for (const char* text : cidrs) {
    auto c = parse_cidr(text);
    EXPECT_TRUE(c.ok()) << text << ": " << c.error().detail;
    if (c) out.push_back(*c);
  }
  return TrustedProxies(std::move(out));
}

TEST(Cidr, MatchesItsNetworkInBothFamilies) {
  auto v4 = parse_cidr("10.1.0.0/16");
  ASSERT_TRUE(v4.ok());
  EXPECT_TRUE(v4->contains(*parse_ip("10.1.255.3")));
  EXPECT_FALSE(v4->contains(*parse_ip("10.2.0.1")));
  EXPECT_TRUE(v4->contains(*parse_ip("::ffff:10.1.0.9"))) << "an IPv4-mapped peer (a dual-stack listener)";
  EXPECT_FALSE(v4->contains(*parse_ip("::a01:9"))) << "an IPv6 address is not an IPv4 one";
  auto v6 = parse_cidr("2001:db8:8000::/33");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->contains(*parse_ip("2001:db8:ffff::1")));
  EXPECT_FALSE(v6->contains(*parse_ip("2001:db8:7fff::1")));
  EXPECT_FALSE(v6->contains(*parse_ip("10.1.0.1")));
  auto one = parse_cidr("::1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prefix_bits, 128);
  EXPECT_TRUE(one->contains(*parse_ip("::1")));
  auto all = parse_cidr("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->contains(*parse_ip("203.0.113.1")));
}

TEST(Cidr, BadOnesAreRefusedInPlainWords) {
  for (const char* bad : {"", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0/8", "fd00::/129", "host.local",
                          "10.0.0.0/8/8", "10.0.0.1/8", "10.0.0.0 /8"}) {
    auto c = parse_cidr(bad);
    EXPECT_FALSE(c.ok()) << "'" << bad << "' was accepted";
    if (!c) {
      EXPECT_NE(c.error().detail.find(std::string("'") + bad + "'"), std::string::npos) << c.error().detail;
    }
  }
}

TEST(TrustedProxies, TheRightmostUntrustedHopIsTheClient) {
  const TrustedProxies proxies = trusting({"10.0.0.0/8", "fd00::/8"});
  // From a trusted balancer: the hop it appended.
  EXPECT_EQ(proxies.client_address("10.0.0.5", "203.0.113.7", ""), "203.0.113.7");
  // Hops a client wrote itself, in front, are not believed: the rightmost untrusted one counts.
  EXPECT_EQ(proxies.client_address("10.0.0.5", "1.2.3.4, 203.0.113.7", ""), "203.0.113.7");
  // Two trusted proxies in a row are walked past.
  EXPECT_EQ(proxies.client_address("10.0.0.5", "1.2.3.4, 203.0.113.7, 10.9.9.9", ""), "203.0.113.7");
  EXPECT_EQ(proxies.client_address("fd00::1", "2001:db8::7, fd00::2", ""), "2001:db8::7");
  // Header lines joined with "," and ports are read.
  EXPECT_EQ(proxies.client_address("10.0.0.5", "203.0.113.7:4711", ""), "203.0.113.7");
  EXPECT_EQ(proxies.client_address("10.0.0.5", "[2001:db8::7]:4711", ""), "2001:db8::7");
  // Forwarded when there is no X-Forwarded-For.
  EXPECT_EQ(proxies.client_address("10.0.0.5", "", "for=192.0.2.60;proto=http;by=10.0.0.5"), "192.0.2.60");
  EXPECT_EQ(proxies.client_address("10.0.0.5", "", "for=1.2.3.4, For=\"[2001:db8:cafe::17]:4711\""), "2001:db8:cafe::17");
  EXPECT_EQ(proxies.client_address("10.0.0.5", "", "for=198.51.100.1, for=10.1.1.1"), "198.51.100.1");
  // Nothing forwarded: the balancer itself; an unreadable hop ends the walk at the last address known.
  EXPECT_EQ(proxies.client_address("10.0.0.5", "", ""), "10.0.0.5");
  EXPECT_EQ(proxies.client_address("10.0.0.5", "unknown", ""), "10.0.0.5");
  EXPECT_EQ(proxies.client_address("10.0.0.5", "203.0.113.7, garbage, 10.1.1.1", ""), "10.1.1.1");
  EXPECT_EQ(proxies.client_address("10.0.0.5", "", "for=_hidden"), "10.0.0.5");
}

TEST(TrustedProxies, AnUntrustedPeerIsTheClientWhateverItSends) {
  const TrustedProxies proxies = trusting({"10.0.0.0/8"});
  EXPECT_EQ(proxies.client_address("203.0.113.9", "198.51.100.1", "for=198.51.100.2"), "203.0.113.9");
  const TrustedProxies nobody;
  EXPECT_EQ(nobody.client_address("10.0.0.5", "198.51.100.1", ""), "10.0.0.5");
}

TEST(TrustedProxies, ALongChainOfTrustedHopsIsWalkedOnlySoFar) {
  const TrustedProxies proxies = trusting({"10.0.0.0/8"});
  std::string chain = "203.0.113.7";
  for (int i = 0; i < 100; ++i) chain += ", 10.0.0." + std::to_string(i % 250);
  const std::string client = proxies.client_address("10.0.0.5", chain, "");
  EXPECT_EQ(client.rfind("10.", 0), 0u) << "walked further than limits::kForwardedHopsMax: " << client;
}

}  // namespace
}  // namespace tollgate
