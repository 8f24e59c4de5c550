#include "config/config.h"

#include "config/config_keys.h"
#include "config/proxies.h"
#include "core/checked.h"
#include "core/limits.h"

#include <arpa/inet.h>
#include <toml++/toml.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <span>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "core/checked.h"
#include "core/limits.h"
#include "core/parse.h"
#include "core/suggest.h"
#include "webhooks/signature.h"

namespace tollgate {
namespace {

std::string at(std::string_view source, const toml::source_region& where) {
  return std::string(source) + ":" + std::to_string(where.begin.line) + ": ";
}

// Reads typed values out of a TOML table. Every read names a key the table accepts; a read that
// fails keeps its error, and finish() answers an unknown key first ("unknown key hold_ttl (did you
// mean hold_ttl_ms?)", the suggestion among the keys read and the sub-tables), else the first
// failed read: a misspelled key is reported as itself, not as the key it was meant to be.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string_view source, std::string prefix)
      : table_(table), source_(source), prefix_(std::move(prefix)) {}

  void integer(const char* key, std::int64_t& out, std::int64_t min, std::int64_t max) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node) return;
    const auto* v = node->as_integer();
    if (!v) return fail(at(source_, node->source()) + prefix_ + key + " must be an integer");
    if (v->get() < min || v->get() > max) {
      return fail(at(source_, node->source()) + prefix_ + key + " must be from " + std::to_string(min) + " to " +
                  std::to_string(max) + ", got " + std::to_string(v->get()));
    }
    out = v->get();
  }

  void string(const char* key, std::optional<std::string>& out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node) return;
    const auto* v = node->as_string();
    if (!v) return fail(at(source_, node->source()) + prefix_ + key + " must be a string");
    out = v->get();
  }

  void string(const char* key, std::string& out) {
    std::optional<std::string> v;
    string(key, v);
    if (v) out = *v;
  }

  // A list of strings; each element's line is where(key, i).
  void strings(const char* key, std::vector<std::string>& out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node) return;
    const auto* array = node->as_array();
    if (!array) return fail(at(source_, node->source()) + prefix_ + key + " must be a list of strings ([\"…\", \"…\"])");
    std::vector<std::string> values;
    for (const auto& element : *array) {
      const auto* v = element.as_string();
      if (!v) return fail(at(source_, element.source()) + prefix_ + key + " must be a list of strings ([\"…\", \"…\"])");
      values.push_back(v->get());
    }
    out = std::move(values);
  }

  // A string naming one of a few values: `parse` turns it into one, `choices` says which in words;
  // `names`, when given, are the values' names, of which the closest to a wrong value is suggested
  // ("must be debt or forgive (did you mean debt?)"; the wrong value itself is not repeated).
  template <typename T, typename Parse>
  void choice(const char* key, T& out, Parse&& parse, std::string_view choices,
              std::span<const std::string_view> names = {}) {
    std::optional<std::string> text;
    string(key, text);
    if (!text) return;
    auto value = parse(*text);
    if (!value) {
      return fail(where(key) + prefix_ + key + " must be " + std::string(choices) + did_you_mean(*text, names));
    }
    out = *value;
  }

  // The line of element `i` of the list `key`.
  std::string where(const char* key, std::size_t i) const {
    const toml::node* node = table_.get(key);
    const auto* array = node ? node->as_array() : nullptr;
    if (!array || i >= array->size()) return where(key);
    return at(source_, (*array)[i].source());
  }

  void required(const char* key) {
    seen_.insert(key);
    if (!table_.get(key)) fail(at(source_, table_.source()) + prefix_ + key + " is required");
  }

  // An unknown key (every key not read, but for the sub-tables named), else the first failed read.
  Status finish(std::initializer_list<const char*> tables = {}) {
    for (const char* t : tables) seen_.insert(t);
    for (const auto& [key, node] : table_) {
      const std::string k(key.str());
      if (seen_.count(k)) continue;
      return invalid(at(source_, node.source()) + "unknown key " + prefix_ + k + did_you_mean(k, seen_));
    }
    if (first_error_) return *first_error_;
    return ok_status();
  }

  std::string where(const char* key) const {
    const toml::node* node = table_.get(key);
    return at(source_, node ? node->source() : table_.source());
  }

 private:
  void fail(std::string detail) {
    if (!first_error_) first_error_ = Error::make(Code::invalid_request, std::move(detail));
  }

  const toml::table& table_;
  std::string_view source_;
  std::string prefix_;
  std::set<std::string> seen_;
  std::optional<Error> first_error_;
};

