#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what pinpool needs (Debian 12),
# builds it, and runs the whole test suite with ctest: unit, stress, linking, packaging,
# examples, benchmarks as smoke tests, and the RDMA tests inside a soft-RoCE QEMU guest.
# Then the sanitizer suites (CMakePresets.json; docs/robustness.md): the unit and stress tests
# under ASan+UBSan and under TSan, and the libFuzzer target for a bounded time. Each builds the
# library and tests only. PINPOOL_SANITIZERS=0 skips them; PINPOOL_FUZZ_SECONDS sets the fuzzing
# time (default 30 here; 60 for a plain `cmake --preset fuzz`). Arguments go to the main ctest run.
# A failed suite is summed up at the very end (the part of a long log that gets read): the tests
# that failed, each run once more alone with the tail of its output, so the summary says whether a
# failure repeats. The rerun never turns a failure into a pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PINPOOL_BUILD_DIR:-$root/build}
"$root/scripts/setup-deps.sh"
if [ -x "$root/scripts/setup-vm-deps.sh" ]; then "$root/scripts/setup-vm-deps.sh"; fi
"$root/scripts/build.sh"
failed=()
# ctest leaves a run's list of failed tests in place when the next run passes: the summary below
# reads only this run's.
forget_failures() { rm -f "$1/Testing/Temporary/LastTestsFailed.log"; }
forget_failures "$build"
(
  cd "$build"
  # The set-up above installed QEMU: an RDMA test that cannot boot the guest is a failure, not a skip.
  export PINPOOL_REQUIRE_RDMA=1
  ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
) || failed+=(main)

if [ "${PINPOOL_SANITIZERS:-1}" != 0 ]; then
  cd "$root"
  for preset in asan tsan fuzz; do
    start=$(date +%s)
    echo "pinpool: === $preset: configure, build, test ===" >&2
    extra=()
    forget_failures "$root/build-$preset"
    [ "$preset" = fuzz ] && extra=(-DPINPOOL_FUZZ_SECONDS="${PINPOOL_FUZZ_SECONDS:-30}")
    if cmake --preset "$preset" "${extra[@]}" >/dev/null &&
       cmake --build --preset "$preset" --parallel "$(nproc)" &&
       ctest --preset "$preset" --timeout 900 -j "$(nproc)"; then
      echo "pinpool: $preset passed in $(( $(date +%s) - start )) s" >&2
    else
      failed+=("$preset")
    fi
  done
fi

# The failed tests of the suite built in $2, named $1: their names, and one more run of each alone.
summarize() {
  local list=$2/Testing/Temporary/LastTestsFailed.log test tests
  echo "pinpool: === $1: failed tests ===" >&2
  if [ ! -s "$list" ]; then
    echo "pinpool: $1: no test failed: the configure or build step did (see above)" >&2
    return
  fi
  mapfile -t tests < <(cut -d: -f2- "$list")  # read before a rerun rewrites the list
  printf 'pinpool:   %s\n' "${tests[@]}" >&2
  for test in "${tests[@]}"; do
    echo "pinpool: --- $1: $test, once more alone (last 60 lines) ---" >&2
    (cd "$2" && PINPOOL_REQUIRE_RDMA=1 ctest -R "^${test//./\\.}\$" --output-on-failure \
       --timeout 900 2>&1 | tail -n 60) >&2 || true
  done
}

if [ ${#failed[@]} -ne 0 ]; then
  for suite in "${failed[@]}"; do
    case $suite in
      main) summarize main "$build" ;;
      *) summarize "$suite" "$root/build-$suite" ;;
    esac
  done
  echo "pinpool: FAILED: ${failed[*]}" >&2
  exit 1
fi
