#include "ledger/key_use.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/limits.h"
#include "core/log.h"
#include "ledger/ledger.h"

namespace tollgate {

KeyUseRecorder::KeyUseRecorder(Ledger& ledger, const Clock& clock, std::int64_t flush_interval_ms)
    : ledger_(ledger), clock_(clock), flush_interval_ms_(flush_interval_ms) {
  TG_ASSERT(flush_interval_ms >= 0);
  if (flush_interval_ms_ > 0) flusher_ = std::thread([this] { loop(); });
}

KeyUseRecorder::~KeyUseRecorder() { stop(); }

void KeyUseRecorder::record(std::string_view key_id) {
  const std::int64_t now = clock_.now_ms();
  MutexLock lock(mu_);
  auto it = last_use_ms_.find(std::string(key_id));
  if (it != last_use_ms_.end()) {
    it->second = std::max(it->second, now);
  } else if (last_use_ms_.size() < limits::kKeyUsesRememberedMax) {
    last_use_ms_.emplace(key_id, now);
  } else {
    ++dropped_;
  }
}

Status KeyUseRecorder::flush() {
  MutexLock flushing(flush_mu_);
  std::unordered_map<std::string, std::int64_t> uses;
  {
    MutexLock lock(mu_);
    uses.swap(last_use_ms_);
  }
  if (uses.empty()) return ok_status();
  std::vector<RecordKeyUseCommand::Use> all;
  all.reserve(uses.size());
  for (auto& [key_id, at] : uses) all.push_back({key_id, at});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.key_id < b.key_id; });
  Status outcome = ok_status();
  for (std::size_t at = 0; at < all.size(); at += limits::kKeyUsesPerCommandMax) {
    const std::size_t end = std::min(all.size(), at + limits::kKeyUsesPerCommandMax);
    RecordKeyUseCommand command;
    command.uses.assign(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(end));
    if (auto r = ledger_.run(std::move(command)); !r) {
      // Keep these uses for the next flush (newer uses of the same keys win).
      MutexLock lock(mu_);
      for (std::size_t i = at; i < end; ++i) {
        auto [it, inserted] = last_use_ms_.emplace(all[i].key_id, all[i].used_at_ms);
        if (!inserted) it->second = std::max(it->second, all[i].used_at_ms);
      }
      outcome = r.error();
    }
  }
  return outcome;
}

void KeyUseRecorder::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  if (auto s = flush(); !s) log("warn", "recording the last use of API keys: " + s.error().detail);
}

std::size_t KeyUseRecorder::pending() const {
  MutexLock lock(mu_);
  return last_use_ms_.size();
}

std::uint64_t KeyUseRecorder::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

void KeyUseRecorder::loop() {
  MutexLock lock(mu_);
  while (!wake_.wait_for(mu_, std::chrono::milliseconds(flush_interval_ms_), [&]() REQUIRES(mu_) { return stopping_; })) {
    lock.unlock();
    if (auto s = flush(); !s) log("warn", "recording the last use of API keys: " + s.error().detail);
    lock.lock();
  }
}

}  // namespace tollgate
