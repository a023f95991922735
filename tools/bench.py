#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""uraid benchmark driver (run by scripts/bench.sh).

Serves, in the same run, (a) a uraid array (4 members, 512 KiB chunk by
default) and (b) nbdkit's file plugin over one file of the same size, both
on the same directory (/dev/shm by default), and drives both with fio's nbd
engine over a unix socket. Every uraid number is reported as a ratio against
a peer measured in the same run, never as an absolute target.

The parts live in the package tools/bench/ (common.py: servers, fio and
arrays; healthy.py: the table against the file plugin; policy.py, rebuild.py,
resync.py, reshape.py, raid6.py: the extra parts; degraded_sweep.py:
degraded reads across array and client shapes; delay.py, jobs.py and
slow_members.py: members behind nbdkit's delay and rate filters;
report.py: the tables;
cli.py: the options and the order of the parts). This file is the entry
point and keeps its name and options.
"""

import os
import sys

# tools/ first, so that `bench` is the package beside this file (a package
# directory wins over this module of the same name).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
