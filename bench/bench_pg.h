// tollgate bench: PostgreSQL helpers the in-process benches share (ledger_bench, lock_bench).
//
// A fresh schema per measured cell (so each starts on empty tables, as a new deployment does), the
// stores reaching it through the URI's search_path, and URIs printed without their password.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

#include "store/postgres/pg_conn.h"

namespace tollgate::bench {

// `uri` with search_path set to `schema` (libpq's options parameter, as tests/support does).
inline std::string uri_with_schema(const std::string& uri, const std::string& schema) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
}

// The URI without its password, for printing.
inline std::string redact_uri(const std::string& uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string::npos) return uri;
  const auto host_end = uri.find_first_of("/?", scheme + 3);
  const auto at = uri.rfind('@', host_end == std::string::npos ? std::string::npos : host_end);
  if (at == std::string::npos || at < scheme + 3) return uri;
  const auto colon = uri.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon + 1) + "***" + uri.substr(at);
}

// A fresh schema on the server of `server_uri` for one cell; dropped (CASCADE) when this object
// goes, unless `keep`. The constructor throws pg::PgError when the server refuses.
class BenchSchema {
 public:
  BenchSchema(std::string server_uri, std::string name, bool keep)
      : server_uri_(std::move(server_uri)), name_(std::move(name)), keep_(keep) {
    auto conn = tollgate::pg::Conn::connect(server_uri_, tollgate::pg::ConnectOptions{});
    conn->exec("DROP SCHEMA IF EXISTS " + tollgate::pg::quote_identifier(name_) + " CASCADE; CREATE SCHEMA " +
               tollgate::pg::quote_identifier(name_));
  }
  ~BenchSchema() {
    if (keep_) {
      std::fprintf(stderr, "bench: kept schema %s\n", name_.c_str());
      return;
    }
    try {
      auto conn = tollgate::pg::Conn::connect(server_uri_, tollgate::pg::ConnectOptions{});
      conn->exec("DROP SCHEMA " + tollgate::pg::quote_identifier(name_) + " CASCADE");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: warning: could not drop schema %s: %s\n", name_.c_str(), e.what());
    }
  }
  BenchSchema(const BenchSchema&) = delete;
  BenchSchema& operator=(const BenchSchema&) = delete;
  std::string uri() const { return uri_with_schema(server_uri_, name_); }

 private:
  std::string server_uri_, name_;
  bool keep_;
};

}  // namespace tollgate::bench
