# SPDX-License-Identifier: MIT
# cmake -DIN=PAGE.in -DOUT=PAGE -DPROJECT_VERSION=X.Y.Z -P configure.cmake:
# writes a man page with @PROJECT_VERSION@ replaced (at build time).
configure_file(${IN} ${OUT} @ONLY)
