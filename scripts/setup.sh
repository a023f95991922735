#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs the Debian 12 packages uraid needs to build, test and demo.
# Idempotent: asks dpkg first and does nothing when everything is present,
# so test.sh and demo.sh can call it on every run.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang
  libisal-dev libabsl-dev libgtest-dev libgmock-dev googletest
  libbenchmark-dev liburing-dev nlohmann-json3-dev libcli11-dev
  nbdkit nbdkit-plugin-dev libnbd-dev libnbd-bin python3-libnbd
  # tests/python: the Python package (python/uraid) under pytest
  python3-pytest
  # integration_admin parses `uraid metrics` with Prometheus's own text
  # parser (prometheus_client.parser)
  python3-prometheus-client
  # the API reference (docs/api), generated from the public headers with
  # every build
  doxygen
  nbdfuse fuse3 mdadm fio jq util-linux e2fsprogs xfsprogs iproute2
  # the plugin logs to the journal with fields (sd_journal_send)
  libsystemd-dev
  # create probes members for filesystems and partition tables (mdadm's way)
  libblkid-dev
  # tests/kernel: a throw-away guest under Debian's own kernel judges md
  # interop (qemu, the kernel and its modules, busybox for the initramfs,
  # the kernel NBD client's tool).
  qemu-system-x86 linux-image-amd64 busybox-static nbd-client
)

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
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    echo "setup: missing packages and not root (no sudo): ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
# mdadm's postinst may try to start its monitoring service; in a container
# that fails harmlessly and does not fail the install.
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
