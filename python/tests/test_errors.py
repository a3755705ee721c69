"""Every bad input is a typed exception, with pinpool's message: wrong types (TypeError), bad
values (InvalidArgumentError, a ValueError), limits (ResourceExhaustedError, a MemoryError), a
missing name (NotFoundError, a LookupError), use after free or close (FreedError)."""

import os
import resource
import subprocess
import sys
import textwrap

import pytest

import pinpool

from conftest import SMALL


def test_the_hierarchy():
    for cls, builtin in [(pinpool.InvalidArgumentError, ValueError),
                         (pinpool.OutOfRangeError, ValueError),
                         (pinpool.NotFoundError, LookupError),
                         (pinpool.AlreadyExistsError, FileExistsError),
                         (pinpool.PermissionDeniedError, PermissionError),
                         (pinpool.ResourceExhaustedError, MemoryError),
                         (pinpool.FailedPreconditionError, RuntimeError),
                         (pinpool.UnavailableError, ConnectionError),
                         (pinpool.DeadlineExceededError, TimeoutError),
                         (pinpool.UnimplementedError, NotImplementedError),
                         (pinpool.InternalError, RuntimeError),
                         (pinpool.FreedError, ValueError),
                         (pinpool.ForkedError, RuntimeError)]:
        assert issubclass(cls, pinpool.PinpoolError) and issubclass(cls, builtin), cls
    assert pinpool.InvalidArgumentError.code == "INVALID_ARGUMENT"
    assert pinpool.ResourceExhaustedError.code == "RESOURCE_EXHAUSTED"


@pytest.mark.parametrize("text,size", [("4096", 4096), ("64KiB", 64 << 10), ("1 GiB", 1 << 30),
                                       ("1.5GiB", 3 << 29), ("2M", 2 << 20), ("3k", 3072),
                                       ("7B", 7), (" 1Ti ", 1 << 40), (12, 12)])
def test_sizes(text, size):
    assert pinpool.parse_size(text) == size


@pytest.mark.parametrize("text,match", [("1GB", "1024"), ("-1", "negative"), (-1, "negative"),
                                        ("", "no number"), ("1.3B", "whole number"),
                                        ("1XiB", "unknown unit"), ("99999999999T", "2\\^64"),
                                        (2**70, "2\\^64"), ("1.", None)])
def test_bad_sizes(text, match):
    if match is None:
        assert pinpool.parse_size(text) == 1  # "1." is one byte
        return
    with pytest.raises(pinpool.InvalidArgumentError, match=match):
        pinpool.parse_size(text)


@pytest.mark.parametrize("value", [1.5, True, None, b"64", [1]])
def test_size_types(value):
    with pytest.raises(TypeError, match="a size is an int or a string"):
        pinpool.parse_size(value)


def test_numpy_integers_are_sizes():
    import numpy
    assert pinpool.parse_size(numpy.int64(8)) == 8


