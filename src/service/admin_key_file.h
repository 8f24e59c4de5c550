// tollgate service: the generated admin key handed over in a file (admin_key_file) instead of on
// stdout — for a packaged service, whose stdout is a journal that many can read.
//
// The file holds the key and a newline, nothing else. It is created, never replaced: O_CREAT|O_EXCL,
// mode 0600 (readable by the service's user and by root only), written, fsynced, and its folder
// fsynced, before the key is stored in the database. So a key is never stored that nobody can read:
// a start that fails between the two leaves the file, and the next start stores the key it holds
// (adopt) rather than generating another.
//
// Thread safety: plain functions; the file system is the only shared state.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace tollgate::service {

// Creates `path` with `secret` + "\n" (mode 0600, O_EXCL) and makes it and its folder durable.
// conflict: the file exists already (nothing written); invalid_request: it cannot be created or
// written (the system's reason, e.g. "no such file or directory"), and nothing is left behind.
Status write_admin_key_file(const std::string& path, std::string_view secret);

// The key in `path`: its first line. not_found: no such file; invalid_request: unreadable, larger
// than a key, or not a key (shorter than limits::kAdminKeyLengthMin, or with a space or control
// character).
Result<std::string> read_admin_key_file(const std::string& path);

// Removes `path` and fsyncs its folder (a key that was never stored must not look like one).
// invalid_request with the system's reason if it cannot.
Status remove_admin_key_file(const std::string& path);

}  // namespace tollgate::service
