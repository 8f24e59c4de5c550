#include "config/proxies.h"

#include <arpa/inet.h>

#include <cstring>

#include "core/limits.h"
#include "core/parse.h"

namespace tollgate {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One hop of a forwarding header as an address: "192.0.2.1", "192.0.2.1:4711", "[2001:db8::1]",
// "[2001:db8::1]:4711", "2001:db8::1", with or without the quotes of Forwarded.
std::optional<IpAddress> parse_hop(std::string_view hop) {
  hop = trim(hop);
  if (hop.size() >= 2 && hop.front() == '"' && hop.back() == '"') hop = hop.substr(1, hop.size() - 2);
  if (!hop.empty() && hop.front() == '[') {
    const auto close = hop.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    return parse_ip(hop.substr(1, close - 1));
  }
  if (auto ip = parse_ip(hop)) return ip;
  const auto colon = hop.find(':');
  if (colon != std::string_view::npos && hop.find(':', colon + 1) == std::string_view::npos) {
    return parse_ip(hop.substr(0, colon));  // IPv4 with a port
  }
  return std::nullopt;
}

// The hops of X-Forwarded-For ("a, b, c") or the for= values of Forwarded, left to right, as text.
std::vector<std::string_view> split_hops(std::string_view header, bool forwarded) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= header.size()) {
    const std::size_t comma = header.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? header.size() : comma;
    std::string_view element = trim(header.substr(start, end - start));
    if (!forwarded) {
      if (!element.empty()) out.push_back(element);
    } else {
      // for=…;proto=…;by=… — the for parameter, any case; an element without one is a hop we
      // cannot read.
      std::string_view value;
      std::size_t p = 0;
      while (p <= element.size()) {
        const std::size_t semi = element.find(';', p);
        const std::string_view pair = trim(element.substr(p, (semi == std::string_view::npos ? element.size() : semi) - p));
        if (pair.size() > 4 && (pair[0] == 'f' || pair[0] == 'F') && (pair[1] == 'o' || pair[1] == 'O') &&
            (pair[2] == 'r' || pair[2] == 'R') && pair[3] == '=') {
          value = pair.substr(4);
        }
        if (semi == std::string_view::npos) break;
        p = semi + 1;
      }
      if (!element.empty()) out.push_back(value.empty() ? std::string_view("unknown") : value);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::string IpAddress::text() const {
  char out[INET6_ADDRSTRLEN] = {0};
  if (v4) {
    ::inet_ntop(AF_INET, bytes.data() + 12, out, sizeof out);
  } else {
    ::inet_ntop(AF_INET6, bytes.data(), out, sizeof out);
  }
  return out;
}

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string s(text);
  IpAddress out;
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    out.bytes[10] = out.bytes[11] = 0xff;
    std::memcpy(out.bytes.data() + 12, &v4, 4);
    out.v4 = true;
    return out;
  }
  if (::inet_pton(AF_INET6, s.c_str(), &v6) != 1) return std::nullopt;
  std::memcpy(out.bytes.data(), &v6, 16);
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  out.v4 = std::memcmp(out.bytes.data(), kMapped, sizeof kMapped) == 0;
  return out;
}

bool Cidr::contains(const IpAddress& address) const {
  if (address.v4 != network.v4) return false;
  const int offset = network.v4 ? 96 : 0;  // an IPv4 prefix counts the last 32 bits
  const int bits = offset + prefix_bits;
  for (int i = 0; i < bits / 8; ++i) {
    if (address.bytes[i] != network.bytes[i]) return false;
  }
  if (bits % 8 == 0) return true;
  const std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - bits % 8));
  return (address.bytes[bits / 8] & mask) == (network.bytes[bits / 8] & mask);
}

Result<Cidr> parse_cidr(std::string_view text) {
  const std::string shown(text);
  const auto slash = text.find('/');
  auto address = parse_ip(text.substr(0, slash));
  if (!address) {
    return invalid("'" + shown + "' is not a CIDR: write an IPv4 or IPv6 address with an optional /prefix (10.0.0.0/8, fd00::/8)");
  }
  Cidr out;
  out.network = *address;
  const int max_bits = address->v4 ? 32 : 128;
  out.prefix_bits = max_bits;
  if (slash != std::string_view::npos) {
    const std::string_view bits = text.substr(slash + 1);
    const auto n = parse_int(bits, 0, max_bits);
    if (!n) {
      return invalid("'" + shown + "': the prefix length must be from 0 to " + std::to_string(max_bits));
    }
    out.prefix_bits = static_cast<int>(*n);
  }
  // The network address itself, its host bits zero: "10.0.0.1/8" is a typo for one of two things.
  Cidr zeroed = out;
  const int offset = out.network.v4 ? 96 : 0;
  for (int bit = offset + out.prefix_bits; bit < 128; ++bit) {
    zeroed.network.bytes[bit / 8] = static_cast<std::uint8_t>(zeroed.network.bytes[bit / 8] & ~(0x80 >> (bit % 8)));
  }
  if (zeroed.network.bytes != out.network.bytes) {
    return invalid("'" + shown + "' has bits set after its /" + std::to_string(out.prefix_bits) + " prefix: write " +
                   zeroed.network.text() + "/" + std::to_string(out.prefix_bits) + " for the network, or the address alone");
  }
  return out;
}

bool TrustedProxies::trusts(const IpAddress& address) const {
  for (const Cidr& c : cidrs_) {
    if (c.contains(address)) return true;
  }
  return false;
}

std::string TrustedProxies::client_address(const std::string& peer, std::string_view x_forwarded_for,
                                           std::string_view forwarded) const {
  if (cidrs_.empty()) return peer;
  auto current = parse_ip(peer);
  if (!current || !trusts(*current)) return peer;
  const bool use_forwarded = trim(x_forwarded_for).empty();
  const auto hops = split_hops(use_forwarded ? forwarded : x_forwarded_for, use_forwarded);
  std::size_t walked = 0;
  for (auto it = hops.rbegin(); it != hops.rend() && walked < limits::kForwardedHopsMax; ++it, ++walked) {
    auto hop = parse_hop(*it);
    if (!hop) break;  // unreadable: the last address known stands
    current = hop;
    if (!trusts(*current)) break;
  }
  return current->text();
}

}  // namespace tollgate
