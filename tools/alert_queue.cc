// SPDX-License-Identifier: MIT
#include "alert_queue.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "alert_mail.h"
#include "array_health.h"
#include "child_process.h"
#include "control_client.h"
#include "uraid/info_json.h"

namespace uraid::tool {
namespace {

std::string Describe(const Alert& alert) {
  std::string what = absl::StrCat(EventName(alert.event), " on ",
                                  EventField(alert.event, "array"));
  const std::string member = EventField(alert.event, "member");
  if (!member.empty()) absl::StrAppend(&what, " (", member, ")");
  return what;
}

// The array's state for the mail, asked of the server now (a failed member
// is worth an up-to-date listing), else what the monitor last knew.
std::string ArrayStateForMail(const Alert& alert, double timeout_s) {
  const int timeout_ms = static_cast<int>(std::min(timeout_s, 5.0) * 1000);
  std::string why;
  if (!alert.control.empty()) {
    absl::StatusOr<std::unique_ptr<ControlClient>> client =
        ControlClient::Connect(alert.control, timeout_ms);
    absl::StatusOr<ArrayInfo> info =
        client.ok() ? (*client)->Detail()
                    : absl::StatusOr<ArrayInfo>(client.status());
    if (info.ok()) {
      std::string out =
          absl::StrFormat("      State : %s\n", ArrayStateText(*info));
      for (const SlotInfo& s : info->slots) {
        absl::StrAppendFormat(&out, "    slot %2d : %-10s %s\n", s.slot,
                              SlotStateName(s.state),
                              s.name.empty() ? "-" : s.name);
      }
      for (const SlotInfo& s : info->spares) {
        absl::StrAppendFormat(&out, "      spare : %-10s %s\n",
                              SlotStateName(s.state), s.name);
      }
      return out;
    }
    why = std::string(info.status().message());
  }
  std::string out =
      absl::StrFormat("      State : %s\n",
                      alert.last_state.empty() ? "unknown" : alert.last_state);
  if (!why.empty()) absl::StrAppend(&out, "  (as last seen: ", why, ")\n");
  return out;
}

}  // namespace

AlertQueue::AlertQueue(AlertOptions options) : options_(std::move(options)) {
  if (options_.program.empty() && options_.mail_to.empty()) return;
  worker_ = std::thread([this] { Work(); });
}

AlertQueue::~AlertQueue() {
  Drain();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (worker_.joinable()) worker_.join();
}

void AlertQueue::Push(Alert alert) {
  if (!worker_.joinable()) return;
  std::string dropped;
  {
    absl::MutexLock lock(&mu_);
    if (queue_.size() >= kMaxQueued) {
      dropped = Describe(queue_.front());
      queue_.pop_front();
    }
    queue_.push_back(std::move(alert));
  }
  if (!dropped.empty()) {
    Warn(absl::StrCat("alerts are falling behind: dropped the one for ",
                      dropped));
  }
}

void AlertQueue::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](AlertQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
        return q->queue_.empty() && !q->busy_;
      },
      this));
}

void AlertQueue::Work() {
  while (true) {
    Alert alert;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AlertQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stop_ || !q->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stop_, and nothing left
      alert = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Run(alert);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void AlertQueue::Run(const Alert& alert) {
  if (!options_.program.empty()) RunProgram(alert);
  if (!options_.mail_to.empty() && IsMailWorthy(alert.event)) RunMail(alert);
}

void AlertQueue::RunProgram(const Alert& alert) {
  const EventJson& e = alert.event;
  ChildSpec spec;
  // mdadm's PROGRAM calling convention: EVENT DEVICE [COMPONENT].
  spec.argv = {options_.program, EventName(e), EventField(e, "array")};
  const std::string member = EventField(e, "member");
  if (!member.empty()) spec.argv.push_back(member);
  spec.env = {{"URAID_EVENT_JSON", EventJsonLine(e)},
              {"URAID_EVENT", EventName(e)},
              {"URAID_ARRAY", EventField(e, "array")},
              {"URAID_ARRAY_NAME", EventField(e, "name")},
              {"URAID_MEMBER", member},
              {"URAID_CONTROL", alert.control}};
  spec.timeout_s = options_.timeout_s;
  absl::Status s = RunChild(spec);
  if (!s.ok()) {
    Warn(absl::StrCat("program ", options_.program, " for ", Describe(alert),
                      ": ", s.message()));
  }
}

void AlertQueue::RunMail(const Alert& alert) {
  MailContext ctx;
  ctx.to = options_.mail_to;
  ctx.hostname = options_.hostname;
  ctx.array_state = ArrayStateForMail(alert, options_.timeout_s);
  ctx.now = NowSeconds();
  absl::Status s =
      SendMail(FormatMailMessage(alert.event, ctx), options_.timeout_s);
  if (!s.ok()) {
    Warn(absl::StrCat("mail to ", options_.mail_to, " for ", Describe(alert),
                      ": sendmail -t: ", s.message()));
  }
}

}  // namespace uraid::tool
