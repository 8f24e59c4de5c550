// tollgate http: the browser console's files (console/), compiled into the binary by
// cmake/embed_console.cmake and served at /console (routes_console.cc).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace tollgate::http {

struct ConsoleAsset {
  const char* name;          // "app.js": the file's name in console/ (flat, [A-Za-z0-9._-])
  const char* content_type;  // by extension
  const unsigned char* data;
  std::size_t size;
  const char* etag;  // a quoted strong validator: the first 20 hex digits of the file's SHA-256
};

// Every asset, by name ascending.
std::span<const ConsoleAsset> console_assets();

}  // namespace tollgate::http
