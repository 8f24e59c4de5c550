// tollgate http: what the API sees of a request parsed off the wire (internal to src/http).
//
// The one conversion from Beast's parsed request to the transport-free http::Request the API
// handles: the server's sessions use it, and so does the HTTP fuzz target, so that both hand the
// API the same fields.
//
// Thread safety: a pure function.
#pragma once

#include <boost/beast/http.hpp>

#include <string>

#include "http/api.h"

namespace tollgate::http {

// Moves the body out of `req`; `client_address` is the peer's IP address ("" when unknown).
Request to_request(boost::beast::http::request<boost::beast::http::string_body>&& req, std::string client_address);

}  // namespace tollgate::http
