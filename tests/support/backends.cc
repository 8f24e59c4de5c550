#include "support/backends.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>

#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"

namespace tollgate::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

// A store that owns what it lives in (a temporary folder, a schema), released after the store.
class OwningStore final : public Store {
 public:
  OwningStore(std::shared_ptr<void> home, std::unique_ptr<Store> store)
      : home_(std::move(home)), store_(std::move(store)) {}
  Status apply(std::span<const Command> c, std::vector<CommandResult>& r) override { return store_->apply(c, r); }
  Status sync() override { return store_->sync(); }
  Result<Account> get_account(std::string_view id) override { return store_->get_account(id); }
  Result<Hold> get_hold(std::string_view id) override { return store_->get_hold(id); }
  ListReads& lists() override { return store_->lists(); }
  jobs::JobReads& jobs() override { return store_->jobs(); }
  coord::CoordReads& coord() override { return store_->coord(); }
  webhooks::WebhookReads& webhooks() override { return store_->webhooks(); }
  payments::PaymentReads& payments() override { return store_->payments(); }
  prices::PriceReads& prices() override { return store_->prices(); }
  Result<EventPage> read_events(std::string_view id, std::int64_t after, std::int64_t limit) override {
    return store_->read_events(id, after, limit);
  }
  Result<EventPage> read_feed(std::int64_t after, std::int64_t limit) override {
    return store_->read_feed(after, limit);
  }
  Result<std::int64_t> last_event_id() override { return store_->last_event_id(); }
  Result<AuditReport> audit(std::optional<std::string_view> id) override { return store_->audit(id); }
  Result<AuditPage> audit_range(std::string_view after, std::int64_t limit) override {
    return store_->audit_range(after, limit);
  }
  Result<KeyLookup> find_key(std::string_view h) override { return store_->find_key(h); }
  Result<LedgerStats> stats() override { return store_->stats(); }
  Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit) override {
    return store_->list_account_ids(after, limit);
  }
  Result<bool> has_admin_key() override { return store_->has_admin_key(); }
  Status ping() override { return store_->ping(); }
  std::int64_t now_ms() override { return store_->now_ms(); }

 private:
  std::shared_ptr<void> home_;  // outlives store_ (declared first, destroyed last)
  std::unique_ptr<Store> store_;
};

}  // namespace

std::optional<std::string> postgres_server_uri() {
  const char* uri = std::getenv("TOLLGATE_TEST_POSTGRES");
  if (!uri || !*uri) return std::nullopt;
  return std::string(uri);
}

bool postgres_required() {
  const char* required = std::getenv("TOLLGATE_REQUIRE_POSTGRES");
  return required && std::string(required) == "1";
}

PgSchema::PgSchema(const std::string& server_uri) : server_uri_(server_uri) {
  static std::atomic<int> counter{0};
  name_ = "t_" + std::to_string(getpid()) + "_" + std::to_string(counter.fetch_add(1)) + "_" +
          std::to_string(std::random_device{}() % 1000000);
  auto conn = pg::Conn::connect(server_uri_, pg::ConnectOptions{});
  conn->exec("CREATE SCHEMA " + pg::quote_identifier(name_));
  uri_ = server_uri_ + (server_uri_.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + name_;
}

PgSchema::~PgSchema() {
  try {
    auto conn = pg::Conn::connect(server_uri_, pg::ConnectOptions{});
    conn->exec("DROP SCHEMA " + pg::quote_identifier(name_) + " CASCADE");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: could not drop test schema %s: %s\n", name_.c_str(), e.what());
  }
}

std::vector<StoreBackend> all_backends() {
  std::vector<StoreBackend> out;
  out.push_back(StoreBackend{"sqlite", [](const Clock& clock) -> std::unique_ptr<Store> {
                               auto dir = std::make_unique<TempDir>();
                               SqliteOptions options;
                               options.path = dir->file("tollgate.db");
                               // A hang detector, as the PostgreSQL statement time-out below: a
                               // loaded machine must not fail an invariant test with `unavailable`.
                               options.lease_wait_ms = 30'000;
                               auto store = SqliteStore::open(options, clock);
                               if (!store) throw std::runtime_error("open sqlite: " + store.error().detail);
                               return std::make_unique<OwningStore>(std::shared_ptr<TempDir>(std::move(dir)),
                                                                    std::move(store).value());
                             }});
  if (auto server = postgres_server_uri()) {
    out.push_back(StoreBackend{"postgres", [server = *server](const Clock& clock) -> std::unique_ptr<Store> {
                                 auto schema = std::make_shared<PgSchema>(server);
                                 PgOptions options;
                                 options.uri = schema->uri();
                                 options.clock = &clock;
                                 options.readers_max = 4;
                                 // A hang detector, not a latency goal: a loaded CI machine must
                                 // not fail an invariant test with `unavailable`. A checkpoint's
                                 // sync took 8 s here once; in a bare Debian 12 run, with the ASan
                                 // build writing its objects beside the tests, a batch's SELECT …
                                 // FOR UPDATE (its row locks are WAL records) ran over 30 s
                                 // (LedgerStress, two PostgreSQL runs at once: 100–150 s each
                                 // there, 10–18 s here).
                                 options.statement_timeout_ms = 120'000;
                                 options.lease_wait_ms = 120'000;  // likewise for a reader connection
                                 auto store = PgStore::open(options);
                                 if (!store) throw std::runtime_error("open postgres: " + store.error().detail);
                                 return std::make_unique<OwningStore>(std::move(schema), std::move(store).value());
                               }});
  }
  return out;
}

}  // namespace tollgate::testing
