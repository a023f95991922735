// SPDX-License-Identifier: MIT
// Forwarding header: member_scan.h is public now (uraid/member_scan.h, which
// the tool and the plugin include). Kept for the library's own sources and
// white-box tests that name it by its old place.

#ifndef URAID_SRC_DISCOVER_MEMBER_SCAN_H_
#define URAID_SRC_DISCOVER_MEMBER_SCAN_H_

#include "uraid/member_scan.h"  // IWYU pragma: export

#endif  // URAID_SRC_DISCOVER_MEMBER_SCAN_H_
