#include "http/read_executor.h"

#include "core/last_resort.h"
#include "core/result.h"

namespace tollgate::http {

ReadExecutor::ReadExecutor(int threads, std::size_t queue_max) : queue_max_(queue_max) {
  TG_ASSERT(threads >= 1);
  TG_ASSERT(queue_max >= 1);
  threads_.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

ReadExecutor::~ReadExecutor() { stop(); }

bool ReadExecutor::try_post(Task task) {
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() >= queue_max_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

void ReadExecutor::continue_with(Task task) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void ReadExecutor::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  std::call_once(joined_, [this] {
    for (auto& t : threads_) t.join();
  });
}

std::size_t ReadExecutor::queue_depth() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void ReadExecutor::run() {
  for (;;) {
    Task task;
    {
      MutexLock lock(mu_);
      wake_.wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every task (and continuation) ran
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    // An exception is a bug: noted, and the task's request answers 500 through its reply guard
    // once the task (holding it) is gone; this thread goes on with the next task.
    run_last_resort("a reader task", task);
  }
}

}  // namespace tollgate::http
