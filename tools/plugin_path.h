// SPDX-License-Identifier: MIT
// Which nbdkit-uraid-plugin.so `uraid serve` runs.

#ifndef URAID_TOOLS_PLUGIN_PATH_H_
#define URAID_TOOLS_PLUGIN_PATH_H_

#include <string>

namespace uraid::tool {

// The first of: $URAID_PLUGIN (made absolute); the installed plugin beside
// an installed uraid (URAID_PLUGIN_INSTALL_PATH, relative to this binary's
// directory: bin/../lib/<multiarch>/nbdkit/plugins/ under the same prefix);
// the plugin of the build tree this binary was built in; else "uraid",
// which nbdkit looks up in its own plugin directory. So an installed tool
// never runs a build tree's plugin, and a build tree's tool never runs an
// installed one.
std::string PluginPath();

}  // namespace uraid::tool

#endif  // URAID_TOOLS_PLUGIN_PATH_H_
