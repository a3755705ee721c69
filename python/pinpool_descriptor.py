"""The peer's side of pinpool's compact descriptors, in pure Python (the standard library only).

A descriptor tells a peer where every element of an array (or a set of equal blocks) is, in bytes
that grow with the chunk runs, not with the elements (docs/arrays.md). A pool's owner writes one
with ``Array.describe()`` or ``pinpool.describe_grants()``; the peer, which may have nothing of
pinpool but this file (a pyverbs client, say), decodes it here and reads element ``i`` at
``descriptor[i].address`` with ``descriptor[i].keys[0]`` as the rkey of its RDMA work request.

Wire format, version 1 (include/pinpool/descriptor.h has the table): little endian, no padding; a
40-byte header (magic ``PPDS``, version, header bytes, run bytes, key count, run count, element
size, element count, flags) and per run 32 + 8 x keys bytes (base, stride, first element, count,
then one 64-bit key per domain).

``Descriptor.decode`` treats its input as untrusted, as the C++ decoder does, with the same checks
in the same order: the exact length, every size field, runs that number the elements from 0 with
no gap, no empty run, strides at least the element size, no run whose last byte passes 2^64, and
counts that add up. An element it returns always lies inside the runs the descriptor declares.
Whether a key is still valid only the remote device can say (a stale one fails there with a remote
access error).
"""

import bisect
import struct
from dataclasses import dataclass
from typing import Iterator, Tuple, Union

__all__ = [
    "VERSION",
    "HEADER_BYTES",
    "MAX_KEYS",
    "Descriptor",
    "DescriptorError",
    "DescriptorRun",
    "RemoteElement",
    "UnsupportedVersionError",
]

VERSION = 1
HEADER_BYTES = 40
MAX_KEYS = 8  # pinpool::kMaxDomains
_MAGIC = b"PPDS"
_HEADER = struct.Struct("<4sHHHHIQQQ")
_U64 = (1 << 64) - 1


class DescriptorError(ValueError):
    """Bytes that are not a valid descriptor; the message names the first field that is wrong."""


class UnsupportedVersionError(DescriptorError, NotImplementedError):
    """A descriptor of a version this reader does not know (the C++ reader's kUnimplemented)."""


@dataclass(frozen=True)
class DescriptorRun:
    """``count`` elements numbered from ``first``; element ``first + k`` is at ``base + k * stride``."""

    base: int
    stride: int
    first: int
    count: int
    keys: Tuple[int, ...]


@dataclass(frozen=True)
class RemoteElement:
    """One element as the peer addresses it: the remote address, its length and its keys."""

    address: int
    length: int
    keys: Tuple[int, ...]


def _bad(what: str) -> DescriptorError:
    return DescriptorError("descriptor: " + what)


def _run_fits(base: int, stride: int, count: int, element_size: int) -> bool:
    """The run's last byte, base + (count - 1) * stride + element_size - 1, fits 64 bits."""
    return base + (count - 1) * stride + element_size - 1 <= _U64


class Descriptor:
    """A decoded, validated descriptor: ``len(d)`` elements of ``d.element_size`` bytes."""

    __slots__ = ("element_size", "key_count", "runs", "_size", "_firsts", "_uniform")

    def __init__(self, element_size: int, key_count: int, runs: Tuple[DescriptorRun, ...]):
        self.element_size = element_size
        self.key_count = key_count
        self.runs = runs
        self._size = runs[-1].first + runs[-1].count
        self._firsts = [r.first for r in runs]
        # An array's runs (or a subrange's) hold the same count but the first and the last, which
        # hold no more: then the run of an element is one division away.
        self._uniform = 0
        if len(runs) >= 3:
            self._uniform = runs[1].count
            for r in range(1, len(runs)):
                c = runs[r].count
                if (c != self._uniform) if r + 1 < len(runs) else (c > self._uniform):
                    self._uniform = 0
                    break

    @classmethod
    def decode(cls, data: Union[bytes, bytearray, memoryview]) -> "Descriptor":
        """Decodes and checks ``data``. DescriptorError (a ValueError) naming the first wrong
        field; UnsupportedVersionError (also a NotImplementedError) for another version."""
        data = bytes(data)
        if len(data) < HEADER_BYTES:
            raise _bad(f"{len(data)} bytes, shorter than the {HEADER_BYTES}-byte header")
        magic, version, header, run_bytes, keys, runs, element_size, elements, flags = (
            _HEADER.unpack_from(data, 0))
        if magic != _MAGIC:
            raise _bad("not a descriptor (magic)")
        if version != VERSION:
            raise UnsupportedVersionError(
                f"descriptor: version {version}; this reader knows version {VERSION}")
        if header != HEADER_BYTES:
            raise _bad(f"header of {header} bytes")
        if keys == 0 or keys > MAX_KEYS:
            raise _bad(f"{keys} keys per run")
        if run_bytes != 32 + 8 * keys:
            raise _bad(f"runs of {run_bytes} bytes for {keys} keys")
        if flags != 0:
            raise _bad(f"flags {flags:#x} (none are defined)")
        if runs == 0:
            raise _bad("no runs")
        if element_size == 0:
            raise _bad("element size 0")
        if len(data) != HEADER_BYTES + runs * run_bytes:
            raise _bad(f"{len(data)} bytes for {runs} runs of {run_bytes} bytes")
        run_format = struct.Struct(f"<4Q{keys}Q")
        decoded = []
        next_element = 0
        for r in range(runs):
            fields = run_format.unpack_from(data, HEADER_BYTES + r * run_bytes)
            base, stride, first, count = fields[:4]
            if count == 0:
                raise _bad(f"run {r} has no elements")
            if first != next_element:
                raise _bad(f"run {r} starts at element {first}, not {next_element}")
            if stride < element_size:
                raise _bad(f"run {r}: stride {stride} below the element size {element_size}")
            if not _run_fits(base, stride, count, element_size):
                raise _bad(f"run {r} passes the end of the address space")
            next_element += count
            if next_element > _U64:
                raise _bad(f"run {r}: the element count overflows")
            decoded.append(DescriptorRun(base, stride, first, count, tuple(fields[4:])))
        if next_element != elements:
            raise _bad(f"the runs hold {next_element} elements, the header says {elements}")
        return cls(element_size, keys, tuple(decoded))

    def __len__(self) -> int:
        return self._size

    @property
    def size(self) -> int:
        """Elements (as ``len``)."""
        return self._size

    def _run_of(self, i: int) -> DescriptorRun:
        runs = self.runs
        if i < runs[0].count:
            return runs[0]
        if self._uniform:
            return runs[1 + (i - runs[0].count) // self._uniform]
        return runs[bisect.bisect_right(self._firsts, i) - 1]

    def element(self, i: int) -> RemoteElement:
        """Element ``i`` (negative counts from the end); IndexError outside the descriptor."""
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"descriptor indices are ints, not {type(i).__name__}")
        at = i + self._size if i < 0 else i
        if not 0 <= at < self._size:
            raise IndexError(f"element {i} of a descriptor of {self._size}")
        run = self._run_of(at)
        return RemoteElement(run.base + (at - run.first) * run.stride, self.element_size,
                             run.keys)

    __getitem__ = element

    def __iter__(self) -> Iterator[RemoteElement]:
        for run in self.runs:
            for k in range(run.count):
                yield RemoteElement(run.base + k * run.stride, self.element_size, run.keys)

    def __repr__(self) -> str:
        return (f"<pinpool Descriptor: {self._size} elements of {self.element_size} bytes in "
                f"{len(self.runs)} runs, {self.key_count} key(s) each>")
