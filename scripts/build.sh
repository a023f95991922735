#!/bin/bash
# SPDX-License-Identifier: MIT
# Configures and builds everything into ./build (Ninja).
# BUILD_TYPE=Debug|Release|RelWithDebInfo (default RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  ${URAID_LINE_TABLES_ONLY:+-DURAID_LINE_TABLES_ONLY=$URAID_LINE_TABLES_ONLY}
cmake --build build
