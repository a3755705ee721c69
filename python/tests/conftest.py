"""Fixtures and helpers of the Python package's tests (python/tests/ in
tests/README.md). Run with Debian's interpreter and the build tree's package:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest python/tests

(ctest does that: `ctest --test-dir build -L python`)."""

import os
import re

import pytest

import pinpool

# Small chunks keep every test's pinned memory small: 2 MiB is the smallest chunk a pool takes.
SMALL = dict(budget="64MiB", chunk_size="2MiB")


def proc_status(field):
    """A /proc/self/status figure in kB (VmPin, VmLck, VmRSS)."""
    with open("/proc/self/status") as f:
        m = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) if m else 0


def open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def pool():
    with pinpool.Pool(**SMALL) as p:
        yield p


@pytest.fixture
def shared_pool():
    """A memfd-backed pool: it can be shared and handed over."""
    with pinpool.Pool(backing="memfd", **SMALL) as p:
        yield p