@pytest.mark.parametrize("args,kwargs,error,match", [
    ((), {}, TypeError, "missing"),
    ((None,), {}, TypeError, "size"),
    ((1.5,), {}, TypeError, "size"),
    ((True,), {}, TypeError, "size"),
    ((-1,), {}, pinpool.InvalidArgumentError, "negative"),
    (("-1",), {}, pinpool.InvalidArgumentError, "negative"),
    ((0,), {}, pinpool.InvalidArgumentError, "at least one byte"),
    ((2**70,), {}, pinpool.InvalidArgumentError, "2\\^64"),
    ((2**63,), {}, pinpool.InvalidArgumentError, "allocate_array"),
    (("64GB",), {}, pinpool.InvalidArgumentError, "GiB"),
    ((64, 3), {}, pinpool.InvalidArgumentError, "power of two"),
    ((64,), {"alignment": 0}, pinpool.InvalidArgumentError, "power of two"),
    ((64,), {"alignment": "1GiB"}, pinpool.InvalidArgumentError, "chunk size"),
    ((64,), {"cls": "nope"}, pinpool.NotFoundError, "no class"),
    ((64,), {"cls": 3}, TypeError, "class name"),
    ((64,), {"colour": 1}, TypeError, "unexpected keyword"),
    ((64, 16), {"alignment": 16}, TypeError, "multiple values"),
    ((64, 16, None, 4), {}, TypeError, "at most 3"),
])
def test_allocate_bad_input(pool, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        pool.allocate(*args, **kwargs)


def test_larger_than_the_largest_block_names_the_fix(pool):
    with pytest.raises(pinpool.InvalidArgumentError) as e:
        pool.allocate(pool.max_block_size + 1)
    assert "Pool.allocate_array" in str(e.value) and "chunk_size" in str(e.value)
    assert pool.allocate(pool.max_block_size).size == pool.max_block_size


def test_a_tensor_larger_than_any_block_is_refused_naming_the_fix():
    """pin_memory's 2.25 GiB tensor: no block is that large (7/8 of a 1 GiB chunk at most)."""
    with pinpool.Pool(budget="4GiB", chunk_size="1GiB") as p:
        with pytest.raises(pinpool.InvalidArgumentError) as e:
            p.allocate("2.25GiB")
        assert "allocate_array" in str(e.value) and "896 MiB" in str(e.value)
        assert p.stats()["mapped_bytes"] == 0  # refused before anything was mapped


def test_the_budget_spent_is_a_memory_error():
    with pinpool.Pool(budget="4MiB", chunk_size="2MiB") as p:
        blocks = []
        with pytest.raises(pinpool.ResourceExhaustedError) as e:
            for _ in range(100):
                blocks.append(p.allocate("1MiB"))
        assert isinstance(e.value, MemoryError)
        assert "budget" in str(e.value)
        assert 2 <= len(blocks) <= 4
        for b in blocks:
            b.free()
        p.allocate("1MiB").free()  # room again


@pytest.mark.parametrize("options,error,match", [
    ({"colour": "red"}, TypeError, "unexpected option"),
    ({"chunk_size": "3MiB"}, pinpool.InvalidArgumentError, "chunk_size"),
    ({"chunk_size": "1MiB"}, pinpool.InvalidArgumentError, "chunk_size"),
    ({"budget": "lots"}, pinpool.InvalidArgumentError, "budget"),
    ({"budget": 1.5}, TypeError, "budget"),
    ({"page_size": "8K"}, pinpool.InvalidArgumentError, "page_size"),
    ({"page_size": 4096}, TypeError, "page_size"),
    ({"numa_node": "x"}, pinpool.InvalidArgumentError, "numa_node"),
    ({"numa_node": 4095}, pinpool.InvalidArgumentError, "node"),
    ({"backing": "nope"}, pinpool.InvalidArgumentError, "backing"),
    ({"backing": 3}, TypeError, "backing"),
    ({"backing": "/nonexistent/dir"}, pinpool.PinpoolError, "nonexistent"),
    ({"domains": [1]}, TypeError, "Domain"),
    ({"classes": ["rx"]}, TypeError, "BufferClass"),
    ({"populate": 1}, TypeError, "True or False"),
    ({"reserve_threads": -1}, pinpool.InvalidArgumentError, "negative"),
    ({"reserve_threads": "2"}, TypeError, "int"),
    ({"initial_size": "128MiB", "budget": "64MiB"}, pinpool.PinpoolError, "budget"),
    ({"classes": [pinpool.BufferClass("a", "64MiB"), pinpool.BufferClass("b", "64MiB")]},
     pinpool.InvalidArgumentError, "reserv"),
])
def test_bad_options(options, error, match):
    kwargs = dict(SMALL)
    kwargs.update(options)
    with pytest.raises(error, match=match):
        pinpool.Pool(**kwargs)


def test_bad_buffer_class():
    with pytest.raises(pinpool.InvalidArgumentError, match="scrub"):
        pinpool.BufferClass("rx", scrub="always")
    with pytest.raises(pinpool.InvalidArgumentError, match="reserved"):
        pinpool.BufferClass("rx", reserved="-1")


def test_memlock_refusal_is_a_memory_error_naming_the_fix(tmp_path):
    """Without CAP_IPC_LOCK, RLIMIT_MEMLOCK (8 MiB) refuses a 64 MiB pool before anything is
    pinned, and says how to raise it. As root the child drops to `nobody` (and so the
    capability); otherwise it runs as this user, whose limit applies."""
    script = tmp_path / "memlock.py"
    script.write_text(textwrap.dedent("""
        import os, resource, sys
        if os.geteuid() == 0:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (8 << 20, 8 << 20))
            os.setgid(65534)
            os.setuid(65534)
        import pinpool
        try:
            pinpool.Pool(budget="256MiB", chunk_size="64MiB", initial_size="64MiB")
        except pinpool.ResourceExhaustedError as e:
            assert isinstance(e, MemoryError)
            print(e)
            sys.exit(0)
        sys.exit("no error")
    """))
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if os.geteuid() != 0 and (soft == resource.RLIM_INFINITY or soft >= 64 << 20):
        pytest.fail("this user may pin 64 MiB: run as root (the test drops to nobody) or with "
                    "RLIMIT_MEMLOCK below 64 MiB")
    env = dict(os.environ)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "RLIMIT_MEMLOCK" in run.stdout and "ulimit -l" in run.stdout, run.stdout


def test_closed_pool(pool):
    pool.close()
    pool.close()  # twice: nothing
    for call in [lambda: pool.allocate(1), lambda: pool.stats(), lambda: pool.reserve(1),
                 lambda: pool.allocate_array(2, 64), lambda: pool.chunk_size]:
        with pytest.raises(pinpool.FreedError, match="closed"):
            call()


@pytest.mark.parametrize("args,error,match", [
    ((0, 64), pinpool.InvalidArgumentError, ""),
    ((4, 0), pinpool.InvalidArgumentError, ""),
    ((4, 64, 3), pinpool.InvalidArgumentError, "power of two"),
    ((4, 64, 128), pinpool.InvalidArgumentError, ""),
    ((4, "4MiB"), pinpool.InvalidArgumentError, ""),  # an element larger than a 2 MiB chunk
    ((100000, "4KiB"), pinpool.ResourceExhaustedError, "budget"),
    (("4", 64), TypeError, "int"),
    ((-4, 64), pinpool.InvalidArgumentError, "negative"),
])
def test_allocate_array_bad_input(pool, args, error, match):
    with pytest.raises(error, match=match):
        pool.allocate_array(*args)


def test_array_misuse(pool):
    a = pool.allocate_array(8, 64)
    with pytest.raises(IndexError):
        a[8]
    with pytest.raises(IndexError):
        a[-9]
    with pytest.raises(TypeError):
        a["1"]
    with pytest.raises(IndexError):
        a.run(1)
    with pytest.raises(pinpool.InvalidArgumentError, match="domain"):
        a.describe([5])
    with pytest.raises(pinpool.InvalidArgumentError):
        a.describe([0], 8)
    with pytest.raises(pinpool.InvalidArgumentError, match="view"):
        a[0].free()
    with pytest.raises(pinpool.InvalidArgumentError, match="whole"):
        a.run_view(0, "f8") if a.element_size % 8 else a.run_view(0, "V3")
    a.free()
    with pytest.raises(pinpool.FreedError):
        a[0]
    with pytest.raises(pinpool.FreedError):
        len(a)


def test_sharing_needs_a_file_backed_pool(pool):
    import socket
    left, right = socket.socketpair()
    with left, right:
        with pytest.raises(pinpool.FailedPreconditionError, match="backing|file"):
            pool.share(left)
        with pool.allocate(64) as b:
            with pytest.raises(pinpool.FailedPreconditionError):
                b.handle
        with pytest.raises(TypeError, match="socket"):
            pool.share("not a socket")


def test_class_errors():
    classes = [pinpool.BufferClass("rx", reserved="2MiB", cap="2MiB")]
    with pinpool.Pool(classes=classes, **SMALL) as p:
        assert p.classes == ["default", "rx"]
        blocks = []
        with pytest.raises(pinpool.ResourceExhaustedError, match="rx"):
            for _ in range(8):
                blocks.append(p.allocate("1MiB", cls="rx"))
        assert isinstance(p.class_error("rx"), pinpool.ResourceExhaustedError)
        assert p.class_error("default") is None
        with pytest.raises(pinpool.NotFoundError):
            p.class_error("tx")
        for b in blocks:
            b.free()
