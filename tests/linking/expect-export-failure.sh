#!/usr/bin/env bash
# expect-export-failure.sh: the control of check-exports.sh's API rules (ctest
# linking.exports_leak_control). Runs check-exports.sh on <library> under the rules of <name>
# and succeeds only when it fails (exit 1) AND reports every <pattern> (extended regular
# expressions, one line of its report each); so a checker that stopped looking passes nothing.
# usage: expect-export-failure.sh <library.so> <name for the rules> <pattern>...
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=${1:?usage: expect-export-failure.sh <library.so> <name> <pattern>...}
rules=${2:?usage: expect-export-failure.sh <library.so> <name> <pattern>...}
shift 2
[[ $# -gt 0 ]] || { echo "expect-export-failure: no pattern given" >&2; exit 2; }

out=$(bash "$here/check-exports.sh" "$lib" "$rules")
status=$?
echo "$out"
if [[ $status -ne 1 ]]; then
  echo "expect-export-failure: FAILED: check-exports.sh exited $status, not 1"
  exit 1
fi
for pattern in "$@"; do
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "expect-export-failure: FAILED: no report matching: $pattern"
    exit 1
  fi
done
echo "expect-export-failure: OK: every expected offence was reported"
