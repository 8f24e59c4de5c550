// The WAL batching layer (see wal_batching_vfs.h).
#include "store/sqlite/wal_batching_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "core/thread_annotations.h"

namespace tollgate::sqlite {
namespace {

constexpr int kFrameHeaderBytes = 24;  // a WAL frame's header; bytes 4..7: database size, 0 unless commit
constexpr int kWalHeaderBytes = 32;    // the WAL file's header, at offset 0 of a (re)started log
// The largest write handed to the base VFS at once (limits::kWalWriteBytesMax): the unix VFS
// truncates a write's size to 17 bits (SQLite itself never writes more than a page), so a flush goes
// out in pieces below 128 KiB.

// The appends of one WAL handle not yet handed to the base VFS.
struct WalState {
  std::string buffer;                // contiguous bytes, starting at buffer_offset
  sqlite3_int64 buffer_offset = 0;
  sqlite3_int64 end = -1;            // end of everything written through this handle (-1: not known)
  bool commit_page_next = false;     // the last write was a commit frame's header
};

// A file of the layer: our sqlite3_file, then the base VFS's file in the same allocation.
struct File {
  sqlite3_file base;  // first: SQLite sees this
  sqlite3_file* real;
  WalState* wal;  // set for WAL files only (placement-new'ed in `wal_storage`)
  alignas(WalState) unsigned char wal_storage[sizeof(WalState)];
};
constexpr int kRealOffset = static_cast<int>((sizeof(File) + 15) / 16 * 16);

File* as_file(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
sqlite3_file* real_of(sqlite3_file* f) { return as_file(f)->real; }

std::uint32_t big_endian_u32(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

// Hands what is buffered to the base VFS, in as few writes as it takes.
int flush(File* file) {
  WalState* w = file->wal;
  if (w == nullptr || w->buffer.empty()) return SQLITE_OK;
  int rc = SQLITE_OK;
  for (std::size_t at = 0; at < w->buffer.size() && rc == SQLITE_OK; at += limits::kWalWriteBytesMax) {
    const std::size_t n = std::min(limits::kWalWriteBytesMax, w->buffer.size() - at);
    rc = file->real->pMethods->xWrite(file->real, w->buffer.data() + at, static_cast<int>(n),
                                      w->buffer_offset + static_cast<sqlite3_int64>(at));
  }
  w->buffer.clear();
  return rc;
}

// --- io methods -----------------------------------------------------------------------------------
int x_close(sqlite3_file* f) {
  File* file = as_file(f);
  const int flushed = flush(file);
  const int rc = file->real->pMethods->xClose(file->real);
  if (file->wal) {
    file->wal->~WalState();
    file->wal = nullptr;
  }
  return flushed != SQLITE_OK ? flushed : rc;
}

int x_read(sqlite3_file* f, void* data, int n, sqlite3_int64 offset) {
  if (const int rc = flush(as_file(f))) return rc;
  return real_of(f)->pMethods->xRead(real_of(f), data, n, offset);
}

int x_write(sqlite3_file* f, const void* data, int n, sqlite3_int64 offset) {
  File* file = as_file(f);
  WalState* w = file->wal;
  if (w == nullptr) return file->real->pMethods->xWrite(file->real, data, n, offset);
  if (n == kWalHeaderBytes && offset == 0) {  // a restarted log: what was buffered belongs to the old one
    if (const int rc = flush(file)) return rc;
    w->end = 0;
  }
  const bool commit_page = w->commit_page_next && n != kFrameHeaderBytes;
  w->commit_page_next = n == kFrameHeaderBytes && big_endian_u32(static_cast<const unsigned char*>(data) + 4) != 0;
  const bool append = w->buffer.empty() ? offset == w->end : offset == w->buffer_offset + static_cast<sqlite3_int64>(w->buffer.size());
  if (!append) {
    // Not an append at the end of this handle's writes (a frame rewritten in place, a checksum
    // rewritten after its commit): what is buffered first, then this write, both now.
    if (const int rc = flush(file)) return rc;
    const int rc = file->real->pMethods->xWrite(file->real, data, n, offset);
    if (rc == SQLITE_OK) w->end = std::max(w->end, offset + n);
    return rc;
  }
  if (w->buffer.empty()) w->buffer_offset = offset;
  w->buffer.append(static_cast<const char*>(data), static_cast<std::size_t>(n));
  w->end = offset + n;
  // The commit frame is complete: the transaction's frames go to the base VFS now, before SQLite
  // publishes the commit to other connections (and if the write fails, the commit fails).
  if (commit_page || w->buffer.size() >= kWalBufferBytesMax) return flush(file);
  return SQLITE_OK;
}

int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  File* file = as_file(f);
  if (const int rc = flush(file)) return rc;
  if (file->wal) file->wal->end = std::min(file->wal->end, size);
  return file->real->pMethods->xTruncate(file->real, size);
}

int x_sync(sqlite3_file* f, int flags) {
  if (const int rc = flush(as_file(f))) return rc;
  return real_of(f)->pMethods->xSync(real_of(f), flags);
}

int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  if (const int rc = flush(as_file(f))) return rc;
  return real_of(f)->pMethods->xFileSize(real_of(f), size);
}

int x_lock(sqlite3_file* f, int level) { return real_of(f)->pMethods->xLock(real_of(f), level); }
int x_unlock(sqlite3_file* f, int level) { return real_of(f)->pMethods->xUnlock(real_of(f), level); }
int x_check_reserved_lock(sqlite3_file* f, int* out) {
  return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}

int x_file_control(sqlite3_file* f, int op, void* arg) {
  if (const int rc = flush(as_file(f))) return rc;
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}

int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device_characteristics(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }

int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return real_of(f)->pMethods->xShmMap(real_of(f), region, size, extend, out);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
int x_shm_unmap(sqlite3_file* f, int delete_flag) { return real_of(f)->pMethods->xShmUnmap(real_of(f), delete_flag); }

int x_fetch(sqlite3_file* f, sqlite3_int64 offset, int n, void** out) {
  if (const int rc = flush(as_file(f))) return rc;
  return real_of(f)->pMethods->xFetch(real_of(f), offset, n, out);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) {
  return real_of(f)->pMethods->xUnfetch(real_of(f), offset, p);
}

// One table per method version of the base file (a method beyond the base's version is absent).
sqlite3_io_methods methods_for(int version) {
  sqlite3_io_methods m{};
  m.iVersion = version;
  m.xClose = x_close;
  m.xRead = x_read;
  m.xWrite = x_write;
  m.xTruncate = x_truncate;
  m.xSync = x_sync;
  m.xFileSize = x_file_size;
  m.xLock = x_lock;
  m.xUnlock = x_unlock;
  m.xCheckReservedLock = x_check_reserved_lock;
  m.xFileControl = x_file_control;
  m.xSectorSize = x_sector_size;
  m.xDeviceCharacteristics = x_device_characteristics;
  if (version >= 2) {
    m.xShmMap = x_shm_map;
    m.xShmLock = x_shm_lock;
    m.xShmBarrier = x_shm_barrier;
    m.xShmUnmap = x_shm_unmap;
  }
  if (version >= 3) {
    m.xFetch = x_fetch;
    m.xUnfetch = x_unfetch;
  }
  return m;
}
const sqlite3_io_methods kMethods[] = {methods_for(1), methods_for(2), methods_for(3)};

// --- vfs methods ----------------------------------------------------------------------------------
sqlite3_vfs* base_of(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

int v_open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  File* file = as_file(f);
  file->base.pMethods = nullptr;
  file->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<unsigned char*>(f) + kRealOffset);
  file->wal = nullptr;
  const int rc = base_of(vfs)->xOpen(base_of(vfs), name, file->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    // The base may have set its methods even so: SQLite then calls our xClose, which closes it.
    if (file->real->pMethods != nullptr) file->base.pMethods = &kMethods[std::clamp(file->real->pMethods->iVersion, 1, 3) - 1];
    return rc;
  }
  if ((flags & SQLITE_OPEN_WAL) != 0) file->wal = new (file->wal_storage) WalState();
  file->base.pMethods = &kMethods[std::clamp(file->real->pMethods->iVersion, 1, 3) - 1];
  return SQLITE_OK;
}

int v_delete(sqlite3_vfs* vfs, const char* name, int sync_dir) { return base_of(vfs)->xDelete(base_of(vfs), name, sync_dir); }
int v_access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return base_of(vfs)->xAccess(base_of(vfs), name, flags, out);
}
int v_full_pathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return base_of(vfs)->xFullPathname(base_of(vfs), name, n, out);
}
void* v_dl_open(sqlite3_vfs* vfs, const char* name) { return base_of(vfs)->xDlOpen(base_of(vfs), name); }
void v_dl_error(sqlite3_vfs* vfs, int n, char* out) { base_of(vfs)->xDlError(base_of(vfs), n, out); }
void (*v_dl_sym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
  return base_of(vfs)->xDlSym(base_of(vfs), handle, symbol);
}
void v_dl_close(sqlite3_vfs* vfs, void* handle) { base_of(vfs)->xDlClose(base_of(vfs), handle); }
int v_randomness(sqlite3_vfs* vfs, int n, char* out) { return base_of(vfs)->xRandomness(base_of(vfs), n, out); }
int v_sleep(sqlite3_vfs* vfs, int us) { return base_of(vfs)->xSleep(base_of(vfs), us); }
int v_current_time(sqlite3_vfs* vfs, double* out) { return base_of(vfs)->xCurrentTime(base_of(vfs), out); }
int v_last_error(sqlite3_vfs* vfs, int n, char* out) { return base_of(vfs)->xGetLastError(base_of(vfs), n, out); }
int v_current_time_int64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return base_of(vfs)->xCurrentTimeInt64(base_of(vfs), out);
}
int v_set_system_call(sqlite3_vfs* vfs, const char* name, sqlite3_syscall_ptr p) {
  return base_of(vfs)->xSetSystemCall(base_of(vfs), name, p);
}
sqlite3_syscall_ptr v_get_system_call(sqlite3_vfs* vfs, const char* name) {
  return base_of(vfs)->xGetSystemCall(base_of(vfs), name);
}
const char* v_next_system_call(sqlite3_vfs* vfs, const char* name) {
  return base_of(vfs)->xNextSystemCall(base_of(vfs), name);
}

