// fuzz_http_request: raw bytes as the server reads them from a socket — Beast's request parser
// with the server's header and body limits — then, for a request that parses, the whole API:
// routing, the Authorization header, the body's JSON and every handler, against a real ledger on a
// SQLite file (in /dev/shm when it exists: flushes there are cheap, the code path is the same).
// The admin key is fixed ("Bearer fuzz-admin-key-0123456789abcdef", in the dictionary), so the
// fuzzer reaches the admin routes too.
//
// What is checked beyond "no crash, no sanitizer report, no hang": every request is answered
// exactly once; every answer is 2xx–5xx; a 4xx/5xx answer is a problem document (JSON with a
// `code`), and a 5xx is never a bug's 500 (`internal`, also what the last-resort catch answers).
// Only a request that would wait on purpose is skipped — one whose wait_ms (the change feed's, a
// job's) is a valid, non-zero wait: waiting is its contract. Every other wait_ms (0, too large,
// 19 or 20 digits, signed, spaced) is answered at once and is fuzzed like any query integer: the
// dictionary and the seeds carry every route's query parameters and the boundary integers (2^31,
// 2^53, 2^63 ± 1, 2^64, 19 and 20 digits).
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <unistd.h>

#include "core/clock.h"
#include "core/limits.h"
#include "http/api.h"
#include "http/auth.h"
#include "http/metrics.h"
#include "http/read_executor.h"
#include "http/wire.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using namespace tollgate;

struct World {
  SystemClock clock;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<Ledger> ledger;
  std::unique_ptr<http::Authenticator> auth;
  std::unique_ptr<http::Metrics> metrics;
  std::unique_ptr<http::ReadExecutor> readers;
  std::unique_ptr<http::Api> api;
};

World* world = nullptr;
bool trace = false;  // $TOLLGATE_FUZZ_TRACE set: each answer's status and code on stderr

World* make_world() {
  auto* w = new World;
  const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  const auto path = dir / ("tollgate-fuzz-http-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  SqliteOptions options;
  options.path = path.string();
  auto store = SqliteStore::open(options, w->clock);
  if (!store) std::abort();
  w->store = std::move(store).value();
  LedgerOptions ledger_options;
  w->ledger = std::make_unique<Ledger>(*w->store, w->clock, ledger_options);
  w->auth = std::make_unique<http::Authenticator>(w->ledger->key_directory(), w->clock, std::string("fuzz-admin-key-0123456789abcdef"));
  w->metrics = std::make_unique<http::Metrics>(http::Api::route_templates());
  w->readers = std::make_unique<http::ReadExecutor>(2, limits::kReadQueueMax);
  http::ApiOptions api_options;
  api_options.openapi_json = "{}";
  api_options.render_metrics = [] { return std::string("# metrics\n"); };
  w->api = std::make_unique<http::Api>(*w->ledger, *w->readers, *w->auth, *w->metrics, w->clock, std::move(api_options));
  return w;
}

// True when the target asks to wait on purpose: a wait_ms that the server accepts and that is not 0.
// (Read here with std::from_chars; anything it does not read as such a number is answered at once.)
bool waits(const std::string& target) {
  auto parsed = boost::urls::parse_origin_form(target);
  if (!parsed) return false;
  for (const auto& param : parsed->params()) {
    if (param.key != "wait_ms" || !param.has_value) continue;
    const std::string& v = param.value;
    std::uint64_t ms = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
    const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
    if (digits && ec == std::errc() && end == v.data() + v.size() && ms > 0 &&
        ms <= static_cast<std::uint64_t>(std::max(limits::kEventsWaitMsMax, limits::kJobWaitMsMax))) {
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  world = make_world();
  trace = std::getenv("TOLLGATE_FUZZ_TRACE") != nullptr;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits::kHeaderBytesMax));
  parser.body_limit(limits::kBodyBytesMax);
  parser.eager(true);
  beast::error_code ec;
  std::size_t used = 0;
  // As the server's read loop: the parser takes what it can of the bytes not yet consumed (a
  // whole head at once, then the body or its chunks) until the request is complete.
  while (used < size && !parser.is_done()) {
    const std::size_t consumed = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec || consumed == 0) break;
    used += consumed;
  }
  if (ec == bhttp::error::need_more) {  // the bytes ended: what the server does at end of stream
    ec = {};
    parser.put_eof(ec);
  }
  if (ec) return 0;
  if (!parser.is_done()) return 0;

  // As the server hands it to the API (http/wire.h), from one client address.
  http::Request request = http::to_request(parser.release(), "192.0.2.7");
  if (waits(request.target)) return 0;  // a wait is the contract, not a hang

  auto answered = std::make_shared<std::promise<http::Response>>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  world->api->handle(
      std::move(request),
      [answered, calls](http::Response r) {
        if (calls->fetch_add(1) != 0) __builtin_trap();  // answered twice
        answered->set_value(std::move(r));
      },
      [](std::function<void()> work) { work(); });
  auto future = answered->get_future();
  if (future.wait_for(std::chrono::seconds(20)) != std::future_status::ready) __builtin_trap();  // never answered
  const http::Response r = future.get();
  if (trace) std::fprintf(stderr, "fuzz_http_request: %u %s\n", r.status, r.code.c_str());
  if (r.status < 200 || r.status > 599) __builtin_trap();
  if (r.status >= 400) {
    boost::system::error_code jec;
    const auto doc = boost::json::parse(r.body, jec);
    if (jec || !doc.is_object() || !doc.as_object().contains("code")) __builtin_trap();  // not a problem document
    if (r.status == 500) __builtin_trap();  // a bug's answer, never an expected failure's
  }
  return 0;
}
