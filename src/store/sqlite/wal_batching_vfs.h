// tollgate store/sqlite: a VFS layer that writes a transaction's WAL frames with one write.
//
// SQLite appends each WAL frame with two writes (its 24-byte header, then the page), so a batch that
// dirties 50 pages costs 100 pwrite calls — and on a virtual machine a system call is most of the
// cost of a small write. This layer sits between SQLite and a base VFS (the default one, or a test's)
// and, for WAL files only, keeps contiguous appends in memory and hands them to the base VFS as one
// write when the page of a commit frame (a frame header whose "database size" field is non-zero)
// has been appended — inside that very xWrite call, so a failure fails the commit, and before
// SQLite publishes the commit to other connections (it updates the wal-index only after its
// frame writes returned). Everything else goes straight through:
//   - a write that is not an append at the end of what this handle wrote (a frame rewritten in
//     place, a checksum rewritten after the commit) flushes what is buffered and is written at once;
//   - a 32-byte write at offset 0 is the WAL header of a restarted log: buffered appends start over;
//   - xRead, xSync, xTruncate, xFileSize, xFileControl, xFetch and xClose flush first, so this
//     handle (and a sync through it) sees exactly what a plain VFS would show;
//   - at most kBufferBytesMax bytes are held; more are written out early.
// Nothing is ever held across a commit: once a commit frame's page is written, the buffer is empty,
// so a WAL flush through any other handle (SqliteStore::sync uses its own) covers the commit.
// Main database files, journals and the -shm file pass through untouched.
//
// Thread safety: register_wal_batching_vfs() may be called from any thread (once per base name). A
// file handle is used by one connection, one thread at a time, as SQLite does.
#pragma once

#include <cstddef>
#include <string>

#include "core/limits.h"
#include "core/result.h"

namespace tollgate::sqlite {

using limits::kWalBufferBytesMax;  // the layer's buffer (core/limits.h)

// Registers (once) the batching layer over the VFS named `base` ("" for the default one) and
// returns the name to open connections with.
Result<std::string> register_wal_batching_vfs(const std::string& base);

}  // namespace tollgate::sqlite
