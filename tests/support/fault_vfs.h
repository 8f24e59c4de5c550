// Test support: an SQLite VFS that injects disk faults — a full disk, a failing flush.
//
// FaultVfs registers a VFS over the default one of the moment (normally "unix"): every file opened
// through it is the real file and every method is forwarded, except while a fault is on:
//   - disk full: an xWrite that would make its file longer fails with SQLITE_FULL and writes
//     nothing (what a file system without a free block answers; a write inside the file's current
//     size still succeeds, as it does on a full tmpfs or ext4 for allocated blocks);
//   - flush fails: xSync fails with SQLITE_IOERR_FSYNC without flushing (what fsync answers on EIO).
//     The data stays in the live file — this VFS does not model the page cache dropping it (see
//     power_loss_vfs.h for that) —, so what a later open finds is the acknowledged state plus,
//     possibly, the batch whose flush failed: an operation answered with a 5xx is "unknown".
// A fault is on while set_disk_full()/set_sync_fails() say so, or, with watch(dir), while a file
// named "disk-full" or "fail-sync" exists in `dir` (checked at each call: a test controls a server
// process that runs this VFS by creating and deleting those files).
//
// Registered by name for in-process tests (SqliteOptions::vfs), or as the default VFS by a test
// binary before it opens any database (tests/support/fault_server.cc: `tollgate serve` with it).
//
// Thread safety: every method may be called from any thread; the flags are atomics. The object must
// outlive every connection opened through it, and its name must not be used again in the process
// (the store's WAL batching layer remembers the VFS it wraps by name): use unique_name().
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace tollgate::testing {

class FaultVfs {
 public:
  // Registers the VFS as `name`; as the process's default VFS too when `make_default`.
  explicit FaultVfs(std::string name, bool make_default = false);
  ~FaultVfs();  // unregisters
  FaultVfs(const FaultVfs&) = delete;
  FaultVfs& operator=(const FaultVfs&) = delete;

  // A name not used before in this process ("fault-<n>").
  static std::string unique_name();

  const std::string& name() const { return name_; }
  void set_disk_full(bool on);
  void set_sync_fails(bool on);
  // Also on while `dir`/disk-full or `dir`/fail-sync exists.
  void watch(std::filesystem::path dir);

  std::uint64_t refused_writes() const;  // xWrite calls failed with SQLITE_FULL
  std::uint64_t failed_syncs() const;    // xSync calls failed with SQLITE_IOERR_FSYNC
  std::uint64_t syncs() const;           // xSync calls, failed or not

  struct Impl;  // the VFS and its files (fault_vfs.cc)

 private:
  const std::string name_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::testing