constexpr std::array<std::string_view, 2> kRefundShortfallNames = {"debt", "forgive"};

// Reads every row of `keys` from `r` into `out` (a [providers.NAME] table's rows into a
// ProviderConfig, …): the parser knows exactly the keys of the table (config/config_keys.h).
template <typename C>
void read_keys(TableReader& r, const std::vector<ConfigKey<C>>& keys, C& out) {
  for (const auto& k : keys) {
    if (k.required) r.required(k.name);
    std::visit(
        [&](auto member) {
          auto& v = out.*member;
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::int64_t>) {
            r.integer(k.name, v, k.min, k.max);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            r.strings(k.name, v);
          } else if constexpr (std::is_same_v<T, LateCommitPolicy>) {
            r.choice(k.name, v, parse_late_commit_policy, late_commit_choices());
          } else if constexpr (std::is_same_v<T, RateLimitStore>) {
            r.choice(k.name, v, parse_ratelimit_store, ratelimit_store_choices());
          } else if constexpr (std::is_same_v<T, RefundShortfall>) {
            r.choice(k.name, v, parse_refund_shortfall, refund_shortfall_choices(), kRefundShortfallNames);
          } else {
            r.string(k.name, v);
          }
        },
        k.field);
  }
}

// trusted_proxies: every entry a CIDR, at most limits::kTrustedProxiesMax; `where(i)` is the place
// of entry i ("tollgate.toml:7: " in a file, "" elsewhere).
template <typename Where>
Status check_trusted_proxies(const std::vector<std::string>& cidrs, Where&& where) {
  if (cidrs.size() > limits::kTrustedProxiesMax) {
    return invalid(where(limits::kTrustedProxiesMax) + "trusted_proxies may list at most " +
                   std::to_string(limits::kTrustedProxiesMax) + " CIDRs");
  }
  for (std::size_t i = 0; i < cidrs.size(); ++i) {
    if (auto c = parse_cidr(cidrs[i]); !c) return invalid(where(i) + "trusted_proxies: " + c.error().detail);
  }
  return ok_status();
}

// The payments' secrets. A message names the key (or the variable) and the secret's place in the
// list, never its text: start-up errors go to the journal.
//
// signing_secrets: at most limits::kPaymentSigningSecretsMax, each non-empty printable ASCII without
// spaces or commas (the variable separates them with commas), no two alike. `subject` is the key
// ("payments.stripe.signing_secrets") or the variable; `where(i)` the place of entry i.
template <typename Where>
Status check_signing_secrets(const std::vector<std::string>& secrets, std::string_view subject, Where&& where) {
  const std::string name(subject);
  if (secrets.size() > limits::kPaymentSigningSecretsMax) {
    return invalid(where(limits::kPaymentSigningSecretsMax) + name + " may list at most " +
                   std::to_string(limits::kPaymentSigningSecretsMax) + " secrets");
  }
  for (std::size_t i = 0; i < secrets.size(); ++i) {
    const std::string& secret = secrets[i];
    const std::string nth = "secret " + std::to_string(i + 1);
    if (secret.empty()) return invalid(where(i) + name + ": " + nth + " is empty");
    const bool printable =
        std::all_of(secret.begin(), secret.end(), [](char ch) { return ch > ' ' && ch <= '~' && ch != ','; });
    if (!printable) return invalid(where(i) + name + ": " + nth + " must be printable ASCII without spaces or commas");
    for (std::size_t j = 0; j < i; ++j) {
      if (secrets[j] == secret)
        return invalid(where(i) + name + ": " + nth + " is the same as secret " + std::to_string(j + 1));
    }
  }
  return ok_status();
}

// payments.webhook.secret: "whsec_" + base64 (webhooks::secret_key) of at least
// limits::kPaymentWebhookSecretBytesMin bytes. `where` is its place ("tollgate.toml:9: " or "").
Status check_payment_webhook_secret(const std::string& secret, std::string_view subject, const std::string& where) {
  const auto key = webhooks::secret_key(secret);
  if (!key) return invalid(where + std::string(subject) + " must be whsec_ followed by base64: it does not decode");
  if (key->size() < limits::kPaymentWebhookSecretBytesMin) {
    return invalid(where + std::string(subject) + " must decode to at least " +
                   std::to_string(limits::kPaymentWebhookSecretBytesMin) + " bytes");
  }
  return ok_status();
}

