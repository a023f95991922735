// SPDX-License-Identifier: MIT
#include "alert_mail.h"

#include <time.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "child_process.h"

namespace uraid::tool {
namespace {

// A header value on one line: control characters (CR, LF above all) become
// spaces.
std::string HeaderValue(std::string_view s) {
  std::string out;
  for (const char c : s) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  }
  return out;
}

// RFC 5322 date, e.g. "Fri, 31 Jan 2025 12:00:00 +0100" (English names
// whatever the locale: strftime's %a/%b are locale-dependent).
std::string MailDate(double now) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed",
                                          "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr",
                                            "May", "Jun", "Jul", "Aug",
                                            "Sep", "Oct", "Nov", "Dec"};
  const time_t t = static_cast<time_t>(std::floor(now));
  struct tm tm;
  localtime_r(&t, &tm);
  char zone[16];
  strftime(zone, sizeof zone, "%z", &tm);
  return absl::StrFormat("%s, %02d %s %04d %02d:%02d:%02d %s",
                         kDays[tm.tm_wday], tm.tm_mday, kMonths[tm.tm_mon],
                         tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec,
                         zone);
}

}  // namespace

std::string FormatMailMessage(const EventJson& event, const MailContext& ctx) {
  const std::string name = EventName(event);
  const std::string array = EventField(event, "array");
  std::string array_name = EventField(event, "name");
  if (array_name.empty()) array_name = "(unnamed)";
  const std::string member = EventField(event, "member");

  std::string m;
  absl::StrAppend(&m, "From: uraid monitoring <root@",
                  HeaderValue(ctx.hostname), ">\n");
  absl::StrAppend(&m, "To: ", HeaderValue(ctx.to), "\n");
  absl::StrAppend(&m, "Subject: ",
                  HeaderValue(absl::StrFormat("%s event on %s (%s):%s", name,
                                              array_name, array, ctx.hostname)),
                  "\n");
  absl::StrAppend(&m, "Date: ", MailDate(ctx.now), "\n");
  absl::StrAppend(&m, "MIME-Version: 1.0\n");
  absl::StrAppend(&m, "Content-Type: text/plain; charset=UTF-8\n");
  absl::StrAppend(&m, "Content-Transfer-Encoding: 8bit\n");
  absl::StrAppend(&m, "X-Uraid-Event: ", HeaderValue(name), "\n");
  absl::StrAppend(&m, "\n");
  // The body follows mdadm's alert mail, word for word where it applies.
  absl::StrAppend(&m,
                  "This is an automatically generated mail message from "
                  "uraid monitor\nrunning on ",
                  ctx.hostname, "\n\n");
  absl::StrAppendFormat(&m,
                        "A %s event had been detected on array %s (%s).\n\n",
                        name, array_name, array);
  if (!member.empty()) {
    auto slot = event.find("slot");
    if (slot != event.end() && slot->is_number_integer()) {
      absl::StrAppendFormat(
          &m, "It could be related to component device %s (slot %d).\n\n",
          member, slot->get<int>());
    } else {
      absl::StrAppendFormat(
          &m, "It could be related to component device %s.\n\n", member);
    }
  }
  absl::StrAppend(&m, "The event: ", FormatEventBody(event), "\n\n");
  absl::StrAppend(&m, "Faithfully yours, etc.\n\n");
  absl::StrAppend(&m, "P.S. The array's state is currently:\n\n",
                  ctx.array_state);
  if (!ctx.array_state.empty() && ctx.array_state.back() != '\n') m += "\n";
  return m;
}

absl::Status SendMail(const std::string& message, double timeout_s) {
  ChildSpec spec;
  spec.argv = {"sendmail", "-t"};
  spec.stdin_data = message;
  spec.timeout_s = timeout_s;
  return RunChild(spec);
}

}  // namespace uraid::tool
