#include "support/fault_vfs.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "core/result.h"

namespace tollgate::testing {

struct FaultVfs::Impl {
  // The sqlite3_file this VFS hands out; the real file follows it in the same allocation.
  struct File {
    sqlite3_file base;
    Impl* impl;
    sqlite3_file* real;
  };
  static constexpr std::size_t kFileHeader =
      (sizeof(File) + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);

  sqlite3_vfs vfs{};
  sqlite3_vfs* real = nullptr;
  std::string name;
  std::atomic<bool> disk_full{false};
  std::atomic<bool> sync_fails{false};
  std::mutex watch_mu;
  std::string disk_full_file, fail_sync_file;  // guarded by watch_mu; empty: not watching
  std::atomic<std::uint64_t> refused_writes{0}, failed_syncs{0}, syncs{0};

  static bool exists(const std::string& path) {
    struct stat st {};
    return !path.empty() && ::stat(path.c_str(), &st) == 0;
  }
  bool full_now() {
    if (disk_full.load()) return true;
    std::lock_guard lock(watch_mu);
    return exists(disk_full_file);
  }
  bool sync_fails_now() {
    if (sync_fails.load()) return true;
    std::lock_guard lock(watch_mu);
    return exists(fail_sync_file);
  }

  explicit Impl(std::string vfs_name) : real(sqlite3_vfs_find(nullptr)), name(std::move(vfs_name)) {
    TG_ASSERT(real != nullptr);
    vfs.iVersion = 3;
    vfs.szOsFile = static_cast<int>(kFileHeader) + real->szOsFile;
    vfs.mxPathname = real->mxPathname;
    vfs.zName = name.c_str();
    vfs.pAppData = this;
    vfs.xOpen = x_open;
    vfs.xDelete = [](sqlite3_vfs* v, const char* n, int sync_dir) { return real_of(v)->xDelete(real_of(v), n, sync_dir); };
    vfs.xAccess = [](sqlite3_vfs* v, const char* n, int f, int* out) { return real_of(v)->xAccess(real_of(v), n, f, out); };
    vfs.xFullPathname = [](sqlite3_vfs* v, const char* n, int size, char* out) {
      return real_of(v)->xFullPathname(real_of(v), n, size, out);
    };
    vfs.xDlOpen = [](sqlite3_vfs* v, const char* n) { return real_of(v)->xDlOpen(real_of(v), n); };
    vfs.xDlError = [](sqlite3_vfs* v, int size, char* out) { real_of(v)->xDlError(real_of(v), size, out); };
    vfs.xDlSym = [](sqlite3_vfs* v, void* h, const char* s) { return real_of(v)->xDlSym(real_of(v), h, s); };
    vfs.xDlClose = [](sqlite3_vfs* v, void* h) { real_of(v)->xDlClose(real_of(v), h); };
    vfs.xRandomness = [](sqlite3_vfs* v, int size, char* out) { return real_of(v)->xRandomness(real_of(v), size, out); };
    vfs.xSleep = [](sqlite3_vfs* v, int us) { return real_of(v)->xSleep(real_of(v), us); };
    vfs.xCurrentTime = [](sqlite3_vfs* v, double* out) { return real_of(v)->xCurrentTime(real_of(v), out); };
    vfs.xGetLastError = [](sqlite3_vfs* v, int size, char* out) {
      return real_of(v)->xGetLastError(real_of(v), size, out);
    };
    vfs.xCurrentTimeInt64 = [](sqlite3_vfs* v, sqlite3_int64* out) {
      return real_of(v)->xCurrentTimeInt64(real_of(v), out);
    };
    vfs.xSetSystemCall = [](sqlite3_vfs* v, const char* n, sqlite3_syscall_ptr p) {
      return real_of(v)->xSetSystemCall(real_of(v), n, p);
    };
    vfs.xGetSystemCall = [](sqlite3_vfs* v, const char* n) { return real_of(v)->xGetSystemCall(real_of(v), n); };
    vfs.xNextSystemCall = [](sqlite3_vfs* v, const char* n) { return real_of(v)->xNextSystemCall(real_of(v), n); };
  }

  static Impl& of(sqlite3_vfs* v) { return *static_cast<Impl*>(v->pAppData); }
  static sqlite3_vfs* real_of(sqlite3_vfs* v) { return of(v).real; }
  static File& file_of(sqlite3_file* f) { return *reinterpret_cast<File*>(f); }
  static sqlite3_file* real_file(sqlite3_file* f) { return file_of(f).real; }

  static int x_open(sqlite3_vfs* v, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
    Impl& impl = of(v);
    File& file = file_of(f);
    file.base.pMethods = nullptr;
    file.impl = &impl;
    file.real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + kFileHeader);
    std::memset(file.real, 0, static_cast<std::size_t>(impl.real->szOsFile));
    const int rc = impl.real->xOpen(impl.real, name, file.real, flags, out_flags);
    if (file.real->pMethods != nullptr) file.base.pMethods = methods_for(file.real->pMethods->iVersion);
    return rc;
  }

