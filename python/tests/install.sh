#!/usr/bin/env bash
# The Python package installs both ways the README says, and works from each (ctest
# packaging.python_install):
#  1. `cmake --install` of the build tree (components pinpool_Runtime and pinpool_Python) into a
#     temporary prefix: the package imports with nothing but PYTHONPATH pointing there (the
#     extension finds libpinpool through its relative RPATH);
#  2. `pip install --no-index --no-build-isolation SOURCE` into a fresh venv made with
#     `PYTHON -m venv --system-site-packages`: offline, Debian's setuptools, wheel, numpy and
#     torch. setup.py builds the library and the extension with CMake in PIP_BUILD (kept between
#     runs, so a second run is incremental; the first compiles the library: about 3 minutes on two
#     cores). CMAKE_ARGS passes through (a compiler launcher).
# Each install then runs README's example (the Python section's code, as written there) from a
# directory outside the checkout, and shows where pinpool was imported from.
# Usage: install.sh BUILD_DIR SOURCE_DIR PYTHON PIP_BUILD
set -euo pipefail
build=$1 source=$2 python=$3 pip_build=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

example=$(awk '/^## Python/ { section = 1 } section && /^```python/ { code = 1; next }
               code && /^```/ { exit } code' "$source/README.md")
[ -n "$example" ] || { echo "no Python example in README.md" >&2; exit 1; }
example="$example
import pinpool as _where
print(_where.__file__)"

echo "== cmake --install"
for component in pinpool_Runtime pinpool_Python; do
  cmake --install "$build" --prefix "$work/prefix" --component "$component" >/dev/null
done
site=$(dirname "$(find "$work/prefix" -name __init__.py -path "*/pinpool/*")")
site=$(dirname "$site")
out=$(cd "$work" && env -i PATH=/usr/bin:/bin PYTHONPATH="$site" "$python" -c "$example")
echo "$out"
case "$out" in *"$work/prefix/"*) ;; *) echo "imported from elsewhere" >&2; exit 1 ;; esac

echo "== pip install into a fresh venv"
"$python" -m venv --system-site-packages "$work/venv"
start=$(date +%s)
(cd "$work" && PINPOOL_PIP_BUILD_DIR="$pip_build" CMAKE_ARGS="${CMAKE_ARGS:-}" \
  "$work/venv/bin/pip" install --no-index --no-build-isolation "$source" >"$work/pip.log" 2>&1) ||
  { cat "$work/pip.log" >&2; exit 1; }
echo "pip install took $(( $(date +%s) - start )) s"
out=$(cd "$work" && env -i PATH=/usr/bin:/bin "$work/venv/bin/python" -c "$example")
echo "$out"
case "$out" in *"$work/venv/"*) ;; *) echo "imported from elsewhere" >&2; exit 1 ;; esac
