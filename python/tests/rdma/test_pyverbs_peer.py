"""pinpool's Python package as an RDMA server with rdma-core's pyverbs as the peer (soft-RoCE
guest: rxe0). The server holds KV-cache-shaped pages in a pool array, grants them read-only
(RemoteAccess.grant_array: range regions on rxe) and sends the descriptor; the client
(pyverbs_client.py: pyverbs alone, no pinpool library) decodes it with pinpool_descriptor and
RDMA-READs random pages, every byte checked. Then the server frees the array and builds the next
generation in the same chunks: READs through the old descriptor fail with a remote access error
and land no byte, READs through the new one get the new bytes.

Runs only where rxe0 exists (ctest `rdma.python_pyverbs_peer` boots the guest); elsewhere it
skips saying why, unless PINPOOL_REQUIRE_RDMA=1, which makes that a failure."""

import json
import os
import random
import socket
import subprocess
import sys

import numpy
import pytest

import pinpool

HERE = os.path.dirname(os.path.abspath(__file__))
PAGES = 600  # 16 KiB each: 5 runs of 2 MiB chunks
PAGE = 16 << 10


def pattern(page, generation):
    return ((numpy.arange(PAGE, dtype=numpy.uint32) * 7 + page * 131 + generation * 17) % 251
            ).astype(numpy.uint8)


@pytest.fixture(scope="module")
def domain():
    try:
        return pinpool.VerbsDomain("rxe0")
    except pinpool.PinpoolError as e:
        if os.environ.get("PINPOOL_REQUIRE_RDMA") == "1":
            pytest.fail(f"no rxe0 where one is required: {e}")
        pytest.skip(f"no RDMA device rxe0 here ({e}): this test runs in the soft-RoCE guest")


class Peer:
    """The pyverbs client process and its command channel."""

    def __init__(self):
        mine, theirs = socket.socketpair()
        source = os.path.dirname(os.path.dirname(HERE))  # python/: pinpool_descriptor.py only
        env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONPATH": source,
               "PYTHONDONTWRITEBYTECODE": "1"}
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "pyverbs_client.py"),
                                         str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                        env=env)
        theirs.close()
        self.sock = mine
        self.stream = mine.makefile("r")

    def ask(self, **cmd):
        self.sock.sendall((json.dumps(cmd) + "\n").encode())
        line = self.stream.readline()
        assert line, "the pyverbs client died"
        return json.loads(line)

    def connect(self, dom):
        """A fresh QP on each side, connected to each other."""
        theirs = self.ask(op="new_qp")["endpoint"]
        qp = pinpool.RcQueuePair(dom)
        qp.connect({**theirs, "gid": bytes.fromhex(theirs["gid"])})
        mine = dict(qp.endpoint)
        mine["gid"] = mine["gid"].hex()
        assert self.ask(op="connect", peer=mine)["ok"]
        return qp


def fill(array, generation):
    for page in range(len(array)):
        numpy.asarray(array[page])[:] = pattern(page, generation)


def test_a_pyverbs_peer_reads_granted_pages_and_nothing_after_reuse(domain):
    rng = random.Random(42)
    peer = Peer()
    with pinpool.Pool(domains=[domain], budget="64MiB", chunk_size="2MiB") as pool:
        qp = peer.connect(domain)
        access = pinpool.RemoteAccess(pool, qp)
        assert access.mechanism == "region"  # rxe does not enforce window bounds

        cache = pool.allocate_array(PAGES, PAGE, PAGE)
        assert len(cache.runs) == 5
        fill(cache, 1)
        grants = access.grant_array(cache, read=True)
        assert len(grants) == 5 and all(g.mechanism == "region" for g in grants)
        descriptor = pinpool.describe_grants(cache, grants)
        assert len(descriptor) == 40 + 5 * 40  # five runs, one key each: not one entry per page

        # Random pages, and each pair across a run boundary.
        pages = rng.sample(range(PAGES), 48) + [127, 128, 255, 256, 599]
        reply = peer.ask(op="read", descriptor=descriptor.hex(), pages=pages, expect="pattern",
                         generation=1)
        assert reply["ok"], [r for r in reply["results"] if not r["good"]]

        # Evict: free the array (its grants are revoked, the regions deregistered, before its
        # chunks go back), and build the next generation in the same chunks.
        old = [cache[p].address for p in range(PAGES)]
        cache.free()
        access.close()
        fresh = pool.allocate_array(PAGES, PAGE, PAGE)
        fill(fresh, 2)
        reused = {fresh[p].address for p in range(PAGES)} & set(old)
        assert len(reused) > PAGES // 2, "the new generation did not reuse the old pages"

        for page in rng.sample(range(PAGES), 3):  # one connection each: an error ends an RC QP
            qp = peer.connect(domain)
            reply = peer.ask(op="read", descriptor=descriptor.hex(), pages=[page],
                             expect="refused", generation=2)
            assert reply["ok"], f"a stale READ of page {page} was not refused: {reply}"
        assert all(numpy.array_equal(numpy.asarray(fresh[p]), pattern(p, 2))
                   for p in range(PAGES)), "the new generation's bytes changed"

        qp = peer.connect(domain)
        access = pinpool.RemoteAccess(pool, qp)
        grants = access.grant_array(fresh, read=True)
        reply = peer.ask(op="read", descriptor=pinpool.describe_grants(fresh, grants).hex(),
                         pages=rng.sample(range(PAGES), 16), expect="pattern", generation=2)
        assert reply["ok"], reply
        access.close()
        fresh.free()

        # One block, granted and revoked: readable through its grant's (address, rkey, length),
        # refused once revoked, its bytes untouched.
        qp = peer.connect(domain)
        access = pinpool.RemoteAccess(pool, qp)
        with pool.allocate(PAGE) as block:
            numpy.asarray(block)[:] = pattern(7, 3)
            grant = access.grant(block, read=True)
            assert grant.length == PAGE and grant.remote == (grant.address, grant.rkey, PAGE)
            remote = dict(address=grant.address, rkey=grant.rkey, length=grant.length, pages=[7])
            assert peer.ask(op="read_block", expect="pattern", generation=3, **remote)["ok"]
            access.revoke(grant)
            assert access.ended(grant)
            qp = peer.connect(domain)
            assert peer.ask(op="read_block", expect="refused", generation=3, **remote)["ok"]
            assert numpy.array_equal(numpy.asarray(block), pattern(7, 3))
        access.close()
        assert peer.ask(op="quit")["ok"], "the client loaded pinpool's library"
    assert peer.process.wait(60) == 0
