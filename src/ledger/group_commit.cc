#include "ledger/group_commit.h"

#include <semaphore>

namespace tollgate {

GroupCommitter::GroupCommitter(Store& store, GroupCommitOptions options) : store_(store), options_(options) {
  TG_ASSERT(options_.batch_max >= 1);
  TG_ASSERT(options_.queue_max >= options_.batch_max);
  writer_ = std::thread([this] { writer_loop(); });
}

GroupCommitter::~GroupCommitter() { stop(); }

void GroupCommitter::submit(Command command, Callback done) {
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    done(Error::make(Code::unavailable, "the ledger is shutting down"));
    return;
  }
  if (queue_.size() >= options_.queue_max) {
    lock.unlock();
    overloaded_.fetch_add(1, std::memory_order_relaxed);
    done(Error::make(Code::overloaded, "too many operations are waiting to be written; retry with the same id"));
    return;
  }
  const bool was_empty = queue_.empty();
  queue_.push_back(Pending{std::move(command), std::move(done)});
  lock.unlock();
  if (was_empty) wake_writer_.notify_one();
}

CommandResult GroupCommitter::submit_and_wait(Command command) {
  std::binary_semaphore ready(0);
  std::optional<CommandResult> out;
  submit(std::move(command), [&](CommandResult r) {
    out.emplace(std::move(r));
    ready.release();
  });
  ready.acquire();
  return std::move(*out);
}

void GroupCommitter::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_writer_.notify_one();
  std::call_once(joined_, [this] { writer_.join(); });
}

void GroupCommitter::writer_loop() {
  std::vector<Pending> batch;
  std::vector<Command> commands;
  std::vector<CommandResult> results;
  batch.reserve(options_.batch_max);
  commands.reserve(options_.batch_max);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_writer_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is written
      const std::size_t n = std::min(queue_.size(), options_.batch_max);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (Pending& p : batch) commands.push_back(std::move(p.command));
    const Status committed = store_.apply(commands, results);
    batches_.fetch_add(1, std::memory_order_relaxed);
    commands_.fetch_add(batch.size(), std::memory_order_relaxed);
    if (committed) {
      TG_ASSERT(results.size() == batch.size());
      for (std::size_t i = 0; i < batch.size(); ++i) batch[i].done(std::move(results[i]));
    } else {
      failed_batches_.fetch_add(1, std::memory_order_relaxed);
      for (Pending& p : batch) p.done(committed.error());
    }
    batch.clear();
    commands.clear();
    results.clear();
  }
}

GroupCommitStats GroupCommitter::stats() const {
  return GroupCommitStats{batches_.load(), commands_.load(), overloaded_.load(), failed_batches_.load()};
}

std::size_t GroupCommitter::queue_depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace tollgate
