"""fork(): a child that does not touch pool memory runs and exits normally, and its exit changes
nothing in the parent (registrations, pins, blocks); a child that calls into an inherited pool
object gets ForkedError; a child that touches an inherited view of pool memory (which the child
does not have: chunks are MADV_DONTFORK) dies of SIGSEGV, as docs/python.md says; a fork child
that attaches (the documented way) writes the parent's blocks in place.

Each case runs as a script of its own, so that the child exits through a normal interpreter
shutdown (which runs every destructor) rather than inside pytest."""

import multiprocessing
import os
import subprocess
import sys
import textwrap

import numpy

import pinpool
import workers


def run(script, tmp_path):
    path = tmp_path / "case.py"
    path.write_text(textwrap.dedent(script))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


PARENT = """
    import gc, os, re, signal, sys
    import numpy, pinpool

    def vm_pin():
        with open("/proc/self/status") as f:
            return int(re.search(r"VmPin:\\s+(\\d+)", f.read()).group(1))

    ring = pinpool.IoUringDomain(8)
    pool = pinpool.Pool(budget="64MiB", chunk_size="2MiB", backing="memfd",
                        domains=[ring, pinpool.long_term_pin_domain()])
    block = pool.allocate("1MiB")
    view = numpy.asarray(block)
    view[:] = 5
    array = pool.allocate_array(300, 16384)
    keys, pinned, slots = block.keys, vm_pin(), ring.slots_in_use
"""

CHECK_PARENT = """
    assert (view == 5).all()
    assert block.keys[0].buffer_index == keys[0].buffer_index and ring.slots_in_use == slots
    assert vm_pin() == pinned, (vm_pin(), pinned)
    more = pool.allocate("1MiB")
    numpy.asarray(more)[:] = 6
    assert pool.stats()["live_bytes"] >= 2 << 20
    print("parent ok")
"""


def fork_case(tmp_path, child, expect):
    """The parent's script: make the pool, fork, run `child` (indented code) in the child,
    check the child's wait status with `expect` (an expression of `status`), then the parent."""
    body = textwrap.indent(textwrap.dedent(child), " " * 8)
    r = run(PARENT + f"""
    pid = os.fork()
    if pid == 0:
{body}
    _, status = os.waitpid(pid, 0)
    assert {expect}, status
    """ + CHECK_PARENT, tmp_path)
    assert r.returncode == 0 and "parent ok" in r.stdout, r.stdout + r.stderr


EXITED_0 = "os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0"


def test_a_child_that_does_not_touch_pool_memory_runs_normally(tmp_path):
    fork_case(tmp_path, """
        total = sum(i * i for i in range(200000))  # ordinary work
        del view, block, array, pool, ring  # every inherited object goes
        gc.collect()
        sys.exit(0)  # and the interpreter shuts down: every destructor runs
    """, EXITED_0)


def test_a_child_calling_into_the_pool_gets_forked_error(tmp_path):
    fork_case(tmp_path, """
        calls = [lambda: pool.allocate(64), lambda: pool.stats(), lambda: block.free(),
                 lambda: memoryview(block), lambda: block.address, lambda: array[0],
                 lambda: pool.allocate_array(2, 64), lambda: ring.slots_in_use,
                 lambda: block.__dlpack__()]
        for call in calls:
            try:
                call()
                os._exit(10)
            except pinpool.ForkedError as e:
                assert "attach" in str(e)
        sys.exit(0)
    """, EXITED_0)


def test_a_child_touching_an_inherited_view_dies_of_sigsegv(tmp_path):
    fork_case(tmp_path, """
        view[0] = 1  # the child has no mapping there
        os._exit(0)
    """, "os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV")


def test_a_fork_child_that_attaches_writes_in_place(shared_pool):
    blocks = [shared_pool.allocate("64KiB") for _ in range(4)]
    with pinpool.ShareServer(shared_pool) as server:
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=workers.fill, args=(server.path, b.handle, 0x70 + i))
                 for i, b in enumerate(blocks)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
    for i, b in enumerate(blocks):
        assert (numpy.asarray(b) == 0x70 + i).all()
        b.free()
