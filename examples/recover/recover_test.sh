#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs the recovery example end to end on md member images:
#   recover_test.sh URAID_RECOVER URAID_TOOL NBDKIT_PLUGIN
# `uraid create` makes four member images, nbdkit with the plugin writes a
# reference image into the array (nbdcopy), then uraid-recover copies the
# array out: healthy, degraded (one member left out), and while nbdkit is
# serving the same members. Each copy must equal the reference, and the
# members must be byte-for-byte unchanged by the recoveries.
set -euo pipefail
recover=$1 tool=$2 plugin=$3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/uraid-recover-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "recover_test: FAIL: $*" >&2; exit 1; }

members=()
for i in 0 1 2 3; do
  truncate -s 24M "$tmp/m$i.img"
  members+=("$tmp/m$i.img")
done
"$tool" create --chunk 64K --name recover-test --assume-clean "${members[@]}"
size=$("$tool" detail --json "${members[@]}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["array_bytes"])')
echo "recover_test: array of $size bytes"

# The reference: random data at both ends, zeros (a hole) in between.
head -c 5M /dev/urandom >"$tmp/ref.bin"
truncate -s $((size - 1048576)) "$tmp/ref.bin"
head -c 1M /dev/urandom >>"$tmp/ref.bin"
plugin_args=()
for m in "${members[@]}"; do plugin_args+=("member=$m"); done
REF=$tmp/ref.bin nbdkit -U - "$plugin" "${plugin_args[@]}" \
  --run 'nbdcopy "$REF" "$uri"'

sums_before=$(sha256sum "${members[@]}")

# Healthy.
"$recover" -o "$tmp/out.bin" "${members[@]}"
cmp "$tmp/ref.bin" "$tmp/out.bin" || fail "healthy copy differs"
[[ $(stat -c %s "$tmp/out.bin") == "$size" ]] || fail "healthy copy size"

# Degraded: slot 1 left out; its chunks come from parity.
"$recover" -o "$tmp/out1.bin" "$tmp/m3.img" "$tmp/m0.img" "$tmp/m2.img" \
  2>"$tmp/log1"
cat "$tmp/log1"
grep -q "slot 1 missing" "$tmp/log1" || fail "degraded state not reported"
cmp "$tmp/ref.bin" "$tmp/out1.bin" || fail "degraded copy differs"

# While nbdkit serves (and locks) the same members.
RECOVER=$recover OUT=$tmp/out2.bin nbdkit -U - "$plugin" "${plugin_args[@]}" \
  --run '"$RECOVER" -o "$OUT" '"${members[*]}"
cmp "$tmp/ref.bin" "$tmp/out2.bin" || fail "copy while served differs"

# Two members gone: a clear error, non-zero exit.
if "$recover" -o "$tmp/out3.bin" "$tmp/m0.img" "$tmp/m1.img" 2>"$tmp/log3"
then
  fail "recovery with two members missing succeeded"
fi
cat "$tmp/log3"
grep -q "uraid-recover: " "$tmp/log3" || fail "no error message"

sums_after=$(sha256sum "${members[@]}")
[[ "$sums_before" == "$sums_after" ]] || fail "a member was modified"
echo "recover_test: PASS"
