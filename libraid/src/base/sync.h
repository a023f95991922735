// SPDX-License-Identifier: MIT
// uraid's mutex types: uraid::Mutex, MutexLock, ReleasableMutexLock and
// Condition, with absl::Mutex's API (Lock/Unlock, LockWhen, Await,
// AwaitWithTimeout, AwaitWithDeadline) and clang thread-safety annotations
// (ABSL_GUARDED_BY(mu_) etc. keep working with -Wthread-safety).
//
// Normal builds: plain aliases of the absl types. Zero cost; nothing about
// the locking changes.
//
// ThreadSanitizer builds (URAID_TSAN defined, which the URAID_TSAN CMake
// option does; or the compiler's own -fsanitize=thread): implemented over
// std::mutex and std::condition_variable. Debian's libabsl is not built
// with TSan, so absl::Mutex's internal synchronisation is invisible to it and
// it would report every access to a mutex-guarded field as a race; TSan
// intercepts the pthread calls under the std types. Await keeps absl's
// semantics: the condition is evaluated with the mutex held, before blocking
// and on every wakeup; every Unlock (and every Await that blocks, since
// that releases the mutex too) wakes all waiters, which re-check their
// conditions. Slower than absl's, which does not matter under TSan.
//
// Private to the library (and its white-box tests): no public header holds
// one of these mutexes (FaultyMember and WriteIntentBitmap keep theirs
// behind a pimpl), so embedders compile the uraid headers the same way
// whichever mode the library was built in. The two variants differ in
// layout, so every translation unit that includes this file must agree on
// the mode: the CMake option sets the definition for the whole build.

#ifndef URAID_SRC_BASE_SYNC_H_
#define URAID_SRC_BASE_SYNC_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"  // also in TSan builds: users rely on it
#include "absl/time/time.h"

#if !defined(URAID_TSAN)
#if defined(__SANITIZE_THREAD__)
#define URAID_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define URAID_TSAN 1
#endif
#endif
#endif

#if defined(URAID_TSAN)
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <type_traits>
#endif

namespace uraid {

#if !defined(URAID_TSAN)

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using ReleasableMutexLock = absl::ReleasableMutexLock;
using Condition = absl::Condition;

#else  // URAID_TSAN

// absl::Condition's constructors, as a predicate evaluated by the waiter.
class Condition {
 public:
  Condition(bool (*func)(void*), void* arg)
      : eval_(&CallFunction<void>),
        function_(reinterpret_cast<void (*)()>(func)),
        arg_(arg) {}

  template <typename T>
  Condition(bool (*func)(T*), T* arg)
      : eval_(&CallFunction<T>),
        function_(reinterpret_cast<void (*)()>(func)),
        arg_(const_cast<void*>(static_cast<const void*>(arg))) {}

  template <typename T>
  Condition(T* object, bool (std::type_identity_t<T>::*method)())
      : eval_(&CallMethod<T>), arg_(object) {
    static_assert(sizeof(method) <= sizeof(method_));
    std::memcpy(method_, &method, sizeof(method));
  }

  template <typename T>
  Condition(const T* object, bool (std::type_identity_t<T>::*method)() const)
      : eval_(&CallConstMethod<T>),
        arg_(const_cast<void*>(static_cast<const void*>(object))) {
    static_assert(sizeof(method) <= sizeof(method_));
    std::memcpy(method_, &method, sizeof(method));
  }

  explicit Condition(const bool* cond)
      : eval_(&ReadBool), arg_(const_cast<bool*>(cond)) {}

  // A functor with `bool operator()() const`, such as a lambda.
  template <typename T, typename E = decltype(static_cast<bool (T::*)() const>(
                            &T::operator()))>
  explicit Condition(const T* obj)
      : Condition(obj, static_cast<bool (T::*)() const>(&T::operator())) {}

  bool Eval() const { return eval_(this); }

 private:
  template <typename T>
  static bool CallFunction(const Condition* c) {
    return reinterpret_cast<bool (*)(T*)>(c->function_)(
        static_cast<T*>(c->arg_));
  }
  template <typename T>
  static bool CallMethod(const Condition* c) {
    using M = bool (T::*)();
    M m;
    std::memcpy(&m, c->method_, sizeof(m));
    return (static_cast<T*>(c->arg_)->*m)();
  }
  template <typename T>
  static bool CallConstMethod(const Condition* c) {
    using M = bool (T::*)() const;
    M m;
    std::memcpy(&m, c->method_, sizeof(m));
    return (static_cast<const T*>(c->arg_)->*m)();
  }
  static bool ReadBool(const Condition* c) {
    return *static_cast<const bool*>(c->arg_);
  }

  bool (*eval_)(const Condition*);
  void (*function_)() = nullptr;
  alignas(void*) unsigned char method_[2 * sizeof(void*)] = {};
  void* arg_;
};

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    const bool wake = waiters_ > 0;
    mu_.unlock();
    if (wake) cv_.notify_all();
  }

  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }

  // std::mutex cannot tell; for the analysis only.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Like absl's: no annotation (the caller holds the mutex; the analysis
  // sees it held throughout).
  void Await(const Condition& cond) { WaitUntil(cond, absl::InfiniteFuture()); }
  bool AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
    return WaitUntil(cond, DeadlineAfter(timeout));
  }
  bool AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
    return WaitUntil(cond, deadline);
  }

  void LockWhen(const Condition& cond) ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    Lock();
    Await(cond);
  }
  bool LockWhenWithTimeout(const Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    Lock();
    return AwaitWithTimeout(cond, timeout);
  }
  bool LockWhenWithDeadline(const Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    Lock();
    return AwaitWithDeadline(cond, deadline);
  }

 private:
  static absl::Time DeadlineAfter(absl::Duration timeout) {
    return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                               : absl::Now() + timeout;
  }

  // With mu_ held. Returns cond's value at return (false: timed out).
  bool WaitUntil(const Condition& cond, absl::Time deadline) {
    if (cond.Eval()) return true;
    // Blocking releases the mutex: as in Unlock, waiters whose condition the
    // caller's changes made true must get to see it.
    if (waiters_ > 0) cv_.notify_all();
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    bool ok;
    if (deadline == absl::InfiniteFuture()) {
      cv_.wait(lock, [&] { return cond.Eval(); });
      ok = true;
    } else {
      // system_clock: pthread_cond_timedwait, which every TSan intercepts
      // (and absl::Time is wall-clock time too).
      const std::chrono::system_clock::time_point until =
          absl::ToChronoTime(deadline);
      ok = cv_.wait_until(lock, until, [&] { return cond.Eval(); });
    }
    --waiters_;
    lock.release();  // still held, by the caller
    return ok;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int waiters_ = 0;  // threads blocked in WaitUntil; guarded by mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  MutexLock(Mutex* mu, const Condition& cond) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->LockWhen(cond);
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReleasableMutexLock {
 public:
  explicit ReleasableMutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ReleasableMutexLock(Mutex* mu, const Condition& cond)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->LockWhen(cond);
  }
  ReleasableMutexLock(const ReleasableMutexLock&) = delete;
  ReleasableMutexLock& operator=(const ReleasableMutexLock&) = delete;
  ~ReleasableMutexLock() ABSL_UNLOCK_FUNCTION() {
    if (mu_ != nullptr) mu_->Unlock();
  }
  void Release() ABSL_UNLOCK_FUNCTION() {
    mu_->Unlock();
    mu_ = nullptr;
  }

 private:
  Mutex* mu_;
};

#endif  // URAID_TSAN

}  // namespace uraid

#endif  // URAID_SRC_BASE_SYNC_H_
