// Test support: an SQLite VFS that simulates a power cut (the idea of SQLite's own test6.c).
//
// PowerLossVfs registers a VFS, under a name the test gives, that wraps the default "unix" VFS:
// every file opened through it is the real file, and every method is forwarded to it (reads, locks,
// the xShm* shared memory, xFileControl, xSectorSize, xDeviceCharacteristics, xFetch/xUnfetch), except:
//   - xWrite and xTruncate are recorded first: per file PATH (one record shared by every handle on
//     that path — the writer's WAL handle, the readers', the checkpointer's and SqliteStore::sync()'s
//     own handle are different handles on one file), the offset, the bytes written, the bytes they
//     replace and the size the file had before. That is what the page cache holds and the disk may not.
//   - xSync of any handle on a path makes everything written to that path before it began durable:
//     those operations leave the record (fdatasync flushes the file's data whichever descriptor wrote
//     it). The real fsync is not called — the real disk's durability is irrelevant to the simulation,
//     and skipping it keeps it fast —, but a flush may be given a duration (set_sync_latency: a sleep
//     outside the mutex) so that, as on a real disk, other threads write while it runs; what they
//     write meanwhile is not covered by it. A flush the cut interrupts fails and covers nothing.
//   - SQLITE_FCNTL_SIZE_HINT is answered without touching the file (the unix VFS would otherwise
//     extend the file behind the recording when a chunk size is set; tollgate sets none).
//
// The power cut — cut(), or arm()ed to happen at the start of the N-th xWrite/xTruncate/xSync call (or
// the N-th xSync) on any file, under the VFS's one mutex, so at a random moment of whatever the
// threads are doing — writes a crash image of every file opened through the VFS into a directory (same
// file names): the file's synced content (its current content with the unsynced operations undone,
// newest first), then its unsynced operations replayed in order, each one, chosen with a seeded RNG:
//   - kept (it reached the disk), dropped (it did not: a dropped extension leaves the file shorter),
//   - or, for a write, torn: each 512-byte sector it touches (sectors aligned on file offsets; a
//     partial sector at either end is the written part only) either new or old content — bytes
//     outside the written range are never changed (SQLite's POWERSAFE_OVERWRITE, which the unix VFS
//     reports), and a torn extension ends after its last sector that made it (zeros in between);
//   - a truncation is kept or dropped whole.
// The seed also picks the cut's mix: a quarter of the cuts drop every unsynced operation, an eighth
// keep them all (what a kill -9 leaves), the others keep, tear and drop each with odds of their own.
// Unsynced operations are therefore lost in any combination and any order, newer ones surviving older
// ones. The -shm file is left out (it is not a file SQLite recovers from: it rebuilds it). After the
// cut every xWrite, xTruncate, xSync and xDelete through the VFS fails (SQLITE_IOERR_WRITE, _TRUNCATE,
// _FSYNC, _DELETE), so nothing can be made durable — or acknowledged as durable — after it: an
// operation acknowledged at all was acknowledged after a sync that completed before the cut. Reads
// still work (on the live files, which the cut does not change).
//
// What it does NOT model:
//   - directory entries: creating and deleting a file are durable at once (no directory fsync needed);
//     a file created and never synced comes back empty, not absent (for SQLite, the same thing);
//   - renames, and a path deleted and created again while a handle on the old file is still open
//     (records are per path, not per inode);
//   - temporary files (opened without a name, or to be deleted on close): forwarded, not recorded;
//   - writes the VFS does not see: the -shm file's memory mapping (left out, see above), writes
//     through a memory mapping of the database (SQLite makes none unless built with
//     SQLITE_MMAP_READWRITE), and files written without SQLite (none here);
//   - a flush that fails or lies, media corruption, bit rot, or data of the live files changing
//     under their readers after the cut (the live files keep everything; only the image loses).
//
// Thread safety: every method may be called from any thread; SQLite's calls into the VFS from any
// number of connections on any threads are serialized by one mutex where they record or cut (xWrite,
// xTruncate, xSync, xDelete, xOpen) and forwarded without it otherwise. The object must outlive every
// connection opened through it (asserted when it goes: no file may be open).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tollgate::testing {

// What a cut did to one file.
struct PowerLossFile {
  std::string name;               // the file name (the image has the same name)
  std::int64_t live_size = 0;     // the file as the processes saw it at the cut
  std::int64_t synced_size = 0;   // as of its last sync
  std::int64_t image_size = 0;    // in the crash image
  std::int64_t unsynced = 0;      // writes and truncations since its last sync
  std::int64_t unsynced_bytes = 0;
  std::int64_t kept = 0, dropped = 0, torn = 0;
  bool differs = false;           // the image differs from the live file: unsynced data was lost
};

struct PowerLossReport {
  std::uint64_t at_call = 0;  // the call (counted since arm(), of the kind armed) it cut before; 0: cut()
  bool at_sync = false;       // armed on xSync calls only
  std::uint64_t seed = 0;
  double keep_probability = 0, tear_probability = 0;  // per unsynced write, this cut's mix
  std::vector<PowerLossFile> files;                    // in path order

  bool any_differs() const;
  std::string summary() const;  // one line, for the test's log
};

class PowerLossVfs {
 public:
  // Registers the VFS as `name` (not as the default VFS). Files opened with the VFS of that name
  // (sqlite3_open_v2's zVfs, SqliteOptions::vfs) go through it.
  explicit PowerLossVfs(std::string name);
  ~PowerLossVfs();  // unregisters; asserts that no file is still open through it
  PowerLossVfs(const PowerLossVfs&) = delete;
  PowerLossVfs& operator=(const PowerLossVfs&) = delete;

  const std::string& name() const { return name_; }

  // Which calls arm() counts: every xWrite/xTruncate/xSync, or xSync alone (a cut at the start of a
  // flush: the moment between a commit and its acknowledgement).
  enum class CutAt : std::uint8_t { any_call, sync_call };
  // Cuts the power at the start of the `call`-th call of kind `at` from now (1 = the next one) on any
  // file, writing the crash image into `image_dir` (which must exist) with `seed`. That call fails.
  void arm(std::uint64_t call, std::uint64_t seed, std::filesystem::path image_dir, CutAt at = CutAt::any_call);
  // Cuts the power now (no-op, returning false, if it is already off).
  bool cut(std::uint64_t seed, const std::filesystem::path& image_dir);

  // How long each xSync takes from now on (default: no time at all).
  void set_sync_latency(std::chrono::microseconds latency);

  bool power_is_off() const;
  // What the cut did; nullopt before it.
  std::optional<PowerLossReport> report() const;
  // xWrite/xTruncate/xSync calls (on named files) since construction, and xSync calls among them.
  std::uint64_t calls() const;
  std::uint64_t syncs() const;

 private:
  struct Impl;  // the VFS, its files and their records (power_loss_vfs.cc)
  const std::string name_;      // the registered VFS points at it
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::testing
