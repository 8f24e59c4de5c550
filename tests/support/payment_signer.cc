#include "support/payment_signer.h"

#include <boost/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "support/server_process.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

json::object request_json(const SignRequest& request) {
  json::object o;
  o["scheme"] = request.scheme == SignScheme::stripe ? "stripe" : "standard";
  o["secret"] = request.secret;
  o["payload"] = request.payload;
  o["timestamp"] = request.timestamp_s;
  if (request.scheme == SignScheme::standard) o["id"] = request.id;
  return o;
}

Headers headers_of(const json::value& answer, std::size_t index, const std::string& out) {
  if (!answer.is_object()) {
    throw std::runtime_error("the payment signer's answer " + std::to_string(index) + " is not an object: " + out);
  }
  Headers headers;
  for (const auto& [name, value] : answer.get_object()) {
    if (!value.is_string()) {
      throw std::runtime_error("the payment signer's header " + std::string(name) + " is not a string: " + out);
    }
    headers.emplace(std::string(name), std::string(value.get_string()));
  }
  if (headers.empty()) throw std::runtime_error("the payment signer answered no header: " + out);
  return headers;
}

}  // namespace

std::optional<std::string> payment_signer_script() {
  const char* path = std::getenv("TOLLGATE_PAYMENT_SIGNER");
  if (path == nullptr || *path == '\0') return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  return std::string(path);
}

bool payment_signer_available() { return payment_signer_script().has_value(); }

bool payment_signer_required() {
  const char* v = std::getenv("TOLLGATE_REQUIRE_PAYMENT_SIGNER");
  return v != nullptr && std::string_view(v) == "1";
}

std::vector<Headers> sign_payloads(const std::vector<SignRequest>& requests) {
  if (requests.empty()) return {};
  const auto script = payment_signer_script();
  if (!script) throw std::runtime_error("TOLLGATE_PAYMENT_SIGNER names no sign.mjs");
  json::array input;
  input.reserve(requests.size());
  for (const auto& request : requests) input.push_back(request_json(request));

  const ProcessResult run = run_process_with_input({"/usr/bin/env", "node", *script}, json::serialize(input));
  if (run.exit_code != 0) {
    throw std::runtime_error("the payment signer exited with " + std::to_string(run.exit_code) +
                             (run.timed_out ? " (timed out)" : "") + ":\n" + run.err);
  }
  boost::system::error_code ec;
  const json::value answer = json::parse(run.out, ec);
  if (ec || !answer.is_array() || answer.get_array().size() != requests.size()) {
    throw std::runtime_error("the payment signer did not answer an array of " + std::to_string(requests.size()) +
                             " objects: " + run.out + run.err);
  }
  std::vector<Headers> out;
  out.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) out.push_back(headers_of(answer.get_array()[i], i, run.out));
  return out;
}

Headers sign_payload(const SignRequest& request) { return sign_payloads({request}).front(); }

}  // namespace tollgate::testing
