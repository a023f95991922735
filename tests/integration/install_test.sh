#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs the current build into a temporary staging directory and builds
# the examples against the INSTALLED package, the way an outside project
# would: with find_package(uraid) (examples/ configured on its own) and
# with pkg-config (examples/c_api/c_example.c, shared and static). Runs
# what it built, then removes the staging directory.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
#
# `cmake --install --prefix /opt/uraid-install-test` runs under DESTDIR, so
# nothing lands outside the temporary directory. Then the package a
# distribution would take, installed into an outside prefix without
# DESTDIR: everything (the nbdkit plugin included) under that prefix; the
# installed `uraid serve` runs the installed plugin, not the build tree's;
# `--version` of the tool, the plugin and uraid_version() agree with
# project(VERSION); the man pages render without warnings; the bash
# completion parses and completes.
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
         "$libdir/pkgconfig/uraid.pc" "$libdir/pkgconfig/uraid-c.pc"; do
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

# The plugin: under the prefix (nbdkit's plugindir relative to nbdkit's
# prefix), and loadable.
plugindir=$(sed -n 's/^URAID_NBDKIT_PLUGINDIR:[A-Z]*=//p' \
  "$build/CMakeCache.txt")
[[ $plugindir == /* ]] || plugindir=$prefix/$plugindir
[[ $plugindir == "$prefix"/* ]] ||
  fail "the plugin installs outside the prefix: $plugindir"
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

# 2b. uraid-c.pc: a C program needs only -luraid (no Abseil), and the
#     failure-survival example builds and runs with it.
c_libs=$(pkg-config --libs uraid-c)
[[ $c_libs != *absl* ]] || fail "pkg-config --libs uraid-c names Abseil: $c_libs"
read -ra c_cflags <<<"$(pkg-config --cflags uraid-c)"
read -ra c_libs_a <<<"$c_libs"
cc -std=gnu11 -Wall -o "$tmp/c_rebuild" "$src/examples/c_api/c_rebuild.c" \
  "${c_cflags[@]}" "${c_libs_a[@]}" -pthread -Wl,-rpath,"$libdir"
"$tmp/c_rebuild" >"$tmp/c_rebuild.log" ||
  { cat "$tmp/c_rebuild.log"; fail "c_rebuild (uraid-c.pc) failed"; }

# 3. The package a distribution would take, in an outside prefix (no
#    DESTDIR): every file under it.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
P=$tmp/outside-prefix
cmake --install "$build" --prefix "$P" >"$tmp/install2.log"
while read -r f; do
  [[ $f == "$P"/* ]] || fail "installed outside the prefix $P: $f"
done < <(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$tmp/install2.log")
pplugin=$(find "$P" -name nbdkit-uraid-plugin.so)
[[ $pplugin == "$P/lib/"*"/nbdkit/plugins/nbdkit-uraid-plugin.so" ]] ||
  fail "plugin not under $P/lib/.../nbdkit/plugins: '$pplugin'"
for f in "$P/share/man/man8/uraid.8" "$P/share/man/man1/nbdkit-uraid-plugin.1" \
         "$P/share/man/man5/uraid.conf.5" \
         "$P/share/bash-completion/completions/uraid" \
         "$P/include/uraid/version.h"; do
  [[ -f $f ]] || fail "missing $f"
done

# --version: one number everywhere.
[[ $("$P/bin/uraid" --version) == "uraid $version" ]] ||
  fail "uraid --version: $("$P/bin/uraid" --version)"
grep -qx "uraid $version" <(nbdkit "$pplugin" --version) ||
  fail "nbdkit uraid --version: $(nbdkit "$pplugin" --version)"
grep -qx "#define URAID_VERSION_STRING \"$version\"" "$P/include/uraid/version.h" ||
  fail "version.h does not say $version"
cat >"$tmp/v.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <uraid/uraid.h>
#include <uraid/version.h>
int main(void) {
  printf("%s %s %d.%d.%d\n", uraid_version(), URAID_VERSION_STRING,
         URAID_VERSION_MAJOR, URAID_VERSION_MINOR, URAID_VERSION_PATCH);
  return strcmp(uraid_version(), URAID_VERSION_STRING) != 0;
}
C
plib=$(dirname "$(find "$P" -name liburaid.so | head -1)")
cc -std=c11 -Wall -Werror -o "$tmp/v" "$tmp/v.c" -I"$P/include" -L"$plib" \
  -luraid -Wl,-rpath,"$plib"
[[ $("$tmp/v") == "$version $version $version" ]] ||
  fail "uraid_version(): $("$tmp/v")"

# The Python package, as any prefix but /usr gets it: lib/pythonX.Y/
# dist-packages (Debian's python3 reads /usr/local's).
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ -f $P/lib/python$pyver/dist-packages/uraid/__init__.py ]] ||
  fail "python package not in $P/lib/python$pyver/dist-packages"

# Under --prefix /usr (a distribution's, or `sudo cmake --install build
# --prefix /usr`), staged: the package goes where Debian's python3 reads
# the distribution's packages, /usr/lib/python3/dist-packages (it reads no
# /usr/lib/pythonX.Y/dist-packages), and imports from there with the
# liburaid.so installed beside it (_paths.py's relative way to it).
ustage=$tmp/usr-stage
for c in uraid_runtime uraid_python; do
  DESTDIR=$ustage cmake --install "$build" --prefix /usr --component "$c" \
    >/dev/null
done
upkg=$(find "$ustage" -name __init__.py -path '*/uraid/*' -printf '%h\n')
[[ $upkg == "$ustage/usr/lib/python3/dist-packages/uraid" ]] ||
  fail "the python package under --prefix /usr went to '$upkg'"
/usr/bin/python3 -c '
import sys
sys.exit(0 if "/usr/lib/python3/dist-packages" in sys.path else 1)' ||
  fail "/usr/lib/python3/dist-packages is not on python3's sys.path"
got=$(cd "$tmp" && env -u URAID_LIBRARY -u PYTHONPATH /usr/bin/python3 -c '
import os, sys
sys.path[:0] = [sys.argv[1]]  # the staged /usr/lib/python3/dist-packages
import uraid
print(os.path.dirname(os.path.realpath(uraid.__file__)), uraid.version())
' "$ustage/usr/lib/python3/dist-packages") ||
  fail "import uraid from the staged /usr install failed"
[[ $got == "$(realpath "$upkg") $version" ]] ||
  fail "import uraid (--prefix /usr): got '$got'"

# The installed uraid serves with the installed plugin (no URAID_PLUGIN;
# the build tree's plugin exists and must not be chosen).
[[ -f $build/nbdplugin/nbdkit-uraid-plugin.so ]] ||
  fail "no build-tree plugin to be tempted by"
d=$tmp/serve
mkdir "$d"
for i in 0 1 2; do truncate -s 16M "$d/m$i.img"; done
(unset URAID_PLUGIN; "$P/bin/uraid" create --assume-clean "$d"/m?.img >/dev/null)
(unset URAID_PLUGIN; "$P/bin/uraid" serve --socket "$d/s.sock" \
  --pidfile "$d/s.pid" "$d"/m?.img)
pid=$(cat "$d/s.pid")
# `|| true`: the server is usually gone by now (killed below), and under
# set -e a failing command in the EXIT trap becomes the script's status:
# the test failed after printing PASS whenever nbdkit exited quickly.
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
[[ $cmdline == *" $pplugin "* ]] ||
  fail "installed uraid serve did not run the installed plugin: $cmdline"
grep -q "$pplugin" "/proc/$pid/maps" || fail "the installed plugin is not loaded"
! grep -q "$build/" "/proc/$pid/maps" || fail "the build tree's plugin is loaded"
[[ $(nbdinfo --size "nbd+unix:///?socket=$d/s.sock") -gt 0 ]] ||
  fail "the installed server does not answer"
kill "$pid"

# Man pages: render without a warning (man-db and groff), with the version.
for page in "$P/share/man/man8/uraid.8" "$P/share/man/man1/nbdkit-uraid-plugin.1" \
            "$P/share/man/man5/uraid.conf.5"; do
  warnings=$( { MANWIDTH=80 man --warnings -l "$page" >/dev/null; } 2>&1)
  [[ -z $warnings ]] || fail "man -l $page warns: $warnings"
  warnings=$(groff -man -ww -z "$page" 2>&1)
  [[ -z $warnings ]] || fail "groff warns on $page: $warnings"
  grep -q "uraid $version" "$page" || fail "$page does not carry $version"
done
MANWIDTH=80 man -l "$P/share/man/man8/uraid.8" | grep -q zero-superblock ||
  fail "uraid(8) does not document zero-superblock"

# Bash completion: valid bash, and it completes commands and options from
# the installed tool.
comp=$P/share/bash-completion/completions/uraid
bash -n "$comp" || fail "the completion is not valid bash"
got=$(PATH=$P/bin:$PATH bash -c '
  compopt() { :; }
  source "$1"
  COMP_WORDS=(uraid det); COMP_CWORD=1; _uraid; echo "${COMPREPLY[*]}"
  COMP_WORDS=(uraid zero); COMP_CWORD=1; _uraid; echo "${COMPREPLY[*]}"
  COMP_WORDS=(uraid create --assu); COMP_CWORD=2; _uraid; echo "${COMPREPLY[*]}"
  COMP_WORDS=(uraid create --layout left-s); COMP_CWORD=3; _uraid; echo "${COMPREPLY[*]}"
' _ "$comp")
[[ $got == $'detail\nzero-superblock\n--assume-clean\nleft-symmetric' ]] ||
  fail "completion: got '$got'"

echo "install_test: PASS ($ntests example tests against the installed" \
  "package, C example via pkg-config shared and static; outside prefix:" \
  "installed serve, --version, man pages, completion; the Python package" \
  "under /usr and elsewhere)"
