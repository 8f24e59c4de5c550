// tollgate core: structured logs — one JSON object per line on stderr.
//
// {"ts":"2026-11-30T02:41:04.123Z","level":"error","msg":"…"} — every string escaped, so a message
// that quotes SQL or a client's input never breaks the line. The HTTP server's per-request lines
// have the same shape (src/http/server.cc) and are buffered there.
//
// Thread safety: log() may be called from any thread; one line is one write.
#pragma once

#include <string>
#include <string_view>

namespace tollgate {

// Appends `text` as a JSON string literal (with its quotes) to `out`, escaped as Boost.JSON
// escapes: \", \\, \b, \f, \n, \r, \t, and \u00XX for the other control characters.
// Bytes that are not well-formed UTF-8 (a client's path or header can hold any) become U+FFFD, one
// for each such byte: the result is always one valid JSON string, and valid text is kept as is.
void append_json_string(std::string& out, std::string_view text);

// Writes one log line: level ("info", "warn", "error") and message.
void log(std::string_view level, std::string_view message);

}  // namespace tollgate
