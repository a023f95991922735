// SPDX-License-Identifier: MIT
// Internal: waiting out the operations that started before a switch,
// without a lock on their path (a grace period, as RCU's).
//
// An operation calls Enter() and keeps the Pass for as long as it uses the
// state being switched, which it reads after Enter(). The switcher
// publishes the new state (a seq_cst store, or a store under a mutex the
// readers take too), then calls Drain(): it returns once every Pass taken
// before the switch's epoch flip is gone. A Pass whose count Drain did not
// see reads the new state: had its read come first, the read (and the
// increment before it) would happen before the publication and so before
// Drain's load of the count, which would then see it. Operations never
// wait, so a stream of them cannot starve a switch (a shared_mutex
// preferring readers could).
//
// Thread-safe. Drain polls (switches are rare, operations short); several
// Drains at once are allowed but the caller serialises switches.

#ifndef URAID_SRC_BASE_WRITE_EPOCHS_H_
#define URAID_SRC_BASE_WRITE_EPOCHS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace uraid {

class WriteEpochs {
 public:
  class Pass {
   public:
    Pass(Pass&& o) noexcept : count_(o.count_) { o.count_ = nullptr; }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    Pass& operator=(Pass&&) = delete;
    ~Pass() {
      if (count_ != nullptr) count_->fetch_sub(1);
    }

   private:
    friend class WriteEpochs;
    explicit Pass(std::atomic<int64_t>* count) : count_(count) {}
    std::atomic<int64_t>* count_;
  };

  Pass Enter() {
    std::atomic<int64_t>* c = &count_[epoch_.load() & 1];
    c->fetch_add(1);
    return Pass(c);
  }

  // Returns once every Pass taken before this call's epoch flip has been
  // destroyed.
  void Drain() {
    const uint64_t old = epoch_.fetch_add(1);
    while (count_[old & 1].load() != 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

 private:
  std::atomic<uint64_t> epoch_{0};
  std::array<std::atomic<int64_t>, 2> count_{};
};

}  // namespace uraid

#endif  // URAID_SRC_BASE_WRITE_EPOCHS_H_
