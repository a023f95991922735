// SPDX-License-Identifier: MIT
// The monitor's mail (--mail ADDR): an RFC 5322 message in mdadm's words
// about one event, handed to `sendmail -t` (whatever sendmail is first on
// PATH: postfix, exim, msmtp, nullmailer all take -t).

#ifndef URAID_TOOLS_ALERT_MAIL_H_
#define URAID_TOOLS_ALERT_MAIL_H_

#include <string>

#include "absl/status/status.h"
#include "monitor_event.h"

namespace uraid::tool {

struct MailContext {
  std::string to;        // the --mail address
  std::string hostname;  // this machine, for From, Subject and the body
  // The array's state as the server describes it now (a few lines), or
  // what the monitor last knew when the server cannot be asked.
  std::string array_state;
  double now = 0;  // Date header, seconds since the epoch
};

// The whole message, headers and body, lines ending in "\n" (sendmail
// converts). Subject: "EVENT event on ARRAY_NAME (UUID):HOSTNAME". Header
// values are stripped of control characters, so no field of the event can
// add a header.
std::string FormatMailMessage(const EventJson& event, const MailContext& ctx);

// Runs `sendmail -t` with the message on stdin, killed after timeout_s.
absl::Status SendMail(const std::string& message, double timeout_s);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_ALERT_MAIL_H_
