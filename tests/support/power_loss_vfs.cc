#include "support/power_loss_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/result.h"

namespace tollgate::testing {
namespace {

constexpr std::int64_t kSector = 512;  // the unit a torn write is made of

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_whole_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "power-loss vfs: cannot write the crash image %s\n", path.c_str());
    std::abort();  // inside an SQLite callback: no exception may cross it
  }
}

// Writes `data` at `offset` into `content`, growing it (with zeros) as needed.
void put(std::string& content, std::int64_t offset, std::string_view data) {
  const auto end = static_cast<std::size_t>(offset) + data.size();
  if (content.size() < end) content.resize(end, '\0');
  std::memcpy(content.data() + offset, data.data(), data.size());
}

}  // namespace

// --- the VFS ---------------------------------------------------------------------------------------

struct PowerLossVfs::Impl {
  using CutAt = PowerLossVfs::CutAt;
  // One write or truncation not yet synced, with what it replaced.
  struct Op {
    enum class Kind : std::uint8_t { write, truncate };
    Kind kind = Kind::write;
    std::int64_t offset = 0;       // write: where; truncate: the new size
    std::string data;              // write: the bytes written
    std::string before;            // the bytes it replaced (those that existed: up to size_before)
    std::int64_t size_before = 0;  // the file's size before it
    std::uint64_t seq = 0;         // the order of all operations on all files
  };
  // Everything the VFS knows of one file path, shared by every handle opened on it.
  struct PathState {
    std::string path;
    std::vector<Op> unsynced;  // oldest first
  };
  // The sqlite3_file this VFS hands out; the real file follows it in the same allocation.
  struct File {
    sqlite3_file base;
    Impl* impl;
    PathState* state;  // nullptr: a temporary file (no name), not part of the crash image
    sqlite3_file* real;
  };
  static constexpr std::size_t kFileHeader =
      (sizeof(File) + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);

  explicit Impl(const std::string& name) : real(sqlite3_vfs_find("unix")) {
    TG_ASSERT(real != nullptr);
    vfs.iVersion = 3;
    vfs.szOsFile = static_cast<int>(kFileHeader) + real->szOsFile;
    vfs.mxPathname = real->mxPathname;
    vfs.zName = name.c_str();
    vfs.pAppData = this;
    vfs.xOpen = x_open;
    vfs.xDelete = x_delete;
    vfs.xAccess = [](sqlite3_vfs* v, const char* n, int f, int* out) {
      return real_of(v)->xAccess(real_of(v), n, f, out);
    };
    vfs.xFullPathname = [](sqlite3_vfs* v, const char* n, int size, char* out) {
      return real_of(v)->xFullPathname(real_of(v), n, size, out);
    };
    vfs.xDlOpen = [](sqlite3_vfs* v, const char* n) { return real_of(v)->xDlOpen(real_of(v), n); };
    vfs.xDlError = [](sqlite3_vfs* v, int size, char* out) { real_of(v)->xDlError(real_of(v), size, out); };
    vfs.xDlSym = [](sqlite3_vfs* v, void* h, const char* s) { return real_of(v)->xDlSym(real_of(v), h, s); };
    vfs.xDlClose = [](sqlite3_vfs* v, void* h) { real_of(v)->xDlClose(real_of(v), h); };
    vfs.xRandomness = [](sqlite3_vfs* v, int size, char* out) {
      return real_of(v)->xRandomness(real_of(v), size, out);
    };
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

  // --- VFS methods ---
  static int x_open(sqlite3_vfs* v, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
    Impl& impl = of(v);
    File& file = file_of(f);
    file.base.pMethods = nullptr;
    file.impl = &impl;
    file.state = nullptr;
    file.real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + kFileHeader);
    std::memset(file.real, 0, static_cast<std::size_t>(impl.real->szOsFile));
    // The name is passed on as it is: SQLite's file names carry URI parameters after the
    // terminator, and the unix VFS keeps the pointer.
    const int rc = impl.real->xOpen(impl.real, name, file.real, flags, out_flags);
    if (rc != SQLITE_OK) {
      if (file.real->pMethods != nullptr) file.real->pMethods->xClose(file.real);
      return rc;  // pMethods stays null: SQLite will not call xClose
    }
    if (name != nullptr && (flags & SQLITE_OPEN_DELETEONCLOSE) == 0) {
      std::lock_guard lock(impl.mu);
      auto& state = impl.paths[name];
      if (!state) state = std::make_unique<PathState>(PathState{name, {}});
      file.state = state.get();
    }
    file.base.pMethods = methods_for(file.real->pMethods->iVersion);
    impl.open_files.fetch_add(1, std::memory_order_relaxed);
    return SQLITE_OK;
  }

