// SPDX-License-Identifier: MIT
// The monitor's slow alerts (--program, --mail) on a worker thread of
// their own, so that a program that hangs or a mail server that stalls
// never delays the printing of later events nor the reading of any stream.
// Alerts run one at a time, in the order pushed; each is bounded by the
// timeout, and every failure is reported on stderr as
// "uraid: monitor: ..." and otherwise ignored.

#ifndef URAID_TOOLS_ALERT_QUEUE_H_
#define URAID_TOOLS_ALERT_QUEUE_H_

#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "monitor_event.h"

namespace uraid::tool {

struct AlertOptions {
  // --program: run as PROGRAM EVENT ARRAY [MEMBER]; empty: none.
  std::string program;
  // --mail: the address mail-worthy events go to; empty: none.
  std::string mail_to;
  // Bound on each program run and each sendmail, seconds.
  double timeout_s = 30;
  // For the mail's From, Subject and body.
  std::string hostname;
};

struct Alert {
  EventJson event;
  std::string control;     // the socket the event came from
  std::string last_state;  // the array's state as last known ("" unknown)
};

class AlertQueue {
 public:
  // Starts the worker. Nothing runs for an options with neither program
  // nor mail (Push is then a no-op).
  explicit AlertQueue(AlertOptions options);
  // Drain(), then stops the worker.
  ~AlertQueue();
  AlertQueue(const AlertQueue&) = delete;
  AlertQueue& operator=(const AlertQueue&) = delete;

  // Queues the event's alerts; never blocks. Past kMaxQueued waiting
  // alerts the oldest is dropped (reported), so a program that always hangs
  // cannot make the monitor grow without bound. Thread-safe.
  void Push(Alert alert);

  // Waits until every alert pushed so far has run.
  void Drain();

  static constexpr size_t kMaxQueued = 1000;

 private:
  void Work();
  void Run(const Alert& alert);
  void RunProgram(const Alert& alert);
  void RunMail(const Alert& alert);

  const AlertOptions options_;
  absl::Mutex mu_;
  std::deque<Alert> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the worker runs an alert
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace uraid::tool

#endif  // URAID_TOOLS_ALERT_QUEUE_H_
