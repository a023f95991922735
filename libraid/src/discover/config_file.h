// SPDX-License-Identifier: MIT
// Forwarding header: config_file.h is public now (uraid/config_file.h, which
// the tool and the plugin include). Kept for the library's own sources and
// white-box tests that name it by its old place.

#ifndef URAID_SRC_DISCOVER_CONFIG_FILE_H_
#define URAID_SRC_DISCOVER_CONFIG_FILE_H_

#include "uraid/config_file.h"  // IWYU pragma: export

#endif  // URAID_SRC_DISCOVER_CONFIG_FILE_H_