  static int x_delete(sqlite3_vfs* v, const char* name, int sync_dir) {
    Impl& impl = of(v);
    std::lock_guard lock(impl.mu);
    if (impl.power_off.load(std::memory_order_relaxed)) return SQLITE_IOERR_DELETE;
    const int rc = impl.real->xDelete(impl.real, name, sync_dir);
    // A deleted file is gone at once (directory entries are not modelled): nothing of it is pending.
    if (auto it = impl.paths.find(name); rc == SQLITE_OK && it != impl.paths.end()) it->second->unsynced.clear();
    return rc;
  }

  // --- file methods ---
  static int f_close(sqlite3_file* f) {
    File& file = file_of(f);
    // What was written stays in the page cache after a close: the path's record is kept.
    const int rc = file.real->pMethods->xClose(file.real);
    file.impl->open_files.fetch_sub(1, std::memory_order_relaxed);
    return rc;
  }

  static int f_read(sqlite3_file* f, void* out, int amount, sqlite3_int64 offset) {
    return real_file(f)->pMethods->xRead(real_file(f), out, amount, offset);
  }

  static int f_write(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
    File& file = file_of(f);
    Impl& impl = *file.impl;
    sqlite3_file* real = file.real;
    std::lock_guard lock(impl.mu);
    if (!impl.count_call_locked(file.state != nullptr, false)) return SQLITE_IOERR_WRITE;
    if (file.state != nullptr) {
      Op op;
      op.kind = Op::Kind::write;
      op.offset = offset;
      op.data.assign(static_cast<const char*>(data), static_cast<std::size_t>(amount));
      sqlite3_int64 size = 0;
      if (const int rc = real->pMethods->xFileSize(real, &size); rc != SQLITE_OK) return rc;
      op.size_before = size;
      const std::int64_t replaced = std::clamp<std::int64_t>(size - offset, 0, amount);
      op.before.resize(static_cast<std::size_t>(replaced));
      if (replaced > 0) {
        if (const int rc = real->pMethods->xRead(real, op.before.data(), static_cast<int>(replaced), offset);
            rc != SQLITE_OK) {
          return rc;
        }
      }
      // Recorded before it is made: a write that fails half-way is undone like any other.
      op.seq = ++impl.op_seq;
      file.state->unsynced.push_back(std::move(op));
    }
    return real->pMethods->xWrite(real, data, amount, offset);
  }

  static int f_truncate(sqlite3_file* f, sqlite3_int64 size) {
    File& file = file_of(f);
    Impl& impl = *file.impl;
    sqlite3_file* real = file.real;
    std::lock_guard lock(impl.mu);
    if (!impl.count_call_locked(file.state != nullptr, false)) return SQLITE_IOERR_TRUNCATE;
    if (file.state != nullptr) {
      Op op;
      op.kind = Op::Kind::truncate;
      op.offset = size;
      sqlite3_int64 before = 0;
      if (const int rc = real->pMethods->xFileSize(real, &before); rc != SQLITE_OK) return rc;
      op.size_before = before;
      if (before > size) {
        op.before.resize(static_cast<std::size_t>(before - size));
        if (const int rc = real->pMethods->xRead(real, op.before.data(), static_cast<int>(before - size), size);
            rc != SQLITE_OK) {
          return rc;
        }
      }
      op.seq = ++impl.op_seq;
      file.state->unsynced.push_back(std::move(op));
    }
    const int rc = real->pMethods->xTruncate(real, size);
    if (file.state != nullptr) {
      // The size it really cut to (the unix VFS rounds up to a chunk size, when one is set).
      sqlite3_int64 after = size;
      if (real->pMethods->xFileSize(real, &after) == SQLITE_OK) file.state->unsynced.back().offset = after;
    }
    return rc;
  }

