#include "config/config.h"

#include "core/limits.h"

#include <arpa/inet.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace tollgate {
namespace {

std::string at(std::string_view source, const toml::source_region& where) {
  return std::string(source) + ":" + std::to_string(where.begin.line) + ": ";
}

// Reads typed values out of a TOML table and refuses keys it was not asked about.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string_view source, std::string prefix)
      : table_(table), source_(source), prefix_(std::move(prefix)) {}

  Status integer(const char* key, std::int64_t& out, std::int64_t min, std::int64_t max) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node) return ok_status();
    const auto* v = node->as_integer();
    if (!v) return invalid(at(source_, node->source()) + prefix_ + key + " must be an integer");
    if (v->get() < min || v->get() > max) {
      return invalid(at(source_, node->source()) + prefix_ + key + " must be from " + std::to_string(min) + " to " +
                     std::to_string(max) + ", got " + std::to_string(v->get()));
    }
    out = v->get();
    return ok_status();
  }

  Status string(const char* key, std::optional<std::string>& out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node) return ok_status();
    const auto* v = node->as_string();
    if (!v) return invalid(at(source_, node->source()) + prefix_ + key + " must be a string");
    out = v->get();
    return ok_status();
  }

  Status string(const char* key, std::string& out) {
    std::optional<std::string> v;
    if (auto s = string(key, v); !s) return s;
    if (v) out = *v;
    return ok_status();
  }

  Status required(const char* key) {
    if (table_.get(key)) return ok_status();
    return invalid(at(source_, table_.source()) + prefix_ + key + " is required");
  }

  // Every key not read so far is unknown.
  Status no_unknown_keys(std::initializer_list<const char*> tables = {}) {
    for (const auto& [key, node] : table_) {
      const std::string k(key.str());
      if (seen_.count(k)) continue;
      bool is_table = false;
      for (const char* t : tables) is_table |= k == t;
      if (is_table) continue;
      return invalid(at(source_, node.source()) + "unknown key " + prefix_ + k);
    }
    return ok_status();
  }

  std::string where(const char* key) const {
    const toml::node* node = table_.get(key);
    return at(source_, node ? node->source() : table_.source());
  }

 private:
  const toml::table& table_;
  std::string_view source_;
  std::string prefix_;
  std::set<std::string> seen_;
};

#define TG_TRY(expr)                      \
  do {                                    \
    if (auto s_ = (expr); !s_) return s_.error(); \
  } while (0)


bool database_kind_is_known(const std::string& database) {
  return sqlite_path(database) || is_postgres_uri(database);
}

std::string key_too_short(const char* key) {
  return std::string(key) + " must be at least " + std::to_string(limits::kAdminKeyLengthMin) + " characters";
}

}  // namespace

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