  // --- io methods: forwarded, but for xWrite and xSync while a fault is on ---
  static int f_close(sqlite3_file* f) { return real_file(f)->pMethods->xClose(real_file(f)); }
  static int f_read(sqlite3_file* f, void* data, int n, sqlite3_int64 offset) {
    return real_file(f)->pMethods->xRead(real_file(f), data, n, offset);
  }
  static int f_write(sqlite3_file* f, const void* data, int n, sqlite3_int64 offset) {
    Impl& impl = *file_of(f).impl;
    if (impl.full_now()) {
      sqlite3_int64 size = 0;
      if (const int rc = real_file(f)->pMethods->xFileSize(real_file(f), &size); rc != SQLITE_OK) return rc;
      if (offset + n > size) {
        impl.refused_writes.fetch_add(1);
        return SQLITE_FULL;
      }
    }
    return real_file(f)->pMethods->xWrite(real_file(f), data, n, offset);
  }
  static int f_truncate(sqlite3_file* f, sqlite3_int64 size) {
    return real_file(f)->pMethods->xTruncate(real_file(f), size);
  }
  static int f_sync(sqlite3_file* f, int flags) {
    Impl& impl = *file_of(f).impl;
    impl.syncs.fetch_add(1);
    if (impl.sync_fails_now()) {
      impl.failed_syncs.fetch_add(1);
      return SQLITE_IOERR_FSYNC;
    }
    return real_file(f)->pMethods->xSync(real_file(f), flags);
  }
  static int f_file_size(sqlite3_file* f, sqlite3_int64* size) {
    return real_file(f)->pMethods->xFileSize(real_file(f), size);
  }
  static int f_lock(sqlite3_file* f, int level) { return real_file(f)->pMethods->xLock(real_file(f), level); }
  static int f_unlock(sqlite3_file* f, int level) { return real_file(f)->pMethods->xUnlock(real_file(f), level); }
  static int f_check_reserved_lock(sqlite3_file* f, int* out) {
    return real_file(f)->pMethods->xCheckReservedLock(real_file(f), out);
  }
  static int f_file_control(sqlite3_file* f, int op, void* arg) {
    return real_file(f)->pMethods->xFileControl(real_file(f), op, arg);
  }
  static int f_sector_size(sqlite3_file* f) { return real_file(f)->pMethods->xSectorSize(real_file(f)); }
  static int f_device_characteristics(sqlite3_file* f) {
    return real_file(f)->pMethods->xDeviceCharacteristics(real_file(f));
  }
  static int f_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
    return real_file(f)->pMethods->xShmMap(real_file(f), region, size, extend, out);
  }
  static int f_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
    return real_file(f)->pMethods->xShmLock(real_file(f), offset, n, flags);
  }
  static void f_shm_barrier(sqlite3_file* f) { real_file(f)->pMethods->xShmBarrier(real_file(f)); }
  static int f_shm_unmap(sqlite3_file* f, int delete_flag) {
    return real_file(f)->pMethods->xShmUnmap(real_file(f), delete_flag);
  }
  static int f_fetch(sqlite3_file* f, sqlite3_int64 offset, int n, void** out) {
    return real_file(f)->pMethods->xFetch(real_file(f), offset, n, out);
  }
  static int f_unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) {
    return real_file(f)->pMethods->xUnfetch(real_file(f), offset, p);
  }

  // A wrapped file offers what the file it wraps offers (shared memory from 2, mapping from 3).
  static const sqlite3_io_methods* methods_for(int version) {
    static const sqlite3_io_methods methods[3] = {make_methods(1), make_methods(2), make_methods(3)};
    return &methods[std::clamp(version, 1, 3) - 1];
  }
  static sqlite3_io_methods make_methods(int version) {
    sqlite3_io_methods m{};
    m.iVersion = version;
    m.xClose = f_close;
    m.xRead = f_read;
    m.xWrite = f_write;
    m.xTruncate = f_truncate;
    m.xSync = f_sync;
    m.xFileSize = f_file_size;
    m.xLock = f_lock;
    m.xUnlock = f_unlock;
    m.xCheckReservedLock = f_check_reserved_lock;
    m.xFileControl = f_file_control;
    m.xSectorSize = f_sector_size;
    m.xDeviceCharacteristics = f_device_characteristics;
    if (version >= 2) {
      m.xShmMap = f_shm_map;
      m.xShmLock = f_shm_lock;
      m.xShmBarrier = f_shm_barrier;
      m.xShmUnmap = f_shm_unmap;
    }
    if (version >= 3) {
      m.xFetch = f_fetch;
      m.xUnfetch = f_unfetch;
    }
    return m;
  }
};

FaultVfs::FaultVfs(std::string name, bool make_default) : name_(std::move(name)), impl_(std::make_unique<Impl>(name_)) {
  const int rc = sqlite3_vfs_register(&impl_->vfs, make_default ? 1 : 0);
  if (rc != SQLITE_OK) throw std::runtime_error("sqlite3_vfs_register " + name_ + ": " + sqlite3_errstr(rc));
}

FaultVfs::~FaultVfs() { sqlite3_vfs_unregister(&impl_->vfs); }

std::string FaultVfs::unique_name() {
  static std::atomic<int> next{0};
  return "fault-" + std::to_string(next.fetch_add(1));
}

void FaultVfs::set_disk_full(bool on) { impl_->disk_full.store(on); }
void FaultVfs::set_sync_fails(bool on) { impl_->sync_fails.store(on); }

void FaultVfs::watch(std::filesystem::path dir) {
  std::lock_guard lock(impl_->watch_mu);
  impl_->disk_full_file = (dir / "disk-full").string();
  impl_->fail_sync_file = (dir / "fail-sync").string();
}

std::uint64_t FaultVfs::refused_writes() const { return impl_->refused_writes.load(); }
std::uint64_t FaultVfs::failed_syncs() const { return impl_->failed_syncs.load(); }
std::uint64_t FaultVfs::syncs() const { return impl_->syncs.load(); }

}  // namespace tollgate::testing