  static int f_sync(sqlite3_file* f, int /*flags*/) {
    File& file = file_of(f);
    Impl& impl = *file.impl;
    std::uint64_t upto = 0;  // the operations recorded before the flush began
    {
      std::lock_guard lock(impl.mu);
      if (!impl.count_call_locked(file.state != nullptr, true)) return SQLITE_IOERR_FSYNC;
      upto = impl.op_seq;
    }
    // The flush takes its time (no real fsync: the simulation's disk is the record, not the real one);
    // what is written meanwhile is not covered by it.
    if (const auto us = impl.sync_latency_us.load(std::memory_order_relaxed); us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    std::lock_guard lock(impl.mu);
    if (impl.power_off.load(std::memory_order_relaxed)) return SQLITE_IOERR_FSYNC;  // cut before it completed
    // Everything written to the path before the flush began, through any handle, is on the disk now.
    if (file.state != nullptr) {
      std::erase_if(file.state->unsynced, [&](const Op& op) { return op.seq <= upto; });
    }
    return SQLITE_OK;
  }

  static int f_file_size(sqlite3_file* f, sqlite3_int64* out) {
    return real_file(f)->pMethods->xFileSize(real_file(f), out);
  }
  static int f_lock(sqlite3_file* f, int level) { return real_file(f)->pMethods->xLock(real_file(f), level); }
  static int f_unlock(sqlite3_file* f, int level) { return real_file(f)->pMethods->xUnlock(real_file(f), level); }
  static int f_check_reserved_lock(sqlite3_file* f, int* out) {
    return real_file(f)->pMethods->xCheckReservedLock(real_file(f), out);
  }
  static int f_file_control(sqlite3_file* f, int op, void* arg) {
    // A size hint would let the unix VFS grow the file itself (with a chunk size set), unrecorded.
    if (op == SQLITE_FCNTL_SIZE_HINT) return SQLITE_OK;
    return real_file(f)->pMethods->xFileControl(real_file(f), op, arg);
  }
  static int f_sector_size(sqlite3_file* f) { return real_file(f)->pMethods->xSectorSize(real_file(f)); }
  static int f_device_characteristics(sqlite3_file* f) {
    return real_file(f)->pMethods->xDeviceCharacteristics(real_file(f));
  }
  static int f_shm_map(sqlite3_file* f, int page, int page_size, int extend, void volatile** out) {
    return real_file(f)->pMethods->xShmMap(real_file(f), page, page_size, extend, out);
  }
  static int f_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
    return real_file(f)->pMethods->xShmLock(real_file(f), offset, n, flags);
  }
  static void f_shm_barrier(sqlite3_file* f) { real_file(f)->pMethods->xShmBarrier(real_file(f)); }
  static int f_shm_unmap(sqlite3_file* f, int delete_flag) {
    return real_file(f)->pMethods->xShmUnmap(real_file(f), delete_flag);
  }
  static int f_fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
    return real_file(f)->pMethods->xFetch(real_file(f), offset, amount, out);
  }
  static int f_unfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
    return real_file(f)->pMethods->xUnfetch(real_file(f), offset, page);
  }

  // The io_methods of a version (1..3): a wrapped file offers what the file it wraps offers, so
  // SQLite sees the same capabilities (shared memory from 2, memory mapping from 3).
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

  // Counts an xWrite/xTruncate/xSync (of a named file) and cuts the power if it is the armed one.
  // Returns false when the power is off: the call must fail. Requires mu.
  bool count_call_locked(bool counted, bool is_sync) {
    if (power_off.load(std::memory_order_relaxed)) return false;
    if (!counted) return true;
    ++calls;
    if (is_sync) ++syncs;
    const std::uint64_t count = armed_kind == CutAt::sync_call ? syncs : calls;
    if (armed_at != 0 && count == armed_at && (is_sync || armed_kind == CutAt::any_call)) {
      cut_locked(armed_seed, armed_dir, count - armed_from);
      return false;
    }
    return true;
  }

  // Builds the crash image of every file (see the header) and turns the power off. Requires mu.
  void cut_locked(std::uint64_t seed, const std::filesystem::path& dir, std::uint64_t at_call) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    PowerLossReport r;
    r.at_call = at_call;
    r.at_sync = at_call != 0 && armed_kind == CutAt::sync_call;
    r.seed = seed;
    // This cut's mix: a quarter of the cuts lose every unsynced operation, an eighth keep them all
    // (what a kill -9 leaves), the rest keep, tear and drop each one with random odds.
    switch (rng() % 8) {
      case 0:
      case 1:
        break;  // keep nothing, tear nothing
      case 2:
        r.keep_probability = 1;
        break;
      default:
        r.keep_probability = unit(rng);
        r.tear_probability = unit(rng) * (1 - r.keep_probability);
    }
    std::set<std::string> names;
    for (const auto& [path, state] : paths) {
      const std::filesystem::path live_path(path);
      std::error_code ec;
      if (!std::filesystem::exists(live_path, ec)) continue;  // deleted: nothing to recover from
      const std::string name = live_path.filename().string();
      if (name.size() >= 4 && name.compare(name.size() - 4, 4, "-shm") == 0) continue;  // SQLite rebuilds it
      if (!names.insert(name).second) {
        std::fprintf(stderr, "power-loss vfs: two files named %s: the image needs one folder\n", name.c_str());
        std::abort();
      }
      PowerLossFile report;
      report.name = name;
      const std::string live = read_whole_file(live_path);
      report.live_size = static_cast<std::int64_t>(live.size());
      report.unsynced = static_cast<std::int64_t>(state->unsynced.size());

      // The synced content: the live one with every unsynced operation undone, newest first (each
      // undo gives back exactly the file as it was before that operation).
      std::string content = live;
      for (auto op = state->unsynced.rbegin(); op != state->unsynced.rend(); ++op) {
        content.resize(static_cast<std::size_t>(op->size_before), '\0');
        // A write's replaced bytes start at its offset; a truncation's at the size it cut to.
        if (!op->before.empty()) put(content, op->offset, op->before);
      }
      report.synced_size = static_cast<std::int64_t>(content.size());

      // Then each unsynced operation, oldest first: kept, dropped, or torn sector by sector.
      for (const Op& op : state->unsynced) {
        const double x = unit(rng);
        if (op.kind == Op::Kind::truncate) {
          if (x < r.keep_probability + r.tear_probability) {  // a truncation is not torn: kept or not
            content.resize(static_cast<std::size_t>(op.offset), '\0');
            ++report.kept;
          } else {
            ++report.dropped;
          }
          continue;
        }
        report.unsynced_bytes += static_cast<std::int64_t>(op.data.size());
        if (x < r.keep_probability) {
          put(content, op.offset, op.data);
          ++report.kept;
        } else if (x < r.keep_probability + r.tear_probability) {
          const std::int64_t end = op.offset + static_cast<std::int64_t>(op.data.size());
          for (std::int64_t from = op.offset; from < end;) {
            const std::int64_t to = std::min(end, (from / kSector + 1) * kSector);
            if (rng() & 1) {
              put(content, from, std::string_view(op.data).substr(static_cast<std::size_t>(from - op.offset),
                                                                   static_cast<std::size_t>(to - from)));
            }
            from = to;
          }
          ++report.torn;
        } else {
          ++report.dropped;
        }
      }
      report.image_size = static_cast<std::int64_t>(content.size());
      report.differs = content != live;
      write_whole_file(dir / name, content);
      r.files.push_back(std::move(report));
    }
    report_ = std::move(r);
    power_off.store(true, std::memory_order_release);
  }

  sqlite3_vfs* const real;  // the "unix" VFS
  sqlite3_vfs vfs{};
  std::atomic<bool> power_off{false};
  std::atomic<int> open_files{0};
  std::atomic<std::int64_t> sync_latency_us{0};

  std::mutex mu;
  std::map<std::string, std::unique_ptr<PathState>> paths;  // by path; protected by mu
  std::uint64_t calls = 0, syncs = 0;  // xWrite/xTruncate/xSync calls, xSync calls; by mu
  std::uint64_t op_seq = 0;                                  // the last Op::seq given; by mu
  CutAt armed_kind = CutAt::any_call;                        // which calls count; by mu
  std::uint64_t armed_at = 0;                                // the call that cuts; 0: none; by mu
  std::uint64_t armed_from = 0;                              // the count when armed; by mu
  std::uint64_t armed_seed = 0;                              // protected by mu
  std::filesystem::path armed_dir;                           // protected by mu
  std::optional<PowerLossReport> report_;                    // protected by mu
};

