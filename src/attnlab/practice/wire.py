"""The messages between the grader and the worker: a length, a JSON header, raw array bytes.

A message is an 8-byte little-endian length, then its body: a 4-byte length, a JSON object (the
header) and the bytes of its arrays, in the header's order. Each header value is a string, an
integer, or an array written as ``{"dtype": "<f8", "shape": [2, 3]}``. No pickle, no archive:
:func:`decode` checks every length and shape against the bytes that are really there before it
allocates anything, so a reply forged by the learner's code (which can reach the worker's end of
the pipe) fails with one :class:`WireError` line, whatever its bytes.

A call is ``{"fn": name, "a0": arg0, ..., "k_mask": mask}`` (``None`` keyword arguments are left
out); a reply is ``{"status": "ok", "n": n, "r0": ..}`` (``n`` = -1 for a single array, else the
tuple's length), ``{"status": "error" | "import-error", "error": message}``, once the worker is
confined and starts importing the file ``{"status": "importing", "confined": what}``, and once the
file is imported ``{"status": "ready"}``.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

HEADER = struct.Struct("<Q")
META = struct.Struct("<I")
MAX_MESSAGE = 64 << 20  # bytes: the largest array of the exercise is a few KiB
MAX_META = 64 << 10
MAX_DIMS = 8
MAX_TUPLE = 8
MAX_ERROR = 300  # characters of an error message shown to the learner
DTYPES = frozenset(
    np.dtype(t).newbyteorder("<").str
    for t in ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")
)
STATUSES = ("importing", "ready", "import-error", "ok", "error")


class WireError(ValueError):
    """A message that is not one :func:`encode` writes (one line: what is wrong with it)."""


def _array(value) -> np.ndarray:
    a = np.asarray(value)
    dtype = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    if dtype.str not in DTYPES:
        raise TypeError(f"an array of {a.dtype} is not an array of numbers (use float64, float32 or bool)")
    return np.ascontiguousarray(a, dtype=dtype)


def encode(fields: dict) -> bytes:
    """One message: ``fields`` maps names to ``str``, ``int`` or arrays of :data:`DTYPES`."""
    meta, blobs = {}, []
    for key, value in fields.items():
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            meta[key] = value
        else:
            a = _array(value)
            meta[key] = {"dtype": a.dtype.str, "shape": list(a.shape)}
            blobs.append(a.tobytes())
    head = json.dumps(meta).encode()
    body = META.pack(len(head)) + head + b"".join(blobs)
    return HEADER.pack(len(body)) + body


def message_size(header: bytes) -> int:
    """The body length an 8-byte header announces; :class:`WireError` above :data:`MAX_MESSAGE`."""
    n = HEADER.unpack(header)[0]
    if n > MAX_MESSAGE:
        raise WireError(f"a message of {n} bytes (the limit is {MAX_MESSAGE >> 20} MiB)")
    return n


def _field(key: str, spec, body: bytes, offset: int) -> tuple[object, int]:
    """The value of one header entry and the offset after its bytes."""
    if isinstance(spec, str) or (isinstance(spec, int) and not isinstance(spec, bool)):
        return spec, offset
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape"}:
        raise WireError(f"field {key!r} is neither a string, an integer nor an array")
    dtype, shape = spec["dtype"], spec["shape"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise WireError(f"field {key!r} has dtype {str(dtype)[:20]!r}, not a number type")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape)
    ):
        raise WireError(f"field {key!r} has an invalid shape")
    count = math.prod(shape)
    end = offset + count * np.dtype(dtype).itemsize
    if end > len(body):
        raise WireError(f"field {key!r} announces {end - offset} bytes; the message has {len(body) - offset}")
    a = np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
    return a, end


def decode(body: bytes) -> dict:
    """The fields of one message body; :class:`WireError` (one line) for anything malformed."""
    if len(body) < META.size:
        raise WireError(f"a message of {len(body)} bytes")
    n = META.unpack_from(body)[0]
    if n > min(MAX_META, len(body) - META.size):
        raise WireError(f"a header of {n} bytes in a message of {len(body)}")
    try:
        meta = json.loads(body[META.size : META.size + n])
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a header that is not JSON ({str(exc)[:60]})") from None
    if not isinstance(meta, dict):
        raise WireError("a header that is not a JSON object")
    fields, offset = {}, META.size + n
    for key, spec in meta.items():
        fields[key], offset = _field(key, spec, body, offset)
    if offset != len(body):
        raise WireError(f"{len(body) - offset} bytes after the last field")
    return fields


def send(stream, fields: dict) -> None:
    """Write one message to a blocking binary stream."""
    stream.write(encode(fields))
    stream.flush()


def _read_exact(stream, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(stream) -> dict | None:
    """Read one message from a blocking stream; ``None`` at end of input."""
    header = _read_exact(stream, HEADER.size)
    if header is None:
        return None
    data = _read_exact(stream, message_size(header))
    return None if data is None else decode(data)


def pack_call(name: str, args: tuple, kwargs: dict) -> dict:
    """A call of ``name(*args, **kwargs)`` as fields (``None`` keyword arguments are left out)."""
    plain = lambda v: int(v) if isinstance(v, np.integer) else v  # numbers of heads, lengths: ints
    fields = {"fn": name}
    fields.update({f"a{i}": plain(a) for i, a in enumerate(args)})
    fields.update({f"k_{k}": plain(v) for k, v in kwargs.items() if v is not None})
    return fields


def unpack_call(fields: dict) -> tuple[str, list, dict]:
    """``(name, args, kwargs)`` of a call made by :func:`pack_call`."""
    n_args = sum(1 for key in fields if key.startswith("a") and key[1:].isdigit())
    args = [fields[f"a{i}"] for i in range(n_args)]
    kwargs = {key[2:]: v for key, v in fields.items() if key.startswith("k_")}
    return str(fields["fn"]), args, kwargs


def pack_result(result) -> dict:
    """The learner's return value as fields; a value that is not numbers raises ``TypeError``."""
    parts = list(result) if isinstance(result, tuple) else [result]
    if len(parts) > MAX_TUPLE:
        raise TypeError(f"returned a tuple of {len(parts)} values")
    fields: dict = {"status": "ok", "n": len(parts) if isinstance(result, tuple) else -1}
    for i, part in enumerate(parts):
        a = np.asarray(part)
        if a.dtype.kind not in "biufc":
            raise TypeError(f"returned {type(part).__name__} {str(part)[:60]!r}, not an array of numbers")
        fields[f"r{i}"] = _array(a)
    return fields


