"""The run folder ``--out DIR``: whose it is, who is writing it, and what a killed run left behind.

- **Ownership.** attnlab writes ``DIR/attnlab-run.json`` (the marker) before anything else. A folder
  that holds files but no marker belongs to someone else (a Hugging Face model folder, the current
  folder) and is never written into. A folder with the marker and a checkpoint is continued only
  with ``resume`` or replaced only with ``overwrite``.
- **One writer.** ``DIR/.attnlab.lock`` holds the writer's pid, created exclusively; a second writer
  is refused with that pid, and a lock whose process is gone (killed) is taken over.
- **Leftovers.** A run killed while writing leaves ``.ckpt-tmp-*`` folders and ``.*.tmp`` files:
  they are removed on the next start. A run killed before its first pointer was written, but after
  a checkpoint folder was completed, resumes from that folder.
- **Staging.** A text run prepares its corpus in a ``.attnlab-text-*`` folder beside ``DIR``
  (:func:`staging_folder`, its owner's pid inside); one left by a killed run (owner gone, folder
  older than this process) is removed at the next start.
- **Writability** is checked before any work starts.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from attnlab import _io
from attnlab._io import atomic_write_json

MARKER = "attnlab-run.json"
LOCK = ".attnlab.lock"
# what attnlab itself writes at the top of a run folder (anything else there is left alone)
OWN_FILES = ("latest.json", "config.json", "model.safetensors", MARKER)
# a text run's tokenizer and token files (attnlab.training.text_data.FILES), written once at step 0
TEXT_FILES = ("tokenizer.json", "train.bin", "val.bin", "val-chars.bin", "text.json")


def check_out_path(out, what: str = "out_dir") -> Path:
    """A run folder's path, checked before any work (see :func:`attnlab._io.check_out_path`)."""
    return _io.check_out_path(out, what, folder=True)


def is_attnlab_run(path: Path) -> bool:
    return (path / MARKER).is_file()


def foreign_files(path: Path) -> list[str]:
    """Names in ``path`` that attnlab did not write there (empty for a run folder or a new one)."""
    if not path.is_dir() or is_attnlab_run(path):
        return []
    return sorted(p.name for p in path.iterdir() if not _ours(p.name))


def _ours(name: str) -> bool:
    """The lock, or what an interrupted write of attnlab's own files leaves (``.NAME.xxxx.tmp``)."""
    if name == LOCK or name.startswith((".ckpt-tmp-", ".attnlab-write-test-")):
        return True
    if _partial_text_file(name):
        return True
    return name.endswith(".tmp") and any(name.startswith(f".{own}.") for own in OWN_FILES)


def _partial_text_file(name: str) -> bool:
    """What an interrupted write of a text run's files leaves: ``train.bin.partial``,
    ``.tokenizer.json.partial``."""
    return name.endswith(".partial") and name.removesuffix(".partial").lstrip(".") in TEXT_FILES


def refuse_foreign(path: Path) -> None:
    """``ValueError`` when ``path`` holds files attnlab did not write (nothing is written)."""
    strangers = foreign_files(path)
    if strangers:
        shown = ", ".join(strangers[:4]) + (", ..." if len(strangers) > 4 else "")
        raise ValueError(
            f"out_dir={path} holds files attnlab did not write ({shown}); choose an empty or new folder"
        )


def claim(path: Path) -> None:
    """Make ``path`` an attnlab run folder (create it, write the marker); refuse someone else's."""
    refuse_foreign(path)
    path.mkdir(parents=True, exist_ok=True)
    if not is_attnlab_run(path):
        atomic_write_json(path / MARKER, {"attnlab": "training run folder", "format": 1})


def clean_leftovers(path: Path) -> list[str]:
    """Remove what interrupted writes left (``.ckpt-tmp-*`` folders, ``.*.tmp`` files); their names."""
    removed = []
    if not path.is_dir():
        return removed
    for p in path.iterdir():
        if p.is_dir() and p.name.startswith(".ckpt-tmp-"):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        elif p.is_file() and (
            (p.name.startswith(".") and p.name.endswith(".tmp"))
            or p.name.startswith(".attnlab-write-test-")
            or _partial_text_file(p.name)
        ):
            p.unlink(missing_ok=True)
            removed.append(p.name)
    return removed


