"""The pure-Python descriptor decoder (pinpool_descriptor.py): what the C++ encoder writes, and
every malformed input refused with the field named (the checks of the C++ decoder, in its order).
The decoder runs without pinpool's library: a peer needs only that one file."""

import os
import struct
import subprocess
import sys

import pytest

import pinpool_descriptor as pd
from pinpool_descriptor import Descriptor, DescriptorError, UnsupportedVersionError

U64 = (1 << 64) - 1


def encode(element_size, runs, keys=1, version=1, header=40, run_bytes=None, flags=0,
           elements=None, run_count=None):
    """A descriptor with any field as asked (runs: (base, stride, first, count, [keys]))."""
    run_bytes = 32 + 8 * keys if run_bytes is None else run_bytes
    elements = sum(r[3] for r in runs) if elements is None else elements
    run_count = len(runs) if run_count is None else run_count
    out = struct.pack("<4sHHHHIQQQ", b"PPDS", version, header, run_bytes, keys, run_count,
                      element_size, elements, flags)
    for base, stride, first, count, *k in runs:
        k = k[0] if k else [0x1000 + first] * keys
        out += struct.pack(f"<4Q{len(k)}Q", base, stride, first, count, *k)
    return out


def test_uniform_runs():
    runs = [(0x10000, 64, 0, 3), (0x20000, 64, 3, 5), (0x30000, 64, 8, 5), (0x40000, 64, 13, 2)]
    d = Descriptor.decode(encode(48, runs))
    assert len(d) == d.size == 15 and d.element_size == 48 and d.key_count == 1
    assert d[0].address == 0x10000 and d[2].address == 0x10000 + 128
    assert d[3].address == 0x20000 and d[7].address == 0x20000 + 4 * 64
    assert d[14].address == 0x40000 + 64 and d[-1] == d[14]
    assert d[9].keys == (0x1000 + 8,) and d[9].length == 48
    assert [e.address for e in d] == [d[i].address for i in range(15)]


def test_irregular_runs_and_several_keys():
    runs = [(0x1000, 8, 0, 1, [1, 2]), (0x2000, 8, 1, 10, [3, 4]), (0x3000, 16, 11, 1, [5, 6]),
            (0x4000, 8, 12, 7, [7, 8])]
    d = Descriptor.decode(encode(8, runs, keys=2))
    assert d[0].keys == (1, 2) and d[1].keys == (3, 4) and d[11].address == 0x3000
    assert d[12].address == 0x4000 and d[18].address == 0x4000 + 6 * 8 and d[18].keys == (7, 8)
    with pytest.raises(IndexError):
        d[19]
    with pytest.raises(IndexError):
        d[-20]
    with pytest.raises(TypeError):
        d["1"]


RUN = (0x1000, 64, 0, 4)


@pytest.mark.parametrize("data,match", [
    (b"", "shorter than the 40-byte header"),
    (encode(64, [RUN])[:39], "shorter"),
    (b"XXXX" + encode(64, [RUN])[4:], "magic"),
    (encode(64, [RUN], header=48), "header of 48"),
    (encode(64, [RUN], keys=0, run_bytes=40), "0 keys"),
    (encode(64, [(0x1000, 64, 0, 4, [0] * 9)], keys=9), "9 keys"),
    (encode(64, [RUN], run_bytes=48), "runs of 48 bytes for 1 keys"),
    (encode(64, [RUN], flags=1), "flags"),
    (encode(64, [], run_count=0), "no runs"),
    (encode(0, [RUN]), "element size 0"),
    (encode(64, [RUN]) + b"\0", "bytes for 1 runs"),
    (encode(64, [RUN])[:-1], "bytes for 1 runs"),
    (encode(64, [RUN], run_count=2), "bytes for 2 runs"),
    (encode(64, [(0x1000, 64, 0, 0)]), "run 0 has no elements"),
    (encode(64, [RUN, (0x2000, 64, 5, 1)]), "run 1 starts at element 5, not 4"),
    (encode(64, [(0x1000, 63, 0, 4)]), "stride 63 below the element size 64"),
    (encode(64, [(U64 - 100, 64, 0, 4)]), "passes the end of the address space"),
    (encode(1, [(0, 1, 0, 1 << 63), (0, 1, 1 << 63, 1 << 63)], elements=0),
     "run 1: the element count overflows"),
    (encode(64, [RUN], elements=5), "the runs hold 4 elements, the header says 5"),
])
def test_malformed(data, match):
    with pytest.raises(DescriptorError, match=match) as e:
        Descriptor.decode(data)
    assert isinstance(e.value, ValueError) and str(e.value).startswith("descriptor: ")


def test_another_version():
    with pytest.raises(UnsupportedVersionError, match="version 2") as e:
        Descriptor.decode(encode(64, [RUN], version=2))
    assert isinstance(e.value, NotImplementedError)


def test_the_decoder_needs_no_library():
    """A peer imports the decoder with nothing of pinpool's library on its path."""
    source = os.path.dirname(os.path.abspath(pd.__file__))
    code = ("import sys, pinpool_descriptor as d; "
            "assert not any(m.startswith('pinpool') and m != 'pinpool_descriptor' "
            "for m in sys.modules), sorted(sys.modules); print(d.VERSION)")
    run = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": source}, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "1", run.stderr
