#!/usr/bin/env bash
# Runs the RDMA examples where a device exists (ctest `example.rdma_in_guest`, through
# scripts/softroce/ctest-in-guest.sh)
# and checks that they used it:
#   1. rdma_loopback must move its message by RDMA WRITE and READ ("rdma_loopback: OK");
#   2. the demo must have picked the verbs domain ("domain: <dev>/pd<n> (verbs, ...)") and print
#      an lkey and rkey for each block;
#   3. file_to_peer must READ_FIXED a file into a block and RDMA WRITE it to another, identical;
#   4. block_server must serve its requests through grants and show the timed-out request's late
#      WRITE refused with the block's next owner untouched.
#
#   examples/run-rdma-examples.sh RDMA_LOOPBACK DEMO FILE_TO_PEER BLOCK_SERVER
#
# Exit status: 0 both did; 1 otherwise (the output says which).
set -euo pipefail

readonly usage="usage: run-rdma-examples.sh RDMA_LOOPBACK DEMO FILE_TO_PEER BLOCK_SERVER"
loopback=${1:?$usage}
demo=${2:?$usage}
file_to_peer=${3:?$usage}
block_server=${4:?$usage}
# shellcheck source=../scripts/lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/harness.sh" run-rdma-examples  # sets repo

out=$("$loopback") || fail "rdma_loopback exited $?"
printf '%s\n' "$out"
grep -q '^rdma_loopback: OK' <<<"$out" || fail "rdma_loopback did not report OK"

out=$("$demo") || fail "the demo exited $?"
printf '%s\n' "$out"
grep -Eq '^domain: [^ ]+/pd[0-9]+ \(verbs' <<<"$out" || fail "the demo did not use the verbs domain"
keyed=$(grep -cE '^[0-9]+ +0x[0-9a-f]+ +0x[0-9a-f]+ +0x[0-9a-f]+ ' <<<"$out" || true)
[ "$keyed" -eq 4 ] || fail "the demo printed lkey and rkey for $keyed blocks, not 4"
out=$("$file_to_peer") || fail "file_to_peer exited $?"
printf '%s\n' "$out"
grep -q '^RDMA WRITE .*: identical$' <<<"$out" || fail "file_to_peer did not RDMA-write the file"
for mechanism in auto window; do
  out=$("$block_server" "$mechanism") || fail "block_server $mechanism exited $?"
  printf '%s\n' "$out"
  grep -q '^block_server: OK' <<<"$out" || fail "block_server $mechanism did not report OK"
  grep -q "late WRITE through the revoked grant: remote access error; .* is untouched" <<<"$out" ||
    fail "block_server $mechanism did not show the stale WRITE refused"
done
grep -Eq "OK: 8 grants, [1-9][0-9]* revoked by the peer" <<<"$out" ||
  fail "block_server window: the client's SEND_WITH_INV revoked nothing"
echo "run-rdma-examples: rdma_loopback moved its data, the demo used the verbs domain, file_to_peer" \
  "moved a file to a peer block, block_server's stale grant was refused"