struct Registered {
  std::string name;
  sqlite3_vfs vfs{};
};

}  // namespace

Result<std::string> register_wal_batching_vfs(const std::string& base_name) {
  static Mutex mu;
  static std::map<std::string, std::unique_ptr<Registered>> registered GUARDED_BY(mu);  // live for the process
  MutexLock lock(mu);
  if (auto it = registered.find(base_name); it != registered.end()) return it->second->name;
  sqlite3_vfs* base = sqlite3_vfs_find(base_name.empty() ? nullptr : base_name.c_str());
  if (base == nullptr) return Error::make(Code::internal, "no SQLite VFS named " + base_name);
  auto r = std::make_unique<Registered>();
  r->name = "tollgate-wal-batching:" + std::string(base->zName);
  sqlite3_vfs& v = r->vfs;
  v.iVersion = std::min(base->iVersion, 3);
  v.szOsFile = kRealOffset + base->szOsFile;
  v.mxPathname = base->mxPathname;
  v.zName = r->name.c_str();
  v.pAppData = base;
  v.xOpen = v_open;
  v.xDelete = v_delete;
  v.xAccess = v_access;
  v.xFullPathname = v_full_pathname;
  v.xDlOpen = base->xDlOpen ? v_dl_open : nullptr;
  v.xDlError = base->xDlError ? v_dl_error : nullptr;
  v.xDlSym = base->xDlSym ? v_dl_sym : nullptr;
  v.xDlClose = base->xDlClose ? v_dl_close : nullptr;
  v.xRandomness = v_randomness;
  v.xSleep = v_sleep;
  v.xCurrentTime = v_current_time;
  v.xGetLastError = v_last_error;
  if (v.iVersion >= 2) v.xCurrentTimeInt64 = base->xCurrentTimeInt64 ? v_current_time_int64 : nullptr;
  if (v.iVersion >= 3) {
    v.xSetSystemCall = base->xSetSystemCall ? v_set_system_call : nullptr;
    v.xGetSystemCall = base->xGetSystemCall ? v_get_system_call : nullptr;
    v.xNextSystemCall = base->xNextSystemCall ? v_next_system_call : nullptr;
  }
  if (const int rc = sqlite3_vfs_register(&v, /*makeDflt=*/0); rc != SQLITE_OK) {
    return Error::make(Code::internal, std::string("cannot register the WAL batching VFS: ") + sqlite3_errstr(rc));
  }
  std::string name = r->name;
  registered.emplace(base_name, std::move(r));
  return name;
}

}  // namespace tollgate::sqlite
