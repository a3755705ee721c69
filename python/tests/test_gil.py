"""The GIL is released in every call that can wait: while one thread is inside such a call, another
Python thread keeps running. Measured as the longest pause of a spinning thread during the call:
with the GIL held the spinner stops for the whole call, with it released it never stops for long.

How long "long" is depends on the interpreter's switch interval: a thread waiting for the GIL gets
it within one interval, so with the GIL released the spinner stops only while the calling thread
converts arguments and takes the GIL back, at most an interval or two. The tests set the interval
to 0.5 ms (the default is 5 ms), so a call of 10 ms already tells the two apart (held: the spinner
stops for all of it; released: for about a millisecond), and the calls below take 15-60 ms here.
Measured in one test process alone on the machine (ctest RUN_SERIAL): another process that takes
the second CPU could stop the spinner for longer than any GIL would.
"""

import socket
import sys
import threading
import time

import pytest

import pinpool

BIG = dict(budget="512MiB", chunk_size="64MiB", page_size="4K")
SWITCH_INTERVAL = 0.0005
SHORTEST = 0.010  # a call shorter than this cannot be told apart


@pytest.fixture(autouse=True)
def short_switch_interval():
    saved = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    yield
    sys.setswitchinterval(saved)


class Spinner:
    """A thread that runs Python code and records its longest pause while `watching`."""

    def __init__(self):
        self.watching = False
        self.longest = 0.0
        self._stop = False
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self):
        last = time.perf_counter()
        while not self._stop:
            now = time.perf_counter()
            if self.watching and now - last > self.longest:
                self.longest = now - last
            last = now

    def stop(self):
        self._stop = True
        self._thread.join()


def longest_pause(call):
    """(the spinner's longest pause during call(), the call's time, its result)"""
    spinner = Spinner()
    try:
        time.sleep(0.02)
        spinner.watching = True
        start = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - start
        spinner.watching = False
    finally:
        spinner.stop()
    return spinner.longest, elapsed, result


def assert_released(call, what):
    pause, elapsed, result = longest_pause(call)
    assert elapsed >= SHORTEST, f"{what} took {elapsed * 1e3:.1f} ms: too quick to tell"
    assert pause < elapsed / 2, (
        f"{what}: another thread stopped for {pause * 1e3:.1f} ms of {elapsed * 1e3:.1f} ms "
        "(the GIL was held)")
    return result


def test_create():
    p = assert_released(lambda: pinpool.Pool(initial_size="256MiB", **BIG), "Pool()")
    p.close()


def test_reserve():
    with pinpool.Pool(**BIG) as p:
        assert_released(lambda: p.reserve("256MiB"), "reserve")


def test_allocate_that_grows():
    with pinpool.Pool(**BIG) as p:
        b = assert_released(lambda: p.allocate("48MiB"), "allocate (growth)")
        b.free()


def test_allocate_array_that_grows():
    with pinpool.Pool(**BIG) as p:
        a = assert_released(lambda: p.allocate_array(4096, "64KiB"), "allocate_array")
        a.free()


def test_stats_and_trim():
    with pinpool.Pool(**BIG) as p:
        p.reserve("512MiB")  # the whole budget
        assert_released(lambda: p.trim(), "trim")


def test_attachment_waits_without_the_gil():
    """Attachment(sock) blocks until the owner shares; the owner runs in another Python thread of
    the same process, so with the GIL held it never would, and the attachment never returns."""
    with pinpool.Pool(backing="memfd", **BIG) as p:
        p.reserve("64MiB")
        left, right = socket.socketpair()
        got = {}
        t = threading.Thread(target=lambda: got.update(a=pinpool.Attachment(right)))
        t.start()
        time.sleep(0.2)  # the attachment waits in recvmsg
        p.share(left)
        t.join(60)
        assert not t.is_alive(), "Attachment() held the GIL while it waited"
        assert got["a"].chunks_mapped == 1
        got["a"].close()
        left.close()
        right.close()


def test_close_while_another_thread_is_inside_a_call():
    """A call that released the GIL holds the pool: close() on another thread meanwhile ends the
    Pool object's use at once and leaves the destruction to that call's end."""
    p = pinpool.Pool(**BIG)
    t = threading.Thread(target=lambda: p.reserve("256MiB"))
    t.start()
    time.sleep(0.01)
    p.close()  # reserve is still mapping and pinning
    t.join(60)
    assert not t.is_alive() and p.closed
    with pytest.raises(pinpool.FreedError):
        p.reserve("2MiB")
