// tollgate ledger: when each API key was last used — without a database write per request.
//
// record() notes a use in memory: the key's latest use time (the ledger's clock), in a map under a
// mutex — no I/O on the request's path. Every flush interval (default 60 s) a background thread
// takes the whole map and writes it as RecordKeyUseCommand(s) through the ledger's write path
// (group commit, one command per kKeyUsesPerCommandMax keys). So each instance writes at most ONE
// update per key per interval, however many requests the key made; stop() writes what is left.
//
// Precision (docs/internals/architecture.md): a stored last_used_at is the time of the latest use a flush carried, to
// the millisecond of the instance's clock; it lags the real last use by at most one flush interval
// plus one write (a use between two flushes shows up at the second). On several instances each
// writes its own uses; a key's last_used_at only moves forward, so the newest use wins. A flush
// that fails (database unreachable) keeps its uses for the next one. At most kKeyUsesRememberedMax
// keys are remembered between flushes; a use of yet another key is dropped (counted by dropped()):
// the only effect is a stale last_used_at.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "core/clock.h"
#include "core/result.h"
#include "core/thread_annotations.h"

namespace tollgate {

class Ledger;

class KeyUseRecorder {
 public:
  // `ledger` and `clock` must outlive this. flush_interval_ms 0: no background thread (tests and
  // stop() call flush()).
  KeyUseRecorder(Ledger& ledger, const Clock& clock, std::int64_t flush_interval_ms);
  ~KeyUseRecorder();  // stop()
  KeyUseRecorder(const KeyUseRecorder&) = delete;
  KeyUseRecorder& operator=(const KeyUseRecorder&) = delete;

  // Notes that `key_id` authenticated a request now.
  void record(std::string_view key_id);
  // Writes every use remembered now (nothing when there is none). On an error the uses are kept.
  Status flush();
  // Stops the background thread and flushes once more. Later uses are still remembered (not written).
  void stop();

  std::size_t pending() const;
  std::uint64_t dropped() const;

 private:
  void loop();

  Ledger& ledger_;
  const Clock& clock_;
  const std::int64_t flush_interval_ms_;

  mutable Mutex mu_;
  std::unordered_map<std::string, std::int64_t> last_use_ms_ GUARDED_BY(mu_);
  std::uint64_t dropped_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar wake_;
  Mutex flush_mu_;  // one flush at a time, so that uses are written in order
  std::thread flusher_;  // last: started when everything above exists
};

}  // namespace tollgate
