#!/bin/bash
# SPDX-License-Identifier: MIT
# No public header's layout may depend on build flags: a struct or class
# that changes with -DURAID_TSAN, NDEBUG or a sanitizer would give the
# library and its embedders different layouts of the same type. So the
# headers under libraid/include/uraid/ may use preprocessor conditionals
# only for their include guards, extern "C" (__cplusplus) and the compiler
# test of uraid/export.h (__GNUC__ / __clang__).
#   check_headers.sh INCLUDE_DIR
set -euo pipefail
dir=$1
bad=$(grep -nE '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)\b' \
        "$dir"/uraid/*.h "$dir"/uraid/*.h.in 2>/dev/null |
      grep -vE '#[[:space:]]*ifndef URAID_[A-Z_]+_H_$' |
      grep -vE '#[[:space:]]*ifdef __cplusplus$' |
      grep -vE 'export\.h:[0-9]+:#if defined\(__GNUC__\) \|\| defined\(__clang__\)$' ||
      true)
if [[ -n $bad ]]; then
  echo "check_headers: conditional compilation in public headers:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check_headers: $(ls "$dir"/uraid/*.h | wc -l) public headers, no build-flag-dependent code"