Result<ServerConfig> parse_config(std::string_view text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ":" << e.source().begin.line << ": " << e.description();
    return invalid(msg.str());
  }
  ServerConfig c;
  TableReader top(root, source, "");
  TG_TRY(top.string("listen", c.listen));
  TG_TRY(top.string("database", c.database));
  TG_TRY(top.string("admin_key", c.admin_key));
  TG_TRY(top.string("metrics_key", c.metrics_key));
  TG_TRY(top.integer("database_pool_size", c.database_pool_size, 1, limits::kDatabasePoolSizeMax));
  TG_TRY(top.integer("database_timeout_ms", c.database_timeout_ms, limits::kDatabaseTimeoutMsMin,
                     limits::kDatabaseTimeoutMsMax));
  TG_TRY(top.integer("hold_ttl_ms", c.hold_ttl_ms, limits::kHoldTtlMsMin, limits::kHoldTtlMsMax));
  TG_TRY(top.integer("hold_ttl_max_ms", c.hold_ttl_max_ms, limits::kHoldTtlMsMin, limits::kHoldTtlMsMax));
  TG_TRY(top.integer("reaper_interval_ms", c.reaper_interval_ms, limits::kReaperIntervalMsMin,
                     limits::kReaperIntervalMsMax));
  std::optional<std::string> late;
  TG_TRY(top.string("late_commit", late));
  if (late) {
    auto policy = parse_late_commit_policy(*late);
    if (!policy) return invalid(top.where("late_commit") + "late_commit must be charge, forgive or reject");
    c.late_commit = *policy;
  }
  TG_TRY(top.no_unknown_keys({"providers", "ratelimits"}));
  // Values checked again by validate_config() (which also sees the environment and the flags),
  // checked here too so that a bad one in the file is reported with its line.
  if (root.get("listen")) {
    if (auto listen = parse_listen(c.listen); !listen) return invalid(top.where("listen") + listen.error().detail);
  }
  if (root.get("database") && !database_kind_is_known(c.database)) {
    return invalid(top.where("database") + "database must be sqlite:PATH or a postgresql:// URI, got " + c.database);
  }
  if (c.admin_key && c.admin_key->size() < limits::kAdminKeyLengthMin) {
    return invalid(top.where("admin_key") + key_too_short("admin_key"));
  }
  if (c.metrics_key && c.metrics_key->size() < limits::kAdminKeyLengthMin) {
    return invalid(top.where("metrics_key") + key_too_short("metrics_key"));
  }

  auto tables = [&](const char* name, auto&& each) -> Status {
    const toml::node* node = root.get(name);
    if (!node) return ok_status();
    const auto* t = node->as_table();
    if (!t) return invalid(at(source, node->source()) + name + " must be a table");
    for (const auto& [key, child] : *t) {
      const std::string child_name(key.str());
      const auto* ct = child.as_table();
      if (!ct) return invalid(at(source, child.source()) + name + "." + child_name + " must be a table");
      if (auto s = each(child_name, *ct); !s) return s;
    }
    return ok_status();
  };

  TG_TRY(tables("providers", [&](const std::string& name, const toml::table& t) -> Status {
    ProviderConfig p;
    TableReader r(t, source, "providers." + name + ".");
    if (auto s = r.required("url"); !s) return s;
    if (auto s = r.string("url", p.url); !s) return s;
    if (auto s = r.string("status_url", p.status_url); !s) return s;
    if (auto s = r.integer("timeout_ms", p.timeout_ms, 1, limits::kProviderTimeoutMsMax); !s) return s;
    if (auto s = r.integer("expected_duration_ms", p.expected_duration_ms, 1, limits::kProviderTimeoutMsMax); !s) return s;
    if (auto s = r.integer("max_attempts", p.max_attempts, 1, limits::kProviderAttemptsMax); !s) return s;
    if (auto s = r.no_unknown_keys(); !s) return s;
    if (p.timeout_ms < 3 * p.expected_duration_ms) {
      return invalid(r.where("timeout_ms") + "providers." + name + ".timeout_ms must be at least 3 × expected_duration_ms (" +
                     std::to_string(3 * p.expected_duration_ms) + ")");
    }
    if (c.hold_ttl_ms < 3 * p.expected_duration_ms) {
      return invalid(r.where("expected_duration_ms") + "hold_ttl_ms (" + std::to_string(c.hold_ttl_ms) +
                     ") must be at least 3 × providers." + name + ".expected_duration_ms");
    }
    c.providers.emplace(name, std::move(p));
    return ok_status();
  }));

  TG_TRY(tables("ratelimits", [&](const std::string& name, const toml::table& t) -> Status {
    RateLimitConfig rl;
    TableReader r(t, source, "ratelimits." + name + ".");
    if (auto s = r.required("limit"); !s) return s;
    if (auto s = r.required("period_ms"); !s) return s;
    if (auto s = r.integer("limit", rl.limit, 1, limits::kRateLimitMax); !s) return s;
    if (auto s = r.integer("period_ms", rl.period_ms, 1, limits::kRateLimitPeriodMsMax); !s) return s;
    std::optional<std::string> store;
    if (auto s = r.string("store", store); !s) return s;
    if (store) {
      if (*store == "shared") rl.store = RateLimitStore::shared;
      else if (*store == "local") rl.store = RateLimitStore::local;
      else return invalid(r.where("store") + "ratelimits." + name + ".store must be shared or local");
    }
    if (auto s = r.no_unknown_keys(); !s) return s;
    c.ratelimits.emplace(name, rl);
    return ok_status();
  }));

  if (c.hold_ttl_ms > c.hold_ttl_max_ms) {
    return invalid(top.where("hold_ttl_ms") + "hold_ttl_ms (" + std::to_string(c.hold_ttl_ms) +
                   ") must not exceed hold_ttl_max_ms (" + std::to_string(c.hold_ttl_max_ms) + ")");
  }
  return c;
}

