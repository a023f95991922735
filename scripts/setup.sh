#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs the Debian 12 packages uraid needs.
#
#   ./scripts/setup.sh           what the demo needs: build the tool and the
#                                plugin, serve, attach (demo.sh)
#   ./scripts/setup.sh --tests   everything the tests need as well, the
#                                kernel tests' guest included (test.sh, CI)
#   ./scripts/setup.sh --print   the packages it would want, one a line
#
# Idempotent: asks dpkg first and does nothing when everything is present,
# so test.sh and demo.sh can call it on every run. When apt must run and
# another apt or dpkg holds the package lock (a fresh machine runs
# unattended-upgrades at boot), it waits up to URAID_APT_LOCK_TIMEOUT
# seconds (default 600), naming the holder (scripts/wait_for_apt.sh).
set -euo pipefail
cd "$(dirname "$0")"

mode=demo
print=
for arg; do
  case $arg in
    --tests) mode=tests ;;
    --print) print=1 ;;  # list the mode's packages, install nothing
    *)
      echo "usage: setup.sh [--tests] [--print]" >&2
      exit 2
      ;;
  esac
done

# Building the tool and the plugin (CMake's configure step also wants
# GoogleTest and Google Benchmark), serving, and attaching as the demo
# prints it (nbdinfo, nbdfuse, fuse3; jq reads detail --json).
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libisal-dev libabsl-dev libgtest-dev libgmock-dev googletest
  libbenchmark-dev nlohmann-json3-dev libcli11-dev
  nbdkit nbdkit-plugin-dev libnbd-dev libnbd-bin
  # the plugin logs to the journal with fields (sd_journal_send)
  libsystemd-dev
  # create probes members for filesystems and partition tables (mdadm's way)
  libblkid-dev
  nbdfuse fuse3 jq
)
if [[ $mode == tests ]]; then
  PACKAGES+=(
    # the fuzz targets and the ASan+UBSan pass
    clang liburing-dev python3-libnbd
    # tests/python: the Python package (python/uraid) under pytest
    python3-pytest
    # integration_admin parses `uraid metrics` with Prometheus's own text
    # parser (prometheus_client.parser)
    python3-prometheus-client
    # the API reference (docs/api), generated from the public headers with
    # every build
    doxygen
    mdadm fio util-linux e2fsprogs xfsprogs iproute2
    # tests/kernel: a throw-away guest under Debian's own kernel judges md
    # interop (qemu, the kernel and its modules, busybox for the initramfs,
    # the kernel NBD client's tool).
    qemu-system-x86 linux-image-amd64 busybox-static nbd-client
  )
fi

if [[ -n $print ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

# Names provided by installed packages: some of ours are virtual (bookworm's
# nbdfuse is provided by libnbd-bin), and dpkg-query alone would report them
# missing on every run.
provided=$(dpkg-query -W -f='${Status}|${Provides}\n' 2>/dev/null |
  sed -n 's/^install ok installed|//p' | tr ',' '\n' |
  sed 's/([^)]*)//g; s/[[:space:]]//g' | sort -u)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]] &&
     ! grep -qxF "$pkg" <<<"$provided"; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages for the $mode present"
  exit 0
fi

echo "setup: installing for the $mode: ${missing[*]}"
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    echo "setup: missing packages and not root (no sudo): ${missing[*]}" >&2
    exit 1
  fi
fi
# Another apt or dpkg (unattended-upgrades at boot) holds the lock: wait
# for it, bounded and saying who, then let apt-get wait out what is left
# of the bound for the locks it takes later (dpkg's, at install).
timeout=${URAID_APT_LOCK_TIMEOUT:-600}
start=$SECONDS
./wait_for_apt.sh "$timeout"
apt_get() {
  local left=$((timeout - (SECONDS - start)))
  ((left > 0)) || left=1
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout="$left" "$@"
}
apt_get update
# mdadm's postinst may try to start its monitoring service; in a container
# that fails harmlessly and does not fail the install.
apt_get install -y --no-install-recommends "${missing[@]}"
