#include "ledger/group_commit.h"

namespace tollgate {

GroupCommitter::GroupCommitter(Store& store, GroupCommitOptions options) : store_(store), options_(options) {
  TG_ASSERT(options_.batch_max >= 1);
  TG_ASSERT(options_.queue_max >= options_.batch_max);
  completer_ = std::thread([this] { completion_loop(); });
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
  return wait_for_result([&](Callback done) { submit(std::move(command), std::move(done)); });
}

void GroupCommitter::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_writer_.notify_one();
  std::call_once(joined_, [this] {
    writer_.join();     // applies everything queued, then tells the completer it is done
    completer_.join();  // answers everything applied
  });
}

void GroupCommitter::writer_loop() {
  std::vector<Command> commands;
  commands.reserve(options_.batch_max);
  for (;;) {
    Finished finished;
    finished.callbacks.reserve(options_.batch_max);
    {
      std::unique_lock lock(mu_);
      wake_writer_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and everything queued is written
      const std::size_t n = std::min(queue_.size(), options_.batch_max);
      for (std::size_t i = 0; i < n; ++i) {
        commands.push_back(std::move(queue_.front().command));
        finished.callbacks.push_back(std::move(queue_.front().done));
        queue_.pop_front();
      }
    }
    const Status committed = store_.apply(commands, finished.results);
    batches_.fetch_add(1, std::memory_order_relaxed);
    commands_.fetch_add(commands.size(), std::memory_order_relaxed);
    if (committed) {
      TG_ASSERT(finished.results.size() == commands.size());
    } else {
      failed_batches_.fetch_add(1, std::memory_order_relaxed);
      finished.results.clear();
      finished.batch_error = committed.error();
    }
    commands.clear();
    {
      std::unique_lock lock(finished_mu_);
      finished_cv_.wait(lock, [&] { return finished_.size() < kFinishedMax; });
      finished_.push_back(std::move(finished));
    }
    finished_cv_.notify_all();
  }
  {
    std::lock_guard lock(finished_mu_);
    writer_done_ = true;
  }
  finished_cv_.notify_all();
}

void GroupCommitter::completion_loop() {
  for (;;) {
    Finished batch;
    {
      std::unique_lock lock(finished_mu_);
      finished_cv_.wait(lock, [&] { return writer_done_ || !finished_.empty(); });
      if (finished_.empty()) return;  // the writer is done and everything is answered
      batch = std::move(finished_.front());
      finished_.pop_front();
    }
    finished_cv_.notify_all();  // room for the writer
    for (std::size_t i = 0; i < batch.callbacks.size(); ++i) {
      if (batch.batch_error) {
        batch.callbacks[i](*batch.batch_error);
      } else {
        batch.callbacks[i](std::move(batch.results[i]));
      }
    }
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
