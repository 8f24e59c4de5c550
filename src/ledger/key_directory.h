// tollgate ledger: the key directory — where authentication looks an API key up by its secret's hash.
//
// The edge (http/auth.h) resolves `Authorization: Bearer <secret>` against this role, never against
// the store: the ledger hands out its store's directory (Ledger::key_directory()). Keys are written
// through the ledger's batches (CreateKeyCommand, RevokeKeyCommand); this role only reads.
//
// Thread safety: find_key may be called from any thread; it may wait on the database, so call it
// where waiting is allowed (a reader thread, not an I/O thread).
#pragma once

#include <optional>
#include <string_view>

#include "core/model.h"
#include "core/result.h"

namespace tollgate {

class KeyDirectory {
 public:
  virtual ~KeyDirectory() = default;

  // The API key whose secret hashes to `secret_sha256` (hex), revoked ones too, or none, and the
  // database's time of the lookup; unavailable when the database cannot be asked.
  virtual Result<KeyLookup> find_key(std::string_view secret_sha256) = 0;
};

}  // namespace tollgate
