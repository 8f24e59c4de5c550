#include "core/last_resort.h"

#include <atomic>
#include <exception>
#include <string>

#include "core/log.h"

namespace tollgate {
namespace {

std::atomic<std::uint64_t> noted{0};

}  // namespace

void note_unhandled_exception(std::string_view where) noexcept {
  noted.fetch_add(1, std::memory_order_relaxed);
  try {
    std::string what = "an exception that is not a std::exception";
    try {
      throw;  // the exception being handled
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log("error", "bug: an exception reached the last-resort catch (" + std::string(where) + "): " + what +
                     "; the request was answered 500 internal and the server goes on");
  } catch (...) {  // logging itself failed (no memory): the count stands
  }
}

std::uint64_t unhandled_exceptions_total() noexcept { return noted.load(std::memory_order_relaxed); }

}  // namespace tollgate