Status validate_config(const ServerConfig& c) {
  if (c.hold_ttl_ms < 1 || c.hold_ttl_ms > c.hold_ttl_max_ms) {
    return invalid("hold_ttl_ms must be from 1 to hold_ttl_max_ms (" + std::to_string(c.hold_ttl_max_ms) + ")");
  }
  if (c.hold_ttl_max_ms < limits::kHoldTtlMsMin || c.hold_ttl_max_ms > limits::kHoldTtlMsMax) {
    return invalid("hold_ttl_max_ms must be from 1 to " + std::to_string(limits::kHoldTtlMsMax) + " (30 days)");
  }
  if (c.reaper_interval_ms < limits::kReaperIntervalMsMin || c.reaper_interval_ms > limits::kReaperIntervalMsMax) {
    return invalid("reaper_interval_ms must be from " + std::to_string(limits::kReaperIntervalMsMin) + " to " +
                   std::to_string(limits::kReaperIntervalMsMax));
  }
  if (auto listen = parse_listen(c.listen); !listen) return listen.error();
  if (c.database_pool_size < 1 || c.database_pool_size > limits::kDatabasePoolSizeMax) {
    return invalid("database_pool_size must be from 1 to " + std::to_string(limits::kDatabasePoolSizeMax));
  }
  if (c.database_timeout_ms < limits::kDatabaseTimeoutMsMin || c.database_timeout_ms > limits::kDatabaseTimeoutMsMax) {
    return invalid("database_timeout_ms must be from " + std::to_string(limits::kDatabaseTimeoutMsMin) + " to " +
                   std::to_string(limits::kDatabaseTimeoutMsMax));
  }
  if (!database_kind_is_known(c.database)) {
    return invalid("database must be sqlite:PATH or a postgresql:// URI, got " + c.database);
  }
  if (c.admin_key && c.admin_key->size() < limits::kAdminKeyLengthMin) return invalid(key_too_short("admin_key"));
  if (c.metrics_key && c.metrics_key->size() < limits::kAdminKeyLengthMin) return invalid(key_too_short("metrics_key"));
  for (const auto& [name, p] : c.providers) {
    if (c.hold_ttl_ms < 3 * p.expected_duration_ms) {
      return invalid("hold_ttl_ms must be at least 3 × providers." + name + ".expected_duration_ms");
    }
  }
  return ok_status();
}

Result<ServerConfig> load_config(const ConfigOverrides& o, EnvLookup env) {
  ServerConfig c;
  if (o.config_file) {
    std::ostringstream text;
    {
      std::ifstream in(*o.config_file);
      if (!in) return invalid("cannot read the configuration file " + *o.config_file);
      text << in.rdbuf();
    }
    auto parsed = parse_config(text.str(), *o.config_file);
    if (!parsed) return parsed.error();
    c = std::move(parsed).value();
  }
  auto env_int = [&](const char* name, std::int64_t& out) -> Status {
    auto v = env(name);
    if (!v) return ok_status();
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0) return invalid(std::string(name) + " must be an integer");
    out = n;
    return ok_status();
  };
  if (auto v = env("TOLLGATE_LISTEN")) c.listen = *v;
  if (auto v = env("TOLLGATE_DATABASE")) c.database = *v;
  if (auto v = env("TOLLGATE_ADMIN_KEY")) c.admin_key = *v;
  if (auto v = env("TOLLGATE_METRICS_KEY")) c.metrics_key = *v;
  TG_TRY(env_int("TOLLGATE_HOLD_TTL_MS", c.hold_ttl_ms));
  TG_TRY(env_int("TOLLGATE_HOLD_TTL_MAX_MS", c.hold_ttl_max_ms));
  TG_TRY(env_int("TOLLGATE_REAPER_INTERVAL_MS", c.reaper_interval_ms));
  TG_TRY(env_int("TOLLGATE_DATABASE_POOL_SIZE", c.database_pool_size));
  TG_TRY(env_int("TOLLGATE_DATABASE_TIMEOUT_MS", c.database_timeout_ms));
  if (auto v = env("TOLLGATE_LATE_COMMIT")) {
    auto policy = parse_late_commit_policy(*v);
    if (!policy) return invalid("TOLLGATE_LATE_COMMIT must be charge, forgive or reject");
    c.late_commit = *policy;
  }
  if (o.listen) c.listen = *o.listen;
  if (o.database) c.database = *o.database;
  TG_TRY(validate_config(c));
  return c;
}

bool is_postgres_uri(const std::string& database) {
  return database.rfind("postgresql://", 0) == 0 || database.rfind("postgres://", 0) == 0;
}

std::optional<std::string> sqlite_path(const std::string& database) {
  constexpr std::string_view prefix = "sqlite:";
  if (database.rfind(prefix, 0) != 0 || database.size() == prefix.size()) return std::nullopt;
  return database.substr(prefix.size());
}

Result<ListenAddress> parse_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return invalid("listen must be HOST:PORT, got " + listen);
  ListenAddress out;
  out.host = listen.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') out.host = out.host.substr(1, out.host.size() - 2);
  const std::string port = listen.substr(colon + 1);
  char* end = nullptr;
  const long n = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || n < 0 || n > 65535) return invalid("listen port must be 0-65535, got " + port);
  // The server binds an IP address (or localhost); a host name would only fail later, at bind time.
  in_addr v4{};
  in6_addr v6{};
  if (out.host != "localhost" && inet_pton(AF_INET, out.host.c_str(), &v4) != 1 &&
      inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) {
    return invalid("listen host must be an IP address or localhost, got " + out.host);
  }
  out.port = static_cast<std::uint16_t>(n);
  return out;
}

}  // namespace tollgate
