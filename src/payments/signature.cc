// Payment providers' signatures (see signature.h).
#include "payments/signature.h"

#include <charconv>
#include <optional>

#include "webhooks/signature.h"

namespace tollgate::payments {
namespace {

Error refused(std::string detail) { return Error::make(Code::invalid_signature, std::move(detail) + "; nothing changed"); }

std::optional<std::int64_t> parse_seconds(std::string_view text) {
  std::int64_t v = 0;
  if (text.empty() || text.size() > 12) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

// Whether a signature made at `timestamp_s` is within `tolerance_ms` of now (either side).
Status check_age(std::int64_t timestamp_s, std::int64_t now_ms, std::int64_t tolerance_ms) {
  const std::int64_t age_ms = now_ms - timestamp_s * 1000;  // |t| < 10^12 s: no overflow
  if (age_ms > tolerance_ms || -age_ms > tolerance_ms) {
    return refused("the signature's time stamp is " + std::to_string(age_ms / 1000) + " s " +
                   (age_ms > 0 ? "old" : "in the future") + ", more than the tolerance of " +
                   std::to_string(tolerance_ms / 1000) + " s (a replayed event, or a clock that is off)");
  }
  return ok_status();
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace

std::string stripe_signature(std::string_view secret, std::int64_t timestamp_s, std::string_view body) {
  std::string message = std::to_string(timestamp_s);
  message += '.';
  message.append(body);
  return hex(webhooks::hmac_sha256(secret, message));
}

Status verify_stripe(std::string_view header, std::span<const std::string> secrets, std::string_view body,
                     std::int64_t now_ms, std::int64_t tolerance_ms) {
  if (secrets.empty()) return refused("no Stripe signing secret is configured ([payments.stripe] signing_secrets)");
  if (header.empty()) return refused("the Stripe-Signature header is missing");
  std::optional<std::int64_t> timestamp;
  std::vector<std::string_view> v1;
  for (std::size_t part = 0; part < 64 && !header.empty(); ++part) {  // bounded: a header has a few parts
    const auto comma = header.find(',');
    const std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "t") timestamp = parse_seconds(value);
    if (key == "v1") v1.push_back(value);
  }
  if (!timestamp) return refused("the Stripe-Signature header has no valid time stamp (t=<unix seconds>)");
  if (v1.empty()) return refused("the Stripe-Signature header has no v1 signature");
  if (auto fresh = check_age(*timestamp, now_ms, tolerance_ms); !fresh) return fresh;
  for (const std::string& secret : secrets) {
    const std::string expected = stripe_signature(secret, *timestamp, body);
    for (std::string_view given : v1) {
      if (webhooks::equal_in_constant_time(given, expected)) return ok_status();
    }
  }
  return refused("no v1 signature of the Stripe-Signature header matches the body with a configured signing secret");
}

Status verify_standard(const StandardHeaders& h, std::string_view secret, std::string_view body, std::int64_t now_ms,
                       std::int64_t tolerance_ms) {
  if (secret.empty()) return refused("no payment webhook secret is configured ([payments.webhook] secret)");
  if (h.id.empty()) return refused("the webhook-id header is missing");
  if (h.timestamp.empty()) return refused("the webhook-timestamp header is missing");
  if (h.signature.empty()) return refused("the webhook-signature header is missing");
  const auto timestamp = parse_seconds(h.timestamp);
  if (!timestamp) return refused("the webhook-timestamp header is not Unix seconds");
  if (auto fresh = check_age(*timestamp, now_ms, tolerance_ms); !fresh) return fresh;
  if (!webhooks::verify(h.signature, secret, h.id, *timestamp, body)) {
    return refused("no v1 signature of the webhook-signature header matches the body with the configured secret");
  }
  return ok_status();
}

}  // namespace tollgate::payments
