# SPDX-License-Identifier: MIT
"""uraid's benchmark driver as a package; tools/bench.py is its entry point
(see there and scripts/bench.sh)."""
