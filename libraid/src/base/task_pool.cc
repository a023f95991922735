// SPDX-License-Identifier: MIT
#include "base/task_pool.h"

namespace uraid {

TaskPool::~TaskPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void TaskPool::StartLocked() {
  started_ = true;
  for (int i = 0; i < max_threads_; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

void TaskPool::RunItem(const Item& item) {
  (*item.fn)();
  MutexLock lock(&mu_);
  --item.batch->remaining;
}

void TaskPool::WorkerLoop() {
  for (;;) {
    Item item;
    {
      MutexLock lock(&mu_);
      mu_.Await(Condition(
          +[](TaskPool* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return p->stop_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stop_ and nothing left
      item = queue_.front();
      queue_.pop_front();
    }
    RunItem(item);
  }
}

void TaskPool::RunEach(uint64_t n, const std::function<void(uint64_t)>& fn) {
  if (n == 1) return fn(0);
  std::vector<std::function<void()>> tasks;
  tasks.reserve(n);
  for (uint64_t i = 0; i < n; ++i) tasks.emplace_back([&fn, i] { fn(i); });
  RunAll(tasks);
}

void TaskPool::RunAll(std::span<const std::function<void()>> tasks) {
  if (tasks.empty()) return;
  if (tasks.size() == 1 || max_threads_ == 0 ||
      !threads_allowed_.load(std::memory_order_acquire)) {
    for (const auto& t : tasks) t();
    return;
  }
  Batch batch;
  std::pair<TaskPool*, Batch*> wait_arg(this, &batch);
  {
    MutexLock lock(&mu_);
    if (!started_) StartLocked();
    batch.remaining = static_cast<int>(tasks.size()) - 1;
    for (size_t i = 1; i < tasks.size(); ++i) {
      queue_.push_back(Item{&tasks[i], &batch});
    }
  }
  tasks[0]();
  // Help: run queued items (ours or other callers') until our batch is done.
  for (;;) {
    Item item;
    {
      MutexLock lock(&mu_);
      if (batch.remaining == 0) return;
      if (queue_.empty()) {
        mu_.Await(Condition(
            +[](std::pair<TaskPool*, Batch*>* a)
                 ABSL_NO_THREAD_SAFETY_ANALYSIS {
                   return a->second->remaining == 0 ||
                          !a->first->queue_.empty();
                 },
            &wait_arg));
        continue;
      }
      item = queue_.front();
      queue_.pop_front();
    }
    RunItem(item);
  }
}

}  // namespace uraid
