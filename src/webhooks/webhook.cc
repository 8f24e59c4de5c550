// Webhook endpoints: names, ids, secrets and the checks of what a caller registers (webhook.h).
#include "webhooks/webhook.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <set>
#include <utility>

#include "core/checked.h"
#include "core/limits.h"
#include "core/model.h"
#include "core/parse.h"
#include "core/suggest.h"

namespace tollgate::webhooks {
namespace {

constexpr std::array<std::pair<EndpointStatus, std::string_view>, 2> kStatuses{{
    {EndpointStatus::enabled, "enabled"},
    {EndpointStatus::disabled, "disabled"},
}};

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                            (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                            std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(v >> shift) & 0x3f]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) v |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out.push_back(kAlphabet[(v >> 18) & 0x3f]);
    out.push_back(kAlphabet[(v >> 12) & 0x3f]);
    out.push_back(rest == 2 ? kAlphabet[(v >> 6) & 0x3f] : '=');
    out.push_back('=');
  }
  return out;
}

bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_' || c == '~' || c == '%';
}

Status bad_url(std::string_view field, std::string why) {
  return invalid(std::string(field) + " must be an absolute http or https URL: " + std::move(why));
}

// The authority of an http(s) URL: host[:port], no userinfo.
Status check_authority(std::string_view authority, std::string_view field) {
  if (authority.find('@') != std::string_view::npos) {
    return bad_url(field, "a user name or password may not be part of it");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string_view::npos || close == 1) return bad_url(field, "an IPv6 host needs its closing ]");
    for (char c : host.substr(1, close - 1)) {
      if (std::isxdigit(static_cast<unsigned char>(c)) == 0 && c != ':' && c != '.') {
        return bad_url(field, "the IPv6 host has a character that cannot be in one");
      }
    }
    const std::string_view after = host.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad_url(field, "only a :port may follow the IPv6 host");
    if (!after.empty()) port = after.substr(1);
    if (!after.empty() && port.empty()) return bad_url(field, "the port is empty");
  } else {
    if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
      if (port.empty()) return bad_url(field, "the port is empty");
    }
    if (host.empty()) return bad_url(field, "it has no host");
    if (!std::all_of(host.begin(), host.end(), is_host_char)) {
      return bad_url(field, "the host has a character that cannot be in one");
    }
  }
  if (!port.empty() && !parse_int(port, 1, 65535)) return bad_url(field, "the port must be a number from 1 to 65535");
  return ok_status();
}

}  // namespace

std::string_view endpoint_status_name(EndpointStatus status) {
  for (const auto& [s, name] : kStatuses) {
    if (s == status) return name;
  }
  TG_ASSERT(false);
}

std::optional<EndpointStatus> parse_endpoint_status(std::string_view name) {
  for (const auto& [s, n] : kStatuses) {
    if (n == name) return s;
  }
  return std::nullopt;
}

