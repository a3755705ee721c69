#!/usr/bin/env bash
# abi_mismatch.sh PROBE OTHER_LIB_DIR: a program built against one ABI version does not load with
# a library of another (docs/abi.md). PROBE (abi_probe.cc) runs with its own libpinpool.so, then
# with OTHER_LIB_DIR first on the library path, where a libpinpool.so.<N> of the same file name
# has its version nodes renamed as the next ABI version's would be. The loader must refuse it,
# naming the missing version node, before the program runs a single instruction of its own.
set -euo pipefail
probe=${1:?usage: abi_mismatch.sh PROBE OTHER_LIB_DIR}
other=${2:?usage: abi_mismatch.sh PROBE OTHER_LIB_DIR}
fail() { echo "abi_mismatch: FAIL: $*" >&2; exit 1; }

out=$("$probe" 2>&1) || fail "the probe fails with its own library: $out"
[[ $out == *"abi_probe OK"* ]] || fail "the probe did not say OK: $out"
echo "with its own library: $out"

if out=$(LD_LIBRARY_PATH=$other "$probe" 2>&1); then
  fail "the probe ran with another ABI's library: $out"
fi
echo "with another ABI's library: $out"
[[ $out == *"version \`PINPOOL_"*"' not found"* ]] ||
  fail "refused, but not for the missing version node: $out"
[[ $out != *"abi_probe OK"* ]] || fail "the probe ran"
echo "abi_mismatch: OK: refused at load time, naming the version node"
