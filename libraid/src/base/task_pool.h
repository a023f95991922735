// SPDX-License-Identifier: MIT
// Internal: a small pool that runs a batch of independent tasks at once, so
// that all member I/Os of one stripe operation are in flight together and a
// stripe costs one member latency rather than N.
//
// The calling thread runs tasks too (it takes the first of its batch and
// then helps drain the queue while it waits), so a batch never waits on an
// idle pool, and many concurrent callers keep the pool busy without
// deadlock. Worker threads start lazily on the first batch of two or more
// tasks, and not while threads are held (SetThreadsAllowed): nbdkit forks
// after configuration, threads do not survive a fork, and with -f it
// reopens stdin and stdout on /dev/null right after configuration, which
// fails when another thread has just opened a file in their place. So an
// array's assembly, which may write superblocks, runs its batches in turn
// on the calling thread (Array::Assemble holds its I/O pool's threads).
//
// Thread-safe.

#ifndef URAID_SRC_TASK_POOL_H_
#define URAID_SRC_TASK_POOL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "base/sync.h"

namespace uraid {

class TaskPool {
 public:
  explicit TaskPool(int threads) : max_threads_(threads) {}
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Runs every task and returns once all have finished. Tasks must not
  // throw and must not call RunAll on the same pool.
  void RunAll(std::span<const std::function<void()>> tasks);
  // Runs fn(0) .. fn(n - 1) as one batch (fn(0) on the calling thread):
  // a job's window of stripes. Same rules as RunAll.
  void RunEach(uint64_t n, const std::function<void(uint64_t)>& fn);
  // While false, RunAll and RunEach run every task in turn on the calling
  // thread and no worker thread starts (workers started before stay, idle:
  // hold threads before the first batch). Default true. Safe beside
  // RunAll on other threads.
  void SetThreadsAllowed(bool allowed) {
    threads_allowed_.store(allowed, std::memory_order_release);
  }

 private:
  struct Batch {
    int remaining = 0;  // guarded by TaskPool::mu_
  };
  struct Item {
    const std::function<void()>* fn;
    Batch* batch;
  };
  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();
  void RunItem(const Item& item);

  const int max_threads_;
  std::atomic<bool> threads_allowed_{true};
  Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace uraid

#endif  // URAID_SRC_TASK_POOL_H_
