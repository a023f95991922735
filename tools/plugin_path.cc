// SPDX-License-Identifier: MIT
#include "plugin_path.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace uraid::tool {

namespace fs = std::filesystem;

std::string PluginPath() {
  if (const char* env = std::getenv("URAID_PLUGIN"); env && *env) {
    return fs::absolute(env).string();
  }
  std::error_code ec;
#ifdef URAID_PLUGIN_INSTALL_PATH
  fs::path installed = URAID_PLUGIN_INSTALL_PATH;
  if (installed.is_relative()) {
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    installed = ec ? fs::path() : self.parent_path() / installed;
  }
  if (!installed.empty() && fs::is_regular_file(installed, ec)) {
    return installed.lexically_normal().string();
  }
#endif
#ifdef URAID_PLUGIN_BUILD_PATH
  if (fs::exists(URAID_PLUGIN_BUILD_PATH, ec)) return URAID_PLUGIN_BUILD_PATH;
#endif
  return "uraid";
}

}  // namespace uraid::tool
