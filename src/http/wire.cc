#include "http/wire.h"

#include <utility>

namespace tollgate::http {

namespace bhttp = boost::beast::http;

Request to_request(bhttp::request<bhttp::string_body>&& req, std::string client_address) {
  Request request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.authorization = std::string(req[bhttp::field::authorization]);
  request.content_type = std::string(req[bhttp::field::content_type]);
  if (auto it = req.find("Idempotency-Key"); it != req.end()) request.idempotency_key = std::string(it->value());
  request.if_none_match = std::string(req[bhttp::field::if_none_match]);
  // Every line of a forwarding header, in order, as one list (RFC 9110 §5.3).
  auto joined = [&](std::string_view name) {
    std::string out;
    for (auto [it, end] = req.equal_range(name); it != end; ++it) {
      if (!out.empty()) out += ',';
      out += it->value();
    }
    return out;
  };
  request.x_forwarded_for = joined("X-Forwarded-For");
  request.forwarded = joined("Forwarded");
  if (request.target.starts_with("/v1/payments/")) {
    auto& sig = request.provider_signature;
    sig.stripe = std::string(req["Stripe-Signature"]);
    sig.webhook_id = std::string(req["webhook-id"]);
    sig.webhook_timestamp = std::string(req["webhook-timestamp"]);
    sig.webhook_signature = std::string(req["webhook-signature"]);
  }
  request.body = std::move(req.body());
  request.client_address = std::move(client_address);
  return request;
}

}  // namespace tollgate::http