def _text(value) -> str:
    """An error message for the learner's terminal: printable characters only, at most MAX_ERROR."""
    if not isinstance(value, str):
        raise WireError("an error message that is not a string")
    return "".join(c if c.isprintable() else "?" for c in value[:MAX_ERROR])


def unpack_reply(fields: dict) -> tuple[str, object]:
    """``(status, value)`` of a worker's reply, every field checked: ``value`` is the array or tuple of
    arrays for ``ok``, the message for ``error`` / ``import-error``, what confines the worker for
    ``importing``, ``None`` for ``ready``. :class:`WireError` for anything else."""
    status = fields.get("status")
    if status not in STATUSES:
        raise WireError(f"status {str(status)[:30]!r}")
    if status in ("error", "import-error"):
        if set(fields) != {"status", "error"}:
            raise WireError(f"an {status} reply with the fields {sorted(fields)[:6]}")
        return status, _text(fields["error"])
    if status in ("importing", "ready"):
        if set(fields) != ({"status", "confined"} if status == "importing" else {"status"}):
            raise WireError(f"a {status} reply with the fields {sorted(fields)[:6]}")
        return status, _text(fields["confined"]) if status == "importing" else None
    n = fields.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or not -1 <= n <= MAX_TUPLE:
        raise WireError(f"a result count of {str(n)[:20]}")
    names = ["r0"] if n < 0 else [f"r{i}" for i in range(n)]
    if set(fields) != {"status", "n", *names}:
        raise WireError(f"an ok reply with the fields {sorted(fields)[:6]}")
    if not all(isinstance(fields[k], np.ndarray) for k in names):
        raise WireError("an ok reply whose results are not arrays")
    value = fields["r0"] if n < 0 else tuple(fields[k] for k in names)
    return status, value
