"""Atomic file writes: a reader never sees a half-written file; and JSON that is always JSON.

Each write goes to a temporary file in the same folder, is flushed and fsynced, then renamed over
the target with ``os.replace`` (atomic on POSIX). :func:`dumps_json` is what every ``--json``
prints: a NaN or an infinity becomes ``null`` (Python's ``json.dumps`` would print a bare ``NaN``,
which no strict parser accepts).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically. A ``path`` that exists and is not a regular file (a
    device such as ``/dev/null``, a pipe, a socket) is a ``ValueError``: renaming over it would
    replace the device itself with a file (run as root, ``/dev/null`` stopped being one)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file (a device, a pipe or a socket)"
        raise ValueError(f"{path} exists and is {kind}; give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def finite_or_none(obj):
    """``obj`` (nested dicts, lists and tuples) with every non-finite float (NaN, +-inf, NumPy's
    included) replaced by None; everything else as it is."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def dumps_json(obj, **kw) -> str:
    """``json.dumps(obj, **kw)`` that is valid JSON (RFC 8259) whatever ``obj`` holds: non-finite
    floats are written as ``null`` (:func:`finite_or_none`). Every ``--json`` output uses it."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kw)


def read_json(path: str | os.PathLike, what: str = "", *, kind: type | None = dict):
    """The JSON value in ``path`` (a state file attnlab resumes from: a manifest, a pointer, a lock).

    Anything but valid JSON of the expected ``kind`` (``dict`` by default; None: any value) is one
    ``ValueError`` naming the file and what is wrong: unreadable, not UTF-8, not JSON, nested too
    deeply for the parser (``[[[...]]]`` 100,000 deep: a ``RecursionError`` inside ``json``), or a
    list / number where an object belongs. ``what`` names the file's role in the message."""
    name = f"{what} {path}" if what else str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
        value = json.loads(text)
    except FileNotFoundError:
        raise ValueError(f"{name} does not exist") from None
    except OSError as exc:
        raise ValueError(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name} is damaged (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is damaged (not valid JSON: {exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError(f"{name} is damaged (JSON nested too deeply to read)") from None
    if kind is not None and not isinstance(value, kind):
        want = "a JSON object" if kind is dict else f"a JSON {kind.__name__}"
        raise ValueError(f"{name} is damaged (holds a JSON {_json_kind(value)}, not {want})")
    return value


def _json_kind(value) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean or null."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 (hex) of a file's bytes, read 1 MiB at a time (token files and weights can be
    large): how checkpoints, text runs and embedding parts verify what they wrote."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def check_out_path(out, what: str = "out", *, folder: bool = True) -> Path:
    """``out`` as a Path, checked before any work starts: a ``ValueError`` naming the argument ``what``
    (as ``what=PATH``, which a command turns into its flag) when it is
    empty, has a name longer than the file system allows, lies under a file, is the wrong kind
    (a file where a folder is wanted or the reverse, or a device or pipe where a file is wanted) or
    is in a folder that is not writable."""
    text = os.fspath(out) if out is not None else ""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what}= must name a {'folder' if folder else 'file'}, got an empty path")
    path = Path(text)
    for name in path.parts:
        if len(name.encode("utf-8", "surrogateescape")) > 255:
            raise ValueError(f"{what}=: the name {name[:40]!r}... is longer than 255 bytes")
    try:
        exists = path.exists()
    except OSError as exc:  # e.g. a path longer than PATH_MAX
        raise ValueError(f"{what}={text[:60]!r}: {exc.strerror or exc}") from None
    if exists and folder and not path.is_dir():
        raise ValueError(f"{what}={path} exists and is not a folder")
    if exists and not folder and path.is_dir():
        raise ValueError(f"{what}={path} is a folder; give a file name")
    if exists and not folder and not path.is_file():  # /dev/null, a pipe: a write would replace it
        raise ValueError(f"{what}={path} exists and is not a regular file; give a file name")
    parent = path if folder else path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{what}={path}: {parent} is a file, so nothing can be written under it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{what}={path}: {parent} is not writable")
    probe = parent / f".attnlab-write-test-{os.getpid()}"
    try:  # os.access says yes to root even on a read-only mount: try it
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"{what}={path}: cannot write in {parent} ({exc.strerror or exc})") from None
    return path