// A [payments.stripe.packs] entry: a name as an id (1-128 of [A-Za-z0-9._:@-], core/checked.h) and
// its credits from 1 to limits::kAmountMax.
Status check_pack(const std::string& name, std::int64_t credits, const std::string& where) {
  const std::string key = "payments.stripe.packs." + name;
  if (!id_is_valid(name)) {
    return invalid(where + key + ": a pack name is 1-128 characters of [A-Za-z0-9._:@-], not \".\" or \"..\"");
  }
  if (credits < 1 || credits > limits::kAmountMax) {
    return invalid(where + key + " must be from 1 to " + std::to_string(limits::kAmountMax) + ", got " +
                   std::to_string(credits));
  }
  return ok_status();
}

// Every integer row of `keys` within its bounds, for a configuration made otherwise than by the
// parser (which checks as it reads); `prefix` names the table ("payments.webhook.").
template <typename C>
Status check_bounds(const std::vector<ConfigKey<C>>& keys, const C& c, std::string_view prefix) {
  for (const auto& key : keys) {
    if (const auto* member = std::get_if<std::int64_t C::*>(&key.field)) {
      const std::int64_t v = c.**member;
      if (v < key.min || v > key.max) {
        return invalid(std::string(prefix) + key.name + " must be from " + std::to_string(key.min) + " to " +
                       std::to_string(key.max) + ", got " + std::to_string(v));
      }
    }
  }
  return ok_status();
}

// A plain-words hint for a TOML parser's message about `line` (the text of the line in error), and
// the key it names, if the line starts with one. The line itself is not repeated: it may hold the
// admin key.
std::string parse_error_hint(std::string_view description, std::string_view line) {
  auto has = [&](std::string_view part) { return description.find(part) != std::string_view::npos; };
  std::string key;
  const std::size_t equals = line.find('=');
  if (equals != std::string_view::npos) {
    std::string_view k = line.substr(0, equals);
    while (!k.empty() && (k.front() == ' ' || k.front() == '\t')) k.remove_prefix(1);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.remove_suffix(1);
    const bool bare = !k.empty() && k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (bare) key = std::string(k) + ": ";
  }
  if (has("expected value")) return key + "the value is missing after '='";
  if (has("parsing string") && (has("control characters") || has("end-of-file"))) {
    return key + "a string is not closed: is the closing quote (\") missing?";
  }
  if (has("parsing literal string") || (has("literal string") && has("control characters"))) {
    return key + "a string is not closed: is the closing quote (') missing?";
  }
  if (has("unknown escape sequence")) {
    return key + "a backslash in a \"string\" starts an escape: write \\\\ or use a 'literal string'";
  }
  if (has("cannot redefine existing table")) return "this table is already defined earlier in the file";
  if (has("cannot redefine existing")) return key + "this key is already set earlier in the file (each key once)";
  if (has("table header") && has("expected ']'")) return "a table header is not closed: is the ']' missing?";
  if (has("expected '='")) return "a key must be followed by '=' (key = value); is the '=' missing, or is there a space in the key?";
  if (has("could not determine value type") || has("parsing time") || has("parsing date") || has("parsing boolean")) {
    return key + "text must be in double quotes (key = \"text\")";
  }
  if (has("expected a comment or whitespace")) {
    return key + "only a # comment may follow a value on its line: is a quote or a comma misplaced?";
  }
  if (has("parsing array") || has("parsing inline table")) {
    return key + "a list or inline table is not closed: is a ']' or '}' missing?";
  }
  if (has("end-of-file")) return "the file ends in the middle of something: is a closing quote or bracket missing?";
  return "this is not valid TOML";
}

#define TG_TRY(expr)                      \
  do {                                    \
    if (auto s_ = (expr); !s_) return s_.error(); \
  } while (0)


bool database_kind_is_known(const std::string& database) {
  return sqlite_path(database) || is_postgres_uri(database);
}

