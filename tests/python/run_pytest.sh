#!/bin/bash
# SPDX-License-Identifier: MIT
# The Python package's tests against an INSTALLED package, not the build
# tree: installs liburaid.so (component uraid_runtime) and the package
# (uraid_python) into a scratch prefix, checks that `import uraid` picks it
# from there, then runs pytest over tests/python and examples/python with
# the fixtures plugin.
#   run_pytest.sh PYTHON BUILD_DIR SOURCE_DIR PYTHON_DIR_RELATIVE [pytest args]
set -euo pipefail
py=$1 build=$2 src=$3 pydir=$4
shift 4
prefix=$build/python-test-prefix
rm -rf "$prefix"
for c in uraid_runtime uraid_python; do
  cmake --install "$build" --prefix "$prefix" --component "$c" >/dev/null
done
site=$prefix/$pydir
cd "$(mktemp -d)"  # not the source or build tree
trap 'rm -rf "$PWD"' EXIT
export PYTHONPATH=$site
unset URAID_LIBRARY
where=$("$py" -c 'import uraid, os; print(os.path.realpath(uraid.__file__))')
[[ $where == "$(realpath "$site")"/* ]] ||
  { echo "run_pytest: uraid imported from $where, not $site" >&2; exit 1; }
exec "$py" -m pytest -p uraid.pytest_plugin -q -p no:cacheprovider \
  "$src/tests/python" "$src/examples/python" "$@"