// --- the public face --------------------------------------------------------------------------------

PowerLossVfs::PowerLossVfs(std::string name) : name_(std::move(name)) {
  impl_ = std::make_unique<Impl>(name_);
  const int rc = sqlite3_vfs_register(&impl_->vfs, 0);
  if (rc != SQLITE_OK) throw std::runtime_error("sqlite3_vfs_register " + name_ + ": " + sqlite3_errstr(rc));
}

PowerLossVfs::~PowerLossVfs() {
  // A connection still open through this VFS would call into freed memory.
  TG_ASSERT(impl_->open_files.load() == 0);
  sqlite3_vfs_unregister(&impl_->vfs);
}

void PowerLossVfs::arm(std::uint64_t call, std::uint64_t seed, std::filesystem::path image_dir, CutAt at) {
  TG_ASSERT(call >= 1);
  std::lock_guard lock(impl_->mu);
  impl_->armed_kind = at;
  impl_->armed_from = at == CutAt::sync_call ? impl_->syncs : impl_->calls;
  impl_->armed_at = impl_->armed_from + call;
  impl_->armed_seed = seed;
  impl_->armed_dir = std::move(image_dir);
}

bool PowerLossVfs::cut(std::uint64_t seed, const std::filesystem::path& image_dir) {
  std::lock_guard lock(impl_->mu);
  if (impl_->power_off.load(std::memory_order_relaxed)) return false;
  impl_->cut_locked(seed, image_dir, 0);
  return true;
}

