// tollgate config: trusted proxies — which peers may say who the client is.
//
// Behind a load balancer every connection comes from the balancer. With `trusted_proxies` (CIDRs,
// IPv4 and IPv6) the client's address is read from the X-Forwarded-For header that a trusted peer
// sends (or, when there is none, from the `for=` parameters of Forwarded, RFC 7239): its hops are
// walked from the right, each trusted hop giving way to the one before it, and the first hop that
// is not a trusted proxy is the client (the rightmost untrusted hop). A peer that is not trusted
// is the client itself, whatever it sends. A hop that is not an IP address ends the walk at the
// last address known. The proxy must append to (or replace) the header it is trusted for and must
// not pass on the other from its clients.
//
// Thread safety: plain values; TrustedProxies is immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace tollgate {

// An IP address as 16 bytes (IPv4 as an IPv4-mapped IPv6 address, ::ffff:a.b.c.d).
struct IpAddress {
  std::array<std::uint8_t, 16> bytes{};
  bool v4 = false;
  std::string text() const;  // "192.0.2.1" or "2001:db8::1"
};

// "192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1" (taken as IPv4); nullopt for anything else.
std::optional<IpAddress> parse_ip(std::string_view text);

struct Cidr {
  IpAddress network;
  int prefix_bits = 0;  // of the address's own family: 0-32 for IPv4, 0-128 for IPv6
  bool contains(const IpAddress& address) const;
};

// "10.0.0.0/8", "2001:db8::/32", or a single address ("127.0.0.1": /32, "::1": /128). Host bits
// set below the prefix ("10.0.0.1/8") are refused: they are almost always a typo.
// invalid_request in plain words.
Result<Cidr> parse_cidr(std::string_view text);

class TrustedProxies {
 public:
  TrustedProxies() = default;
  explicit TrustedProxies(std::vector<Cidr> cidrs) : cidrs_(std::move(cidrs)) {}

  bool empty() const { return cidrs_.empty(); }
  bool trusts(const IpAddress& address) const;

  // The client's address: `peer` (the connection's, as text) when it is not trusted, else the
  // rightmost untrusted hop of `x_forwarded_for` (every X-Forwarded-For line, joined with ","),
  // or of `forwarded` (every Forwarded line) when there is no X-Forwarded-For.
  std::string client_address(const std::string& peer, std::string_view x_forwarded_for,
                             std::string_view forwarded) const;

 private:
  std::vector<Cidr> cidrs_;
};

}  // namespace tollgate
