#include "http/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>

namespace tollgate::http {
namespace {


std::array<unsigned char, 32> random_bytes() {
  std::array<unsigned char, 32> out{};
  TG_ASSERT(RAND_bytes(out.data(), static_cast<int>(out.size())) == 1);  // the OS CSPRNG
  return out;
}

Error unauthorized(std::string detail) { return Error::make(Code::unauthorized, std::move(detail)); }

}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  TG_ASSERT(EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) == 1);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string new_secret() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const auto bytes = random_bytes();
  std::string out = "tgk_";
  // base64url without padding: 32 bytes → 43 characters.
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(buffer >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (6 - bits)) & 0x3f]);
  return out;
}

std::string new_key_id() {
  const auto bytes = random_bytes();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "key_";
  for (int i = 0; i < 8; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xf]);
  }
  return out;
}

Authenticator::Authenticator(KeyDirectory& keys, const Clock& clock, std::optional<std::string> admin_key,
                             KeyUseRecorder* key_uses)
    : keys_(keys),
      clock_(clock),
      admin_sha256_(admin_key ? std::optional(sha256_hex(*admin_key)) : std::nullopt),
      key_uses_(key_uses) {}

std::optional<Result<Principal>> Authenticator::authenticate_cached(std::string_view header) {
  constexpr std::string_view kBearer = "Bearer ";
  if (header.empty()) return unauthorized("an Authorization: Bearer <key> header is required");
  if (header.substr(0, kBearer.size()) != kBearer || header.size() == kBearer.size() ||
      header.size() > limits::kAuthorizationBytesMax) {
    return unauthorized("the Authorization header must be 'Bearer <key>'");
  }
  const std::string hash = sha256_hex(header.substr(kBearer.size()));
  if (admin_sha256_ && constant_time_equal(hash, *admin_sha256_)) return Principal{true, std::nullopt, "admin", kAdminKeyScopes};
  const std::int64_t now = clock_.now_ms();
  MutexLock lock(mu_);
  auto it = cache_.find(hash);
  if (it == cache_.end() || now - it->second.fetched_at_ms >= limits::kAuthCacheMs) return std::nullopt;
  auto principal = answer(it->second, now);
  if (principal && key_uses_) key_uses_->record(principal->key_id);
  return principal;
}

Result<Principal> Authenticator::answer(const Cached& entry, std::int64_t now_ms) {
  if (!entry.principal) return unauthorized("this key was revoked");
  const auto& expires_at_ms = entry.principal->expires_at_ms;
  if (expires_at_ms && now_ms + entry.database_ahead_ms >= *expires_at_ms) {
    return unauthorized("this key expired at " + format_rfc3339_ms(*expires_at_ms));
  }
  return *entry.principal;
}

Result<Principal> Authenticator::authenticate(std::string_view header) {
  if (auto answer = authenticate_cached(header)) return std::move(*answer);
  constexpr std::string_view kBearer = "Bearer ";
  const std::string hash = sha256_hex(header.substr(kBearer.size()));
  const std::int64_t now = clock_.now_ms();
  auto found = keys_.find_key(hash);
  if (!found) return found.error();
  if (!found->key || !constant_time_equal(found->key->secret_sha256, hash)) return unauthorized("unknown key");
  const ApiKey& key = *found->key;
  Cached entry;
  entry.fetched_at_ms = now;
  entry.database_ahead_ms = found->now_ms - now;
  // With an admin key configured, a stored admin key (the generated one) counts as revoked even
  // before its retirement at start-up is written (api.md: configuring a key retires it).
  const bool retired = admin_sha256_ && key.key_id == kGeneratedAdminKeyId && !key.account_id;
  if (!key.revoked_at_ms && !retired) {
    entry.principal = Principal{!key.account_id.has_value(), key.account_id, key.key_id, key.scopes,
                                key.expires_at_ms,          key.name,       key.created_at_ms};
  }
  {
    MutexLock lock(mu_);
    if (cache_.size() >= limits::kAuthCacheEntriesMax) cache_.clear();  // bounded; refilled from the database
    cache_[hash] = entry;
  }
  auto principal = answer(entry, now);
  if (principal && key_uses_) key_uses_->record(principal->key_id);
  return principal;
}

void Authenticator::forget(std::string_view key_id) {
  MutexLock lock(mu_);
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (it->second.principal && it->second.principal->key_id == key_id) {
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace tollgate::http
