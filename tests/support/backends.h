// Test support: the store backends every conformance, race and stress test runs against.
//
// Each backend makes a fresh, empty, real store (a new SQLite file in a temporary folder; later a
// new schema on a real PostgreSQL server). Tests take a StoreBackend as their parameter, so a new
// backend runs every such test unchanged.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
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

// Every backend available to this test run.
std::vector<StoreBackend> all_backends();

// Names for INSTANTIATE_TEST_SUITE_P.
struct BackendName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

}  // namespace tollgate::testing
