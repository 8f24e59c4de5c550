// The browser console: GET /console (its page) and GET /console/{asset} (its modules and styles),
// served from the files compiled into the binary (console_assets.h). Open routes: the page itself
// holds no data; everything it shows comes from the API with the admin key the operator types in,
// which the page keeps in the tab's sessionStorage and sends as a Bearer header (never in a URL or
// a cookie).
//
// Every answer carries a strict Content-Security-Policy (only this origin; no inline script or
// style; no framing), nosniff, and an ETag with Cache-Control: no-cache — the browser revalidates
// each load and gets a 304 without a body while the binary has not changed.
#include <string_view>

#include "http/console_assets.h"
#include "http/routes.h"

namespace tollgate::http {
namespace {

constexpr std::string_view kConsoleHeaders =
    "\r\nContent-Security-Policy: default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    "\r\nX-Content-Type-Options: nosniff"
    "\r\nX-Frame-Options: DENY"
    "\r\nReferrer-Policy: no-referrer"
    "\r\nCross-Origin-Opener-Policy: same-origin"
    "\r\nCache-Control: no-cache";

// If-None-Match lists the ETag (or is "*").
bool not_modified(std::string_view if_none_match, std::string_view etag) {
  if (if_none_match.empty()) return false;
  if (if_none_match == "*") return true;
  std::size_t start = 0;
  while (start < if_none_match.size()) {
    std::size_t end = if_none_match.find(',', start);
    if (end == std::string_view::npos) end = if_none_match.size();
    std::string_view tag = if_none_match.substr(start, end - start);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == etag) return true;
    start = end + 1;
  }
  return false;
}

void serve_asset(Call& call, std::string_view name) {
  for (const ConsoleAsset& asset : console_assets()) {
    if (name != asset.name) continue;
    Response r;
    r.content_type = asset.content_type;
    r.headers = kConsoleHeaders;
    r.etag = asset.etag;
    if (not_modified(call.if_none_match, asset.etag)) {
      r.status = 304;
    } else {
      r.body.assign(reinterpret_cast<const char*>(asset.data), asset.size);
    }
    return call.reply(std::move(r));
  }
  Response r = problem(404, "not_found", "the console has no file " + std::string(name));
  r.headers = kConsoleHeaders;
  call.reply(std::move(r));
}

}  // namespace

void console_page(Context&, Call& call) { serve_asset(call, "index.html"); }

void console_asset(Context&, Call& call) {
  const std::string& name = call.params[0];
  serve_asset(call, name.empty() ? std::string_view("index.html") : std::string_view(name));
}

}  // namespace tollgate::http
