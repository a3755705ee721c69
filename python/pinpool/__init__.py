"""pinpool: registered memory for RDMA and other kernel-bypass I/O, from Python.

A Pool maps large chunks once, registers each once with every domain (an RDMA protection domain,
an io_uring buffer table, or a long-term pin without a device), and hands out Blocks that carry
their keys, with no system call and no registration per block. A Block is a zero-copy numpy array
or torch tensor (the buffer protocol, DLPack), and its memory never goes back to the pool while a
view of it lives. Arrays of equal pages span many chunks and are described to peers in a few
bytes per chunk; grants give one peer one block or array, until revoked. File-backed pools are
shared with worker processes, which write blocks in place, and handed over to a successor.

    import numpy, pinpool
    with pinpool.Pool(budget="256MiB", chunk_size="64MiB") as pool:
        with pool.allocate("1MiB") as block:
            numpy.asarray(block)[:] = 7          # the pool's memory, no copy
            print(block.keys)

docs/python.md is the guide: lifetimes, the GIL, fork, sharing, the DataLoader recipe, install.
"""

from pinpool._pinpool import (
    OPENMETRICS_CONTENT_TYPE,
    AlreadyExistsError,
    Array,
    Block,
    BlockHandle,
    BufferClass,
    DeadlineExceededError,
    Domain,
    FailedPreconditionError,
    ForkedError,
    FreedError,
    Grant,
    InternalError,
    InvalidArgumentError,
    IoUringDomain,
    Keys,
    Location,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PinpoolError,
    Pool,
    RcQueuePair,
    RemoteAccess,
    ResourceExhaustedError,
    Run,
    UnavailableError,
    UnimplementedError,
    VerbsDomain,
    __version__,
    describe_grants,
    long_term_pin_domain,
    parse_size,
    resident_domain,
)
from pinpool._sharing import Attachment, ShareServer, attach
from pinpool_descriptor import (
    Descriptor,
    DescriptorError,
    DescriptorRun,
    RemoteElement,
    UnsupportedVersionError,
)

__all__ = [
    "AlreadyExistsError",
    "Array",
    "Attachment",
    "Block",
    "BlockHandle",
    "BufferClass",
    "DeadlineExceededError",
    "Descriptor",
    "DescriptorError",
    "DescriptorRun",
    "Domain",
    "FailedPreconditionError",
    "ForkedError",
    "FreedError",
    "Grant",
    "InternalError",
    "InvalidArgumentError",
    "IoUringDomain",
    "Keys",
    "Location",
    "NotFoundError",
    "OPENMETRICS_CONTENT_TYPE",
    "OutOfRangeError",
    "PermissionDeniedError",
    "PinpoolError",
    "Pool",
    "RcQueuePair",
    "RemoteAccess",
    "RemoteElement",
    "ResourceExhaustedError",
    "Run",
    "ShareServer",
    "UnavailableError",
    "UnimplementedError",
    "UnsupportedVersionError",
    "VerbsDomain",
    "__version__",
    "attach",
    "describe_grants",
    "long_term_pin_domain",
    "parse_size",
    "resident_domain",
]
