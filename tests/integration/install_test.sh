#!/bin/bash
# Installs the current build into a temporary staging directory and builds
# the examples against the INSTALLED package, the way an outside project
# would: with find_package(uraid) (examples/ configured on its own) and
# with pkg-config (examples/c_api/c_example.c, shared and static). Runs
# what it built, then removes the staging directory.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
#
# `cmake --install --prefix /opt/uraid-install-test` runs under DESTDIR, so
# nothing lands outside the temporary directory: the nbdkit plugin's
# destination is nbdkit's own (absolute) plugin directory, which DESTDIR
# relocates too.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/uraid-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
# The shared libraries a binary loads (no `| grep -q`: with pipefail, grep
# exiting at the first match can fail the pipeline with SIGPIPE).
libs_of() { ldd "$1"; }

stage=$tmp/stage
prefix=/opt/uraid-install-test
root=$stage$prefix
DESTDIR=$stage cmake --install "$build" --prefix "$prefix" |
  tee "$tmp/install.log"

# Everything went under DESTDIR.
n=0
while read -r f; do
  [[ $f == "$stage"/* ]] || fail "installed outside the staging dir: $f"
  n=$((n + 1))
done < <(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$tmp/install.log")
[[ $n -gt 0 ]] || fail "cmake --install reported no files"

libdir=$(find "$root" -name 'liburaid.so' -printf '%h\n' | head -1)
[[ -n $libdir ]] || fail "no liburaid.so under $root"
for f in "$libdir/liburaid.a" "$root/bin/uraid" \
         "$libdir/cmake/uraid/uraidConfig.cmake" \
         "$libdir/cmake/uraid/uraidConfigVersion.cmake" \
         "$libdir/pkgconfig/uraid.pc"; do
  [[ -f $f ]] || fail "missing $f"
done
for h in array geometry member superblock uraid; do
  [[ -f $root/include/uraid/$h.h ]] || fail "missing include/uraid/$h.h"
done
[[ -z $(ls "$root/include/uraid" | grep -v '\.h$') ]] ||
  fail "non-headers installed in include/uraid"
if grep -rqs -e "$src" -e "$build" "$libdir/cmake/uraid" "$libdir/pkgconfig"
then
  fail "the installed package refers to the source or build tree"
fi

# The plugin: in nbdkit's plugin directory (as staged), and loadable.
plugindir=$(sed -n 's/^URAID_NBDKIT_PLUGINDIR:[A-Z]*=//p' \
  "$build/CMakeCache.txt")
[[ $plugindir == /* ]] || plugindir=$prefix/$plugindir
plugin=$stage$plugindir/nbdkit-uraid-plugin.so
[[ -f $plugin ]] || fail "plugin not at $plugin"
dump=$(nbdkit "$plugin" --dump-plugin) ||
  fail "nbdkit cannot load the installed plugin"
grep -qx 'name=uraid' <<<"$dump" || fail "the installed plugin is not uraid"

# 1. find_package(uraid): the examples directory as an outside project,
#    with the installed tool and plugin for the recovery example.
cmake -S "$src/examples" -B "$tmp/ex" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$root" -DURAID_TOOL="$root/bin/uraid" \
  -DURAID_PLUGIN="$plugin"
grep -qx "uraid_DIR:PATH=$libdir/cmake/uraid" "$tmp/ex/CMakeCache.txt" ||
  fail "find_package(uraid) did not pick the staged package"
cmake --build "$tmp/ex"
[[ $(libs_of "$tmp/ex/example_custom_member") == *"$libdir/liburaid.so"* ]] ||
  fail "example_custom_member is not linked to the installed liburaid.so"
[[ $(libs_of "$tmp/ex/example_c_api") != *liburaid* ]] ||
  fail "example_c_api should link uraid::raid_static"
ctest --test-dir "$tmp/ex" --output-on-failure
ntests=$(ctest --test-dir "$tmp/ex" -N | sed -n 's/^Total Tests: //p')
[[ $ntests -ge 4 ]] || fail "only $ntests example tests against the install"

# 2. pkg-config: compile the C example by hand, shared then static.
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion uraid) == "$(sed -n \
  's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")" ]] ||
  fail "uraid.pc version"
read -ra cflags <<<"$(pkg-config --cflags uraid)"
read -ra libs <<<"$(pkg-config --libs uraid)"
read -ra static_libs <<<"$(pkg-config --static --libs uraid |
  sed 's/-luraid\b/-l:liburaid.a/')"
cc -std=gnu11 -Wall -o "$tmp/c_shared" "$src/examples/c_api/c_example.c" \
  "${cflags[@]}" "${libs[@]}" -pthread -Wl,-rpath,"$libdir"
"$tmp/c_shared" >"$tmp/c_shared.log" ||
  { cat "$tmp/c_shared.log"; fail "c_shared failed"; }
[[ $(libs_of "$tmp/c_shared") == *"$libdir/liburaid.so"* ]] ||
  fail "c_shared is not linked to the installed liburaid.so"
cc -std=gnu11 -Wall -o "$tmp/c_static" "$src/examples/c_api/c_example.c" \
  "${cflags[@]}" "${static_libs[@]}" -pthread
"$tmp/c_static" >"$tmp/c_static.log" ||
  { cat "$tmp/c_static.log"; fail "c_static failed"; }
[[ $(libs_of "$tmp/c_static") != *liburaid* ]] ||
  fail "c_static is linked to liburaid.so"
echo "install_test: PASS ($ntests example tests against the installed" \
  "package, C example via pkg-config shared and static)"
