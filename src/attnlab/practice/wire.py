"""The messages between the grader and the worker: length-prefixed ``.npz`` archives, no pickle.

A call is ``{"__fn__": name, "a0": arg0, ..., "k_mask": mask}``; a reply is ``{"__status__": "ok",
"__n__": n, "r0": ..}`` (``__n__`` = -1 for a single array, else the tuple's length) or
``{"__status__": "error", "__error__": message}``. Integers travel as 0-d arrays and come back as
``int``; ``None`` arguments are left out (every optional argument defaults to ``None``).
"""

from __future__ import annotations

import io
import struct

import numpy as np

HEADER = struct.Struct("<Q")


def send(stream, arrays: dict) -> None:
    """Write one message: 8-byte little-endian length, then the ``.npz`` bytes."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def decode(data: bytes) -> dict:
    """The arrays of one message (``allow_pickle=False``: an object array is refused)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def receive(stream) -> dict | None:
    """Read one message from a blocking stream; ``None`` at end of input."""
    header = _read_exact(stream, HEADER.size)
    if header is None:
        return None
    data = _read_exact(stream, HEADER.unpack(header)[0])
    return None if data is None else decode(data)


def pack_call(name: str, args: tuple, kwargs: dict) -> dict:
    """A call of ``name(*args, **kwargs)`` as arrays (``None`` keyword arguments are left out)."""
    arrays = {"__fn__": np.array(name)}
    arrays.update({f"a{i}": np.asarray(a) for i, a in enumerate(args)})
    arrays.update({f"k_{k}": np.asarray(v) for k, v in kwargs.items() if v is not None})
    return arrays


def _value(a: np.ndarray):
    return int(a) if a.ndim == 0 and a.dtype.kind in "iu" else a


def unpack_call(arrays: dict) -> tuple[str, list, dict]:
    """``(name, args, kwargs)`` of a call made by :func:`pack_call`."""
    n_args = sum(1 for key in arrays if key.startswith("a") and key[1:].isdigit())
    args = [_value(arrays[f"a{i}"]) for i in range(n_args)]
    kwargs = {key[2:]: _value(v) for key, v in arrays.items() if key.startswith("k_")}
    return str(arrays["__fn__"]), args, kwargs


def pack_result(result) -> dict:
    """The learner's return value as arrays; a value that is not numbers raises ``TypeError``."""
    parts = list(result) if isinstance(result, tuple) else [result]
    arrays = {
        "__status__": np.array("ok"),
        "__n__": np.array(len(parts) if isinstance(result, tuple) else -1),
    }
    for i, part in enumerate(parts):
        a = np.asarray(part)
        if a.dtype.kind not in "biufc":
            raise TypeError(f"returned {type(part).__name__} {str(part)[:60]!r}, not an array of numbers")
        arrays[f"r{i}"] = a
    return arrays


def unpack_result(arrays: dict):
    """The value :func:`pack_result` packed: one array or a tuple of arrays."""
    n = int(arrays["__n__"])
    if n < 0:
        return arrays["r0"]
    return tuple(arrays[f"r{i}"] for i in range(n))
