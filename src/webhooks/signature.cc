// Standard Webhooks signatures (see signature.h).
#include "webhooks/signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <vector>

#include "core/result.h"

namespace tollgate::webhooks {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  TG_ASSERT(n >= 0);
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                    c == '/' || c == '=';
    if (!ok) return std::nullopt;
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock keeps the padding's zero bytes: drop one per '='.
  std::size_t size = static_cast<std::size_t>(n);
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --size;
  out.resize(size);
  return out;
}

}  // namespace

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const unsigned char* r = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  TG_ASSERT(r != nullptr && length == 32);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string webhook_id(std::int64_t event_id) { return "evt_" + std::to_string(event_id); }

std::optional<std::string> secret_key(std::string_view secret) {
  if (secret.substr(0, kSecretPrefix.size()) == kSecretPrefix) secret.remove_prefix(kSecretPrefix.size());
  return base64_decode(secret);
}

std::optional<std::string> sign(std::string_view secret, std::string_view id, std::int64_t timestamp_s,
                                std::string_view body) {
  const auto key = secret_key(secret);
  if (!key) return std::nullopt;
  std::string message;
  message.reserve(id.size() + body.size() + 24);
  message.append(id).append(".").append(std::to_string(timestamp_s)).append(".").append(body);
  return "v1," + base64_encode(hmac_sha256(*key, message));
}

std::string signature_header(std::span<const std::string> secrets, std::string_view id, std::int64_t timestamp_s,
                             std::string_view body) {
  std::string out;
  for (const std::string& secret : secrets) {
    const auto one = sign(secret, id, timestamp_s, body);
    TG_ASSERT(one.has_value());  // secrets are made by secret_from_random
    if (!out.empty()) out += ' ';
    out += *one;
  }
  return out;
}

bool verify(std::string_view header, std::string_view secret, std::string_view id, std::int64_t timestamp_s,
            std::string_view body) {
  const auto expected = sign(secret, id, timestamp_s, body);
  if (!expected) return false;
  bool found = false;
  while (!header.empty()) {
    const auto space = header.find(' ');
    const std::string_view one = header.substr(0, space);
    if (equal_in_constant_time(one, *expected)) found = true;
    if (space == std::string_view::npos) break;
    header.remove_prefix(space + 1);
  }
  return found;
}

}  // namespace tollgate::webhooks
