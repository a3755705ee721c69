"""Typed views of pool memory: Block.view and Array.run_view (the C++ side calls these).

numpy and torch are imported here, on the first view that needs them, so that ``import pinpool``
costs neither. Every view shares the block's memory and keeps it allocated while it lives: a numpy
view holds a buffer export of the Block (numpy.frombuffer), a torch view a DLPack tensor of it.
"""

import math

from pinpool._pinpool import InvalidArgumentError

_torch_itemsize = {}


def _is_torch_dtype(dtype):
    t = type(dtype)
    return t.__name__ == "dtype" and t.__module__ == "torch"


def _shape_and_count(shape, itemsize, room, what):
    if shape is None:
        count = room // itemsize
        return (count,), count
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise InvalidArgumentError(f"{what}: shape {shape!r}: non-negative ints")
    count = math.prod(dims)
    if count * itemsize > room:
        raise InvalidArgumentError(
            f"{what}: shape {shape!r} of {itemsize}-byte items is {count * itemsize} bytes; "
            f"the block has {room} from the offset")
    return dims, count


def view(block, dtype="u1", shape=None, offset=0):
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= block.size:
        raise InvalidArgumentError(f"view: offset {offset!r}: an int in [0, {block.size}]")
    room = block.size - offset
    if _is_torch_dtype(dtype):
        import torch
        itemsize = _torch_itemsize.get(dtype)
        if itemsize is None:
            itemsize = _torch_itemsize[dtype] = torch.empty(0, dtype=dtype).element_size()
        dims, count = _shape_and_count(shape, itemsize, room, "view")
        flat = torch.from_dlpack(block)[offset:offset + count * itemsize]
        return flat.view(dtype).reshape(dims)
    import numpy
    dt = numpy.dtype(dtype)
    dims, count = _shape_and_count(shape, dt.itemsize, room, "view")
    return numpy.frombuffer(block, dtype=dt, count=count, offset=offset).reshape(dims)


def as_numpy(block, dtype=None):
    import numpy
    array = numpy.frombuffer(block, dtype=numpy.uint8)
    return array if dtype is None else array.astype(dtype, copy=False)


def run_view(array, r, dtype="u1"):
    import numpy
    dt = numpy.dtype(dtype)
    if array.element_size % dt.itemsize != 0:
        raise InvalidArgumentError(
            f"run_view: elements of {array.element_size} bytes are not whole {dt} items")
    run = array.run(r)
    count = run.size // array.stride
    return numpy.ndarray(shape=(count, array.element_size // dt.itemsize), dtype=dt, buffer=run,
                         strides=(array.stride, dt.itemsize))
