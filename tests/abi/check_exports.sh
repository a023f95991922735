#!/bin/bash
# SPDX-License-Identifier: MIT
# ABI check of liburaid.so: its dynamic symbol table is the public API.
#   check_exports.sh LIBURAID_SO C_SYMBOLS_TXT
# Fails when
#   - a defined dynamic symbol is neither a C function uraid_* nor in
#     namespace uraid (its functions, typeinfo and vtables): an internal or
#     a standard-library instantiation escaped the version script
#     (libraid/liburaid.map) or the visibility rules (uraid/export.h);
#   - the uraid_* C functions differ from the checked-in list: a function
#     of uraid/uraid.h removed or renamed (an ABI break), or one added
#     without being recorded (add it to the list in the same change);
#   - the SONAME is not liburaid.so.MAJOR.MINOR (the versioning policy in
#     docs/embedding.md).
set -euo pipefail
lib=$1
list=$2
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
fail=0

stray=$(grep -v '^uraid_' <<<"$syms" | c++filt |
  grep -Ev '^(uraid::|typeinfo for uraid::|typeinfo name for uraid::|vtable for uraid::)' || true)
if [[ -n "$stray" ]]; then
  echo "check_exports: symbols outside the public API:" >&2
  echo "$stray" >&2
  fail=1
fi

if ! diff -u "$list" <(grep '^uraid_' <<<"$syms"); then
  echo "check_exports: the C functions differ from $list" \
       "(- removed: an ABI break; + new: add it to the list)" >&2
  fail=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if ! [[ "$soname" =~ ^liburaid\.so\.[0-9]+\.[0-9]+$ ]]; then
  echo "check_exports: SONAME '$soname' is not liburaid.so.MAJOR.MINOR" >&2
  fail=1
fi

echo "check_exports: $(wc -l <<<"$syms") symbols exported" \
     "($(grep -c '^uraid_' <<<"$syms") C functions), SONAME $soname"
exit $fail
