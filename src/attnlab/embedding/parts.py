"""The ``OUT.parts/`` folder of a streamed embedding run: its lock, its manifest and its parts.

- **Lock.** ``OUT.parts/lock`` is held with ``fcntl.flock`` by the one process writing the run and
  holds that process's pid (for the message a second writer gets). The kernel releases the lock
  when its holder dies, so a lock left by a killed run is never in the way: a stale pid in the
  file is simply overwritten by the next writer.
- **Manifest.** ``OUT.parts/manifest.json`` records the settings the parts were made with; a resume
  with other settings is refused, and a manifest that is not a JSON object is a one-line error.
- **Parts.** Part ``i`` (sentences ``i*chunk_size ..``) is ``NNNNNN-<text hash>-<sha256>.npy``: the
  hash of the sentences it embeds and the sha256 of the file's own bytes. The name is given by one
  ``os.replace`` of the complete, fsynced file, so the checksum is recorded atomically with the
  part; a resume re-hashes every part it keeps and embeds a damaged one again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from attnlab._io import atomic_write_json, file_sha256, read_json

MANIFEST = "manifest.json"
LOCK = "lock"
VERSION = 2  # 1: parts named NNNNNN-<text hash>.npy, without a checksum
_PART = re.compile(r"^(\d{6})-([0-9a-f]{16})-([0-9a-f]{64})\.npy$")


def _holder(fd: int) -> str:
    """``" (pid N)"`` from a lock file's content, or ``""`` when it names none."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {int(text)})" if text.isdigit() else ""


def _busy(fd: int, output: str) -> ValueError:
    return ValueError(
        f"another attnlab embed{_holder(fd)} is writing output={output}; wait for it or stop it "
        "(a lock left by a killed run is released with it)"
    )


def refuse_if_locked(parts: Path, output: str) -> None:
    """``ValueError`` when another live process holds ``parts/lock`` (checked before the parts
    folder is taken for an interrupted run: a run in progress is not one)."""
    try:
        fd = os.open(parts / LOCK, os.O_RDONLY)
    except OSError:  # no lock file: nobody has written here yet
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(fd, output) from None
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(parts: Path, output: str) -> Iterator[None]:
    """Hold ``parts/lock`` (this pid written inside) while the block runs; ``ValueError`` if a
    live process holds it."""
    parts.mkdir(exist_ok=True)
    fd = os.open(parts / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(fd, output) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def read_manifest(parts: Path) -> dict | None:
    """The interrupted run's manifest (None when there is none); ``ValueError`` in one line when it
    is damaged (not JSON, not an object, nested too deeply, no version) or from another version."""
    mpath = parts / MANIFEST
    if not mpath.exists():
        return None
    try:
        old = read_json(mpath, "resume=True:")
    except ValueError as exc:
        raise ValueError(f"{exc}; pass overwrite=True to start again") from None
    version = old.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(
            f"resume=True: {mpath} is damaged (no manifest version); pass overwrite=True to start again"
        )
    if version != VERSION:
        raise ValueError(
            f"resume=True: {mpath} was written by another attnlab (manifest version {version}, this one "
            f"writes {VERSION}); pass overwrite=True to start again"
        )
    return old


def start(parts: Path, manifest: dict, resume: bool, log) -> None:
    """On ``resume``, refuse a run whose manifest is damaged or whose settings differ from
    ``manifest``; otherwise drop any old part (saying so through ``log`` if there were some) and
    write ``manifest`` atomically. Also removes temporary files a killed write left."""
    for p in parts.glob(".*.tmp*"):
        p.unlink(missing_ok=True)
    old = read_manifest(parts) if resume else None
    if old is not None:
        diff = [k for k in manifest if old.get(k) != manifest[k]]
        if diff:
            raise ValueError(
                f"resume=True: the interrupted run used other settings ({', '.join(diff)}); "
                "pass the same ones, or overwrite=True"
            )
        return
    old_parts = list(parts.glob("[0-9]*.npy"))
    if resume and old_parts:
        log(f"{parts} holds {len(old_parts)} part(s) but no {MANIFEST} to check them by: starting again")
    for p in old_parts:
        p.unlink()
    atomic_write_json(parts / MANIFEST, manifest)


def finished(parts: Path) -> dict[int, Path]:
    """The part files in ``parts`` by index (names that are not a part's are ignored)."""
    found = {}
    for p in parts.glob("[0-9]*.npy"):
        m = _PART.match(p.name)
        if m:
            found[int(m.group(1))] = p
    return found


def kept(parts: Path) -> tuple[int, int]:
    """``(sentences, parts)`` on disk in ``parts`` (rows read from each part's header; a part whose
    header no longer reads is not counted: a resume embeds it again)."""
    rows = []
    for p in finished(parts).values():
        try:
            rows.append(np.load(p, mmap_mode="r").shape[0])
        except (OSError, ValueError):
            continue
    return sum(rows), len(rows)


def text_hash(name: str) -> str:
    """The text hash in a part's file name."""
    return name.split("-")[1]


def intact(path: Path) -> bool:
    """Whether a part's bytes still hash to the sha256 in its name."""
    return file_sha256(path) == _PART.match(path.name).group(3)


def write(parts: Path, index: int, texts_hash: str, array: np.ndarray) -> Path:
    """Write part ``index`` (float32 ``[k, d]``) atomically, its sha256 in its name; its path."""
    buf = io.BytesIO()
    np.save(buf, array)
    data = buf.getvalue()
    path = parts / f"{index:06d}-{texts_hash}-{hashlib.sha256(data).hexdigest()}.npy"
    tmp = parts / f".{index:06d}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