def clear_run(path: Path) -> None:
    """Delete a run's checkpoints and top-level model (``overwrite``); the marker stays."""
    for p in path.iterdir():
        if p.is_dir() and (p.name.startswith("ckpt-") or p.name.startswith(".ckpt-tmp-")):
            shutil.rmtree(p)
        elif (p.name in OWN_FILES and p.name != MARKER) or p.name in TEXT_FILES:
            p.unlink()


def remove_unused(path: Path) -> None:
    """Delete the run folder ``path`` when it holds nothing but the marker, the lock and what
    interrupted writes leave (a start that failed before its first checkpoint)."""
    if not path.is_dir() or not is_attnlab_run(path):
        return
    clean_leftovers(path)
    if all(p.name in (MARKER, LOCK) for p in path.iterdir()):
        shutil.rmtree(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or no pid at all (a damaged lock)
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@contextlib.contextmanager
def writer_lock(path: Path, what: str = "run") -> Iterator[None]:
    """Hold ``path/.attnlab.lock`` (pid inside) while the block runs; refuse a live other holder."""
    path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(_io.read_json(lock)["pid"])
            except (ValueError, KeyError, TypeError, OverflowError):  # unreadable, not ours: stale
                pid = -1
            if pid > 0 and pid != os.getpid() and _alive(pid):
                raise ValueError(
                    f"another attnlab process (pid {pid}) is writing the {what} in {path}; "
                    f"wait for it or stop it (a lock left by a killed process is taken over)"
                ) from None
            lock.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "since": time.time()}, f)
        break
    else:  # pragma: no cover - three races lost in a row
        raise ValueError(f"could not take the lock {lock}")
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            if _io.read_json(lock).get("pid") == os.getpid():
                lock.unlink()


def disk_error(exc: OSError, path: Path) -> ValueError:
    """An ``OSError`` from writing under ``path`` as a one-line ``ValueError``."""
    reason = {errno.ENOSPC: "the disk is full", errno.EACCES: "permission denied", errno.EROFS: "read-only"}
    return ValueError(f"cannot write in {path}: {reason.get(exc.errno, exc.strerror or str(exc))}")


__all__ = [
    "LOCK",
    "MARKER",
    "check_out_path",
    "claim",
    "clean_leftovers",
    "clear_run",
    "disk_error",
    "foreign_files",
    "refuse_foreign",
    "remove_unused",
    "is_attnlab_run",
    "writer_lock",
]


STAGING = ".attnlab-text-"  # prefix of a text run's staging folder, beside its run folder
_OWNER = "owner.json"
_STARTED = time.time()  # (about) when this process started: a staging folder newer than it is live


@contextlib.contextmanager
def staging_folder(parent: str | None, log=None) -> Iterator[str]:
    """A fresh staging folder in ``parent`` (the system's temporary folder when None), removed when
    the block ends; its owner's pid is written inside. First, the stale ones a killed run left in
    ``parent`` (owner not alive, folder older than this process) are removed, each named to ``log``."""
    if parent is not None:
        for name in remove_stale_staging(Path(parent)):
            if log is not None:
                log(f"removed {name}, the staging folder of a killed text run (a copy of its corpus)")
    with tempfile.TemporaryDirectory(prefix=STAGING, dir=parent) as tmp:
        atomic_write_json(Path(tmp) / _OWNER, {"pid": os.getpid(), "since": time.time()})
        yield tmp


def remove_stale_staging(parent: Path) -> list[str]:
    """Remove the ``.attnlab-text-*`` folders in ``parent`` whose owner (the pid inside) is gone and
    that are older than this process; returns their paths. A folder without an owner (an older
    attnlab's) is removed once a day old."""
    removed = []
    for folder in sorted(parent.glob(STAGING + "*")):
        try:
            if not folder.is_dir() or folder.is_symlink() or folder.stat().st_mtime >= _STARTED:
                continue
            owner = folder / _OWNER
            try:
                pid = int(_io.read_json(owner)["pid"]) if owner.exists() else None
            except (ValueError, KeyError, TypeError, OverflowError):  # unreadable: not a live owner's
                pid = -1
            if pid is None and time.time() - folder.stat().st_mtime < 86400:
                continue
            if pid is not None and pid > 0 and (pid == os.getpid() or _alive(pid)):
                continue
            shutil.rmtree(folder)
        except OSError:  # another process removed it first, or it cannot be: left alone
            continue
        removed.append(str(folder))
    return removed