std::string endpoint_id_from_random(std::string_view random_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  TG_ASSERT(random_bytes.size() >= 8);
  std::string out = "we_";
  for (std::size_t i = 0; i < 8; ++i) {
    const auto b = static_cast<unsigned char>(random_bytes[i]);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

std::string secret_from_random(std::string_view random_bytes) {
  TG_ASSERT(random_bytes.size() == limits::kWebhookSecretBytes);
  return "whsec_" + base64(random_bytes);
}

std::vector<std::string> signing_secrets(const Endpoint& e, std::int64_t now_ms) {
  std::vector<std::string> out{e.secret};
  TG_ASSERT(e.previous_secret.has_value() == e.previous_secret_until_ms.has_value());
  if (e.previous_secret && *e.previous_secret_until_ms > now_ms) out.push_back(*e.previous_secret);
  return out;
}

Endpoint endpoint_view(Endpoint e, std::int64_t now_ms) {
  TG_ASSERT(e.previous_secret.has_value() == e.previous_secret_until_ms.has_value());
  if (e.previous_secret_until_ms && *e.previous_secret_until_ms <= now_ms) {
    e.previous_secret.reset();
    e.previous_secret_until_ms.reset();
  }
  return e;
}

bool wants_event_type(const Endpoint& e, std::string_view event_type) {
  return e.event_types.empty() ||
         std::find(e.event_types.begin(), e.event_types.end(), event_type) != e.event_types.end();
}

bool wants_event(const Endpoint& e, std::string_view event_type, std::string_view account_id) {
  return wants_event_type(e, event_type) && (!e.account_id || *e.account_id == account_id);
}

namespace {
constexpr std::pair<DeliveryStatus, std::string_view> kDeliveryStatuses[] = {
    {DeliveryStatus::pending, "pending"},
    {DeliveryStatus::delivered, "delivered"},
    {DeliveryStatus::failed, "failed"},
};
}  // namespace

std::string_view delivery_status_name(DeliveryStatus status) {
  for (const auto& [s, name] : kDeliveryStatuses) {
    if (s == status) return name;
  }
  TG_ASSERT(false);
}

std::optional<DeliveryStatus> parse_delivery_status(std::string_view name) {
  for (const auto& [s, n] : kDeliveryStatuses) {
    if (n == name) return s;
  }
  return std::nullopt;
}

std::optional<std::int64_t> next_attempt_at_ms(std::int64_t attempts, std::int64_t at_ms, std::int64_t jitter_permille) {
  TG_ASSERT(attempts >= 1);
  TG_ASSERT(jitter_permille >= -kDeliveryJitterPermilleMax && jitter_permille <= kDeliveryJitterPermilleMax);
  constexpr auto kRetries = static_cast<std::int64_t>(std::size(kDeliveryRetryDelaysMs));
  if (attempts > kRetries) return std::nullopt;
  const std::int64_t delay_ms = kDeliveryRetryDelaysMs[attempts - 1] * (1000 + jitter_permille) / 1000;
  const auto due = checked_add(at_ms, delay_ms);
  TG_ASSERT(due.has_value());  // times are milliseconds since 1970, delays hours
  return *due;
}

const std::vector<std::string>& event_type_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int i = 0; i <= static_cast<int>(kLastEventType); ++i) {
      out.emplace_back(event_type_name(static_cast<EventType>(i)));
    }
    return out;
  }();
  return names;
}

Status check_url(std::string_view url, std::string_view field) {
  if (url.empty()) return invalid(std::string(field) + " must not be empty");
  if (url.size() > limits::kWebhookUrlBytesMax) {
    return invalid(std::string(field) + " is " + std::to_string(url.size()) + " bytes; at most " +
                   std::to_string(limits::kWebhookUrlBytesMax) + " are accepted");
  }
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return bad_url(field, "it has a space, a control character or a non-ASCII byte");
  }
  const auto colon = url.find("://");
  if (colon == std::string_view::npos) return bad_url(field, "it has no scheme (http:// or https://)");
  std::string scheme(url.substr(0, colon));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  if (scheme != "http" && scheme != "https") {
    return bad_url(field, "the scheme " + std::string(url.substr(0, colon)) + " is neither http nor https");
  }
  const std::string_view rest = url.substr(colon + 3);
  if (rest.find('#') != std::string_view::npos) return bad_url(field, "a fragment (#…) is never sent");
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  return check_authority(authority, field);
}

Status check_event_types(const std::vector<std::string>& types, std::string_view field) {
  if (types.empty()) {
    return invalid(std::string(field) + " must name at least one event type; leave it out (or null) for every type");
  }
  std::set<std::string_view> seen;
  for (const std::string& type : types) {
    if (type.empty()) return invalid(std::string(field) + " has an empty event type");
    const auto& names = event_type_names();
    if (std::find(names.begin(), names.end(), type) == names.end()) {
      if (type.size() > limits::kSuggestNameBytesMax) return invalid(std::string(field) + " has an unknown event type");
      return invalid(std::string(field) + " has an unknown event type " + type + did_you_mean(type, names));
    }
    if (!seen.insert(type).second) return invalid(std::string(field) + " names " + type + " twice");
  }
  return ok_status();
}

std::string join_event_types(const std::vector<std::string>& types) {
  std::string out;
  for (const std::string& t : types) {
    if (!out.empty()) out += ',';
    out += t;
  }
  return out;
}

std::vector<std::string> split_event_types(std::string_view stored) {
  std::vector<std::string> out;
  while (!stored.empty()) {
    const auto comma = stored.find(',');
    out.emplace_back(stored.substr(0, comma));
    if (comma == std::string_view::npos) break;
    stored.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace tollgate::webhooks
