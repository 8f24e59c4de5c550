// fuzz_provider_protocol: a provider's answer (status code, body, how the exchange ended) through
// the job worker's decisions, after a send and after a status question. Whatever a provider
// answers, the worker must decide something consistent: `complete` only with a result that is a
// JSON object (it is stored and served as JSON), a reason for every `fail`, and never another send
// beyond attempts_max. The status URL's builder gets the same bytes as a job id.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/json.hpp>

#include "jobs/provider_protocol.h"

namespace {

using namespace tollgate::jobs;

void check(const Decision& d, int attempt, int attempts_max) {
  switch (d.next) {
    case Next::complete: {
      boost::system::error_code ec;
      const auto v = boost::json::parse(d.result_json, ec);
      if (ec || !v.is_object()) __builtin_trap();
      break;
    }
    case Next::fail:
      if (d.reason.empty()) __builtin_trap();
      break;
    case Next::send_again:
      if (attempt >= attempts_max) __builtin_trap();
      break;
    case Next::ask_status:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Exchange exchange;
  exchange.kind = in.PickValueInArray({Exchange::Kind::answered, Exchange::Kind::timed_out,
                                       Exchange::Kind::connection_lost, Exchange::Kind::not_connected});
  exchange.status = in.ConsumeIntegralInRange<unsigned>(0, 999);
  const bool has_status_url = in.ConsumeBool();
  const int attempts_max = in.ConsumeIntegralInRange<int>(1, 10);
  const int attempt = in.ConsumeIntegralInRange<int>(1, attempts_max);
  const std::string id = in.ConsumeRandomLengthString(256);
  const std::string url_template = in.ConsumeRandomLengthString(256);
  exchange.body = in.ConsumeRemainingBytesAsString();
  if (exchange.kind != Exchange::Kind::answered) exchange.status = 0;

  check(after_send(exchange, has_status_url, attempt, attempts_max), attempt, attempts_max);
  check(after_status(exchange, attempt, attempts_max), attempt, attempts_max);
  (void)status_url_for(url_template, id);
  (void)status_poll_delay(attempt, 0.5);
  return 0;
}
