// Test support: the store backends every conformance, race and stress test runs against.
//
// Each backend makes a fresh, empty, real store (a new SQLite file in a temporary folder; later a
// new schema on a real PostgreSQL server). Tests take a StoreBackend as their parameter, so a new
// backend runs every such test unchanged.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "store/store.h"

namespace tollgate::testing {

// A temporary folder, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct StoreBackend {
  std::string name;
  // Opens a fresh, empty store whose time is `clock`. The returned store owns whatever it needs.
  std::function<std::unique_ptr<Store>(const Clock& clock)> open_fresh;
};

// gtest prints a parameter with this instead of its bytes.
inline void PrintTo(const StoreBackend& backend, std::ostream* out) { *out << backend.name; }

// Every backend available to this test run: SQLite always; PostgreSQL when TOLLGATE_TEST_POSTGRES
// names a server (scripts/test starts one and sets it, with TOLLGATE_REQUIRE_POSTGRES=1).
std::vector<StoreBackend> all_backends();

// The PostgreSQL server the tests use (TOLLGATE_TEST_POSTGRES, a libpq URI), or nullopt.
std::optional<std::string> postgres_server_uri();
// Whether this run must test PostgreSQL (TOLLGATE_REQUIRE_POSTGRES=1: CI); then a missing server is
// a failure, never a skip.
bool postgres_required();

// In a test body: binds `server` to the test server's URI, or skips the test when there is none —
// and fails it instead when the run must test PostgreSQL (TOLLGATE_REQUIRE_POSTGRES=1).
#define REQUIRE_POSTGRES(server)                                                                    \
  const auto server##_opt = ::tollgate::testing::postgres_server_uri();                             \
  if (!server##_opt) {                                                                              \
    if (::tollgate::testing::postgres_required()) FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but TOLLGATE_TEST_POSTGRES is unset"; \
    GTEST_SKIP() << "no PostgreSQL server (set TOLLGATE_TEST_POSTGRES)";                            \
  }                                                                                                 \
  const std::string server = *server##_opt

// A fresh, empty schema on the test server, dropped (with everything in it) when the object goes.
// uri() connects into it (search_path), so every instance opened with it shares one database.
class PgSchema {
 public:
  explicit PgSchema(const std::string& server_uri);
  ~PgSchema();
  PgSchema(const PgSchema&) = delete;
  PgSchema& operator=(const PgSchema&) = delete;
  const std::string& name() const { return name_; }
  const std::string& uri() const { return uri_; }

 private:
  std::string server_uri_;
  std::string name_;
  std::string uri_;
};

// Names for INSTANTIATE_TEST_SUITE_P.
struct BackendName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

}  // namespace tollgate::testing
