#!/bin/bash
# SPDX-License-Identifier: MIT
# Configures and builds into ./build (Ninja): everything, or only the
# targets named (demo.sh: the tool and the plugin).
#   scripts/build.sh [TARGET...]
# BUILD_TYPE=Debug|Release|RelWithDebInfo (default RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  ${URAID_LINE_TABLES_ONLY:+-DURAID_LINE_TABLES_ONLY=$URAID_LINE_TABLES_ONLY}
if (($#)); then
  cmake --build build --target "$@"
else
  cmake --build build
fi