// The whole file, or why it cannot be read, in the system's words: "cannot read the configuration
// file /etc/tollgate.toml: permission denied".
Result<std::string> read_config_file(const std::string& path) {
  auto failure = [&](int error) {
    std::string why = std::strerror(error);
    if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    return invalid("cannot read the configuration file " + path + ": " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure(errno);
  std::string text;
  char buffer[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return failure(error);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > limits::kConfigFileBytesMax) {
      ::close(fd);
      return invalid("cannot read the configuration file " + path + ": it is larger than " +
                     std::to_string(limits::kConfigFileBytesMax) + " bytes");
    }
  }
  ::close(fd);
  return text;
}

std::string key_too_short(const char* key) {
  return std::string(key) + " must be at least " + std::to_string(limits::kAdminKeyLengthMin) + " characters";
}


// The variable `name` (TOLLGATE_<KEY> for a top-level key, the row's `env` for a nested one), when
// set, replaces the key's value: an integer within the key's bounds, a comma-separated list (spaces
// around an item and empty items dropped), a choice's name, or text as it is. A string's or a list's
// text is never repeated in a message (it may be a secret).
template <typename C>
Status apply_env(const ConfigKey<C>& key, const std::string& name, EnvLookup env, C& c) {
  const auto text = env(name.c_str());
  if (!text) return ok_status();
  return std::visit(
      [&](auto member) -> Status {
        auto& v = c.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          // Any 64-bit integer (parse_int: never throws); the key's own range is checked next.
          const auto parsed = parse_int(*text, std::numeric_limits<std::int64_t>::min(),
                                        std::numeric_limits<std::int64_t>::max(), Sign::minus_allowed);
          if (!parsed) return invalid(name + " must be an integer, got \"" + *text + "\"");
          const std::int64_t n = *parsed;
          if (n < key.min || n > key.max) {
            return invalid(name + " (" + key.name + ") must be from " + std::to_string(key.min) + " to " +
                           std::to_string(key.max) + ", got " + std::to_string(n));
          }
          v = n;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          v.clear();
          std::size_t start = 0;
          while (start <= text->size()) {
            std::size_t comma = text->find(',', start);
            if (comma == std::string::npos) comma = text->size();
            std::string item = text->substr(start, comma - start);
            item.erase(0, item.find_first_not_of(" \t"));
            item.erase(item.find_last_not_of(" \t") + 1);
            if (!item.empty()) v.push_back(std::move(item));
            start = comma + 1;
          }
        } else if constexpr (std::is_same_v<T, LateCommitPolicy>) {
          auto policy = parse_late_commit_policy(*text);
          if (!policy) return invalid(name + " must be " + std::string(late_commit_choices()));
          v = *policy;
        } else if constexpr (std::is_same_v<T, RateLimitStore>) {
          auto store = parse_ratelimit_store(*text);
          if (!store) return invalid(name + " must be " + std::string(ratelimit_store_choices()));
          v = *store;
        } else if constexpr (std::is_same_v<T, RefundShortfall>) {
          auto shortfall = parse_refund_shortfall(*text);
          if (!shortfall) return invalid(name + " must be " + std::string(refund_shortfall_choices()));
          v = *shortfall;
        } else {
          v = *text;
        }
        return ok_status();
      },
      key.field);
}

// [payments]: [payments.stripe] (with [payments.stripe.packs]) and [payments.webhook], into `out`.
Status parse_payments(const toml::table& root, std::string_view source, PaymentsConfig& out) {
  const toml::node* node = root.get("payments");
  if (!node) return ok_status();
  const auto* payments = node->as_table();
  if (!payments) return invalid(at(source, node->source()) + "payments must be a table");
  TableReader r(*payments, source, "payments.");
  TG_TRY(r.finish({"stripe", "webhook"}));
  auto table = [&](const char* name) -> Result<const toml::table*> {
    const toml::node* n = payments->get(name);
    if (!n) return static_cast<const toml::table*>(nullptr);
    if (const auto* t = n->as_table()) return t;
    return invalid(at(source, n->source()) + "payments." + name + " must be a table");
  };

  auto stripe = table("stripe");
  if (!stripe) return stripe.error();
  if (const toml::table* t = *stripe) {
    TableReader sr(*t, source, "payments.stripe.");
    read_keys(sr, stripe_payments_config_keys(), out.stripe);
    TG_TRY(sr.finish({"packs"}));
    TG_TRY(check_signing_secrets(out.stripe.signing_secrets, "payments.stripe.signing_secrets",
                                 [&](std::size_t i) { return sr.where("signing_secrets", i); }));
    if (const toml::node* p = t->get("packs")) {
      const auto* packs = p->as_table();
      if (!packs) return invalid(at(source, p->source()) + "payments.stripe.packs must be a table (NAME = credits)");
      for (const auto& [key, value] : *packs) {
        const std::string name(key.str());
        const std::string where = at(source, value.source());
        const auto* credits = value.as_integer();
        if (!credits) {
          // `pro.monthly = 10` is the table pro holding monthly: a name with a dot must be quoted.
          return invalid(
              where + "payments.stripe.packs." + name + " must be an integer (the pack's credits)" +
              (value.is_table() ? std::string("; quote a name that holds a '.' (\"pro.monthly\" = 10)") : ""));
        }
        TG_TRY(check_pack(name, credits->get(), where));
        out.stripe.packs.emplace(name, credits->get());
      }
    }
  }

  auto webhook = table("webhook");
  if (!webhook) return webhook.error();
  if (const toml::table* t = *webhook) {
    TableReader wr(*t, source, "payments.webhook.");
    read_keys(wr, payment_webhook_config_keys(), out.webhook);
    TG_TRY(wr.finish());
    if (out.webhook.secret) {
      TG_TRY(check_payment_webhook_secret(*out.webhook.secret, "payments.webhook.secret", wr.where("secret")));
    }
  }
  return ok_status();
}