void PowerLossVfs::set_sync_latency(std::chrono::microseconds latency) {
  impl_->sync_latency_us.store(latency.count(), std::memory_order_relaxed);
}

bool PowerLossVfs::power_is_off() const { return impl_->power_off.load(std::memory_order_acquire); }

std::optional<PowerLossReport> PowerLossVfs::report() const {
  std::lock_guard lock(impl_->mu);
  return impl_->report_;
}

std::uint64_t PowerLossVfs::calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->calls;
}

std::uint64_t PowerLossVfs::syncs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->syncs;
}

bool PowerLossReport::any_differs() const {
  return std::any_of(files.begin(), files.end(), [](const PowerLossFile& f) { return f.differs; });
}

std::string PowerLossReport::summary() const {
  std::ostringstream out;
  const std::string when =
      at_call == 0 ? std::string("by hand") : (at_sync ? "at sync " : "at call ") + std::to_string(at_call);
  out << "cut " << when << " (keep " << keep_probability << ", tear " << tear_probability << "):";
  for (const PowerLossFile& f : files) {
    out << " " << f.name << " " << f.unsynced << " unsynced (" << f.unsynced_bytes << " B: " << f.kept << " kept, "
        << f.torn << " torn, " << f.dropped << " dropped), size " << f.live_size << " live / " << f.synced_size
        << " synced / " << f.image_size << " image" << (f.differs ? ", differs" : "") << ";";
  }
  return out.str();
}

}  // namespace tollgate::testing
