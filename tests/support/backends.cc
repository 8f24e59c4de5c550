#include "support/backends.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

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

// A SqliteStore that owns the temporary folder its file lives in.
class OwningSqliteStore final : public Store {
 public:
  OwningSqliteStore(std::unique_ptr<TempDir> dir, std::unique_ptr<SqliteStore> store)
      : dir_(std::move(dir)), store_(std::move(store)) {}
  Status apply(std::span<const Command> c, std::vector<CommandResult>& r) override { return store_->apply(c, r); }
  Result<Account> get_account(std::string_view id) override { return store_->get_account(id); }
  Result<Hold> get_hold(std::string_view id) override { return store_->get_hold(id); }
  Result<std::vector<Hold>> list_holds(const HoldFilter& f) override { return store_->list_holds(f); }
  Result<EventPage> read_events(std::string_view id, std::int64_t after, std::int64_t limit) override {
    return store_->read_events(id, after, limit);
  }
  Result<AuditReport> audit(std::optional<std::string_view> id) override { return store_->audit(id); }
  Result<std::optional<ApiKey>> find_key(std::string_view h) override { return store_->find_key(h); }
  Result<LedgerStats> stats() override { return store_->stats(); }
  Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit) override {
    return store_->list_account_ids(after, limit);
  }
  Result<bool> has_admin_key() override { return store_->has_admin_key(); }
  Status ping() override { return store_->ping(); }
  std::int64_t now_ms() override { return store_->now_ms(); }

 private:
  std::unique_ptr<TempDir> dir_;  // outlives store_ (declared first, destroyed last)
  std::unique_ptr<SqliteStore> store_;
};

}  // namespace

std::vector<StoreBackend> all_backends() {
  std::vector<StoreBackend> out;
  out.push_back(StoreBackend{"sqlite", [](const Clock& clock) -> std::unique_ptr<Store> {
                               auto dir = std::make_unique<TempDir>();
                               SqliteOptions options;
                               options.path = dir->file("tollgate.db");
                               auto store = SqliteStore::open(options, clock);
                               if (!store) throw std::runtime_error("open sqlite: " + store.error().detail);
                               return std::make_unique<OwningSqliteStore>(std::move(dir), std::move(store).value());
                             }});
  return out;
}

}  // namespace tollgate::testing