// The payments' values, whoever made them (validate_config): no place to name.
Status check_payments(const PaymentsConfig& p) {
  TG_TRY(check_bounds(stripe_payments_config_keys(), p.stripe, "payments.stripe."));
  TG_TRY(check_bounds(payment_webhook_config_keys(), p.webhook, "payments.webhook."));
  TG_TRY(check_signing_secrets(p.stripe.signing_secrets, "payments.stripe.signing_secrets",
                               [](std::size_t) { return std::string(); }));
  for (const auto& [name, credits] : p.stripe.packs) TG_TRY(check_pack(name, credits, ""));
  if (p.webhook.secret) TG_TRY(check_payment_webhook_secret(*p.webhook.secret, "payments.webhook.secret", ""));
  return ok_status();
}

// The variable of the row `name` of a nested table (the row must exist and have one: a bug otherwise).
template <typename C>
const char* env_of(const std::vector<ConfigKey<C>>& keys, std::string_view name) {
  for (const auto& k : keys) {
    if (name == k.name && k.env) return k.env;
  }
  TG_ASSERT(false && "no such configuration key with a variable");
  return "";
}

// The payments' variables (each row's `env`); a bad secret from one is named by the variable.
Status apply_payments_env(EnvLookup env, PaymentsConfig& p) {
  for (const auto& key : stripe_payments_config_keys()) {
    if (key.env) TG_TRY(apply_env(key, key.env, env, p.stripe));
  }
  for (const auto& key : payment_webhook_config_keys()) {
    if (key.env) TG_TRY(apply_env(key, key.env, env, p.webhook));
  }
  const char* secrets = env_of(stripe_payments_config_keys(), "signing_secrets");
  if (env(secrets)) {
    TG_TRY(check_signing_secrets(p.stripe.signing_secrets, secrets, [](std::size_t) { return std::string(); }));
  }
  const char* secret = env_of(payment_webhook_config_keys(), "secret");
  if (env(secret)) TG_TRY(check_payment_webhook_secret(*p.webhook.secret, secret, ""));
  return ok_status();
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
    const auto line_number = e.source().begin.line;
    std::string_view line;
    std::string_view rest = text;
    for (std::uint32_t n = 1; n <= line_number && !rest.empty(); ++n) {
      const std::size_t end = rest.find('\n');
      line = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    }
    std::ostringstream msg;
    msg << source << ":" << line_number << ": " << parse_error_hint(e.description(), line) << " (TOML parser: "
        << e.description() << ")";
    return invalid(msg.str());
  }
  ServerConfig c;
  TableReader top(root, source, "");
  read_keys(top, server_config_keys(), c);
  TG_TRY(top.finish({"providers", "ratelimits", "payments"}));
  TG_TRY(check_trusted_proxies(c.trusted_proxies, [&](std::size_t i) { return top.where("trusted_proxies", i); }));
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
  if (c.admin_key_file && c.admin_key_file->empty()) {
    return invalid(top.where("admin_key_file") + "admin_key_file must be a file's path (or be left out)");
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
    read_keys(r, provider_config_keys(), p);
    if (auto s = r.finish(); !s) return s;
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
    if (!id_is_valid(name)) {
      return invalid(at(source, t.source()) + "ratelimits." + name +
                     ": a policy name is 1-128 characters of [A-Za-z0-9._:@-] (it is part of the URL)");
    }
    RateLimitConfig rl;
    TableReader r(t, source, "ratelimits." + name + ".");
    read_keys(r, ratelimit_config_keys(), rl);
    const bool has_keys_max = t.contains("keys_max");
    if (auto s = r.finish(); !s) return s;
    if (rl.limit > rl.period_ms * limits::kRateAttemptsPerMsMax) {
      return invalid(r.where("limit") + "ratelimits." + name + ".limit (" + std::to_string(rl.limit) +
                     ") admits more than one attempt per microsecond of period_ms (" + std::to_string(rl.period_ms) +
                     "): at most " + std::to_string(rl.period_ms * limits::kRateAttemptsPerMsMax));
    }
    if (has_keys_max && rl.store != RateLimitStore::local) {
      return invalid(r.where("keys_max") + "ratelimits." + name +
                     ".keys_max bounds a local policy's table in memory; a shared policy keeps its keys in the "
                     "database (set store = \"local\" or remove keys_max)");
    }
    c.ratelimits.emplace(name, rl);
    return ok_status();
  }));

  TG_TRY(parse_payments(root, source, c.payments));

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
  if (c.admin_key_file && c.admin_key_file->empty()) return invalid("admin_key_file must be a file's path (or be left out)");
  if (c.auth_failures_limit < 0 || c.auth_failures_limit > limits::kRateLimitMax) {
    return invalid("auth_failures_limit must be from 0 (off) to " + std::to_string(limits::kRateLimitMax));
  }
  if (c.auth_failures_period_ms < 1 || c.auth_failures_period_ms > limits::kRateLimitPeriodMsMax) {
    return invalid("auth_failures_period_ms must be from 1 to " + std::to_string(limits::kRateLimitPeriodMsMax));
  }
  if (c.tls_cert.has_value() != c.tls_key.has_value()) {
    return invalid(c.tls_cert ? "tls_cert is set but tls_key is not: TLS needs both (PEM files)"
                              : "tls_key is set but tls_cert is not: TLS needs both (PEM files)");
  }
  for (const auto& [name, p] : c.providers) {
    if (c.hold_ttl_ms < 3 * p.expected_duration_ms) {
      return invalid("hold_ttl_ms must be at least 3 × providers." + name + ".expected_duration_ms");
    }
  }
  // Every integer within its row's bounds (the file and the environment checked them as they read).
  for (const auto& key : server_config_keys()) {
    if (const auto* member = std::get_if<std::int64_t ServerConfig::*>(&key.field)) {
      const std::int64_t v = c.**member;
      if (v < key.min || v > key.max) {
        return invalid(std::string(key.name) + " must be from " + std::to_string(key.min) + " to " +
                       std::to_string(key.max) + ", got " + std::to_string(v));
      }
    }
  }
  TG_TRY(check_payments(c.payments));
  return check_trusted_proxies(c.trusted_proxies, [](std::size_t) { return std::string(); });
}

Result<ServerConfig> load_config(const ConfigOverrides& o, EnvLookup env) {
  ServerConfig c;
  if (o.config_file) {
    auto text = read_config_file(*o.config_file);
    if (!text) return text.error();
    auto parsed = parse_config(*text, *o.config_file);
    if (!parsed) return parsed.error();
    c = std::move(parsed).value();
  }
  for (const auto& key : server_config_keys()) TG_TRY(apply_env(key, config_env_name(key.name), env, c));
  TG_TRY(apply_payments_env(env, c.payments));
  if (o.listen) c.listen = *o.listen;
  if (o.database) c.database = *o.database;
  if (o.admin_key_file) c.admin_key_file = *o.admin_key_file;
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
  const auto n = parse_int(port, 0, 65535);
  if (!n) return invalid("listen port must be 0-65535, got " + port);
  // The server binds an IP address (or localhost); a host name would only fail later, at bind time.
  in_addr v4{};
  in6_addr v6{};
  if (out.host != "localhost" && inet_pton(AF_INET, out.host.c_str(), &v4) != 1 &&
      inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) {
    return invalid("listen host must be an IP address or localhost, got " + out.host);
  }
  out.port = static_cast<std::uint16_t>(*n);
  return out;
}

}  // namespace tollgate
