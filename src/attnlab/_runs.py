"""Reading a run folder that ``attnlab train`` wrote, without writing anything: the pointer
``latest.json`` and a checkpoint verified file by file against the sha256 its ``state.json`` records.

It sits at the bottom of the house (beside :mod:`attnlab._io`) because both the resolver
(:func:`attnlab.models.load`) and the trainer (:mod:`attnlab.training.checkpoint`, which also
writes checkpoints) read runs; the layout is described there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from attnlab._io import file_sha256, read_json

POINTER = "latest.json"
STATE = "state.json"
FORMAT = 1
REQUIRED_FILES = ("config.json", "model.safetensors", "optimizer.safetensors", "rng.safetensors")
CKPT_NAME = re.compile(r"^ckpt-\d{6}$")


def read_pointer(out: Path) -> tuple[str, int] | None:
    """``(checkpoint folder name, step)`` from ``latest.json``; None when absent. The name must be a
    ``ckpt-NNNNNN`` folder of ``out`` itself: a pointer to another run (``../other/ckpt-000003``) or
    an absolute path is refused, so a resume can never continue someone else's config here."""
    pointer = out / POINTER
    if not pointer.is_file():
        return None
    data = read_json(pointer)  # not JSON, a list, 100,000-deep nesting: one line naming the file
    if "checkpoint" not in data or "step" not in data:
        raise ValueError(f"{pointer} is corrupt (not a checkpoint pointer)")
    name, step = data["checkpoint"], data["step"]
    if not isinstance(name, str) or not CKPT_NAME.match(name):
        raise ValueError(f"{pointer} names {name!r}; a pointer may only name a ckpt-NNNNNN folder beside it")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0 or name != f"ckpt-{step:06d}":
        raise ValueError(f"{pointer} is corrupt: step {step!r} does not match {name!r}")
    return name, step


def verify(path: Path) -> dict[str, Any]:
    """Read ``path/state.json`` and check every file of the checkpoint against its sha256.

    Returns the state dict. Raises ``ValueError`` naming the file and the problem: unreadable or
    malformed JSON, another format, a ``files`` table that is empty or lacks a required file (which
    would switch verification off), or any file missing or not matching its hash.
    """
    state_path = path / STATE
    if not state_path.is_file():
        raise ValueError(f"{path} is not a complete checkpoint (no {STATE})")
    state = read_json(state_path, kind=None)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{state_path} is not an attnlab checkpoint of format {FORMAT}")
    files = state.get("files")
    if not isinstance(files, dict) or not files:
        raise ValueError(f"{state_path} lists no file hashes; refusing an unverifiable checkpoint")
    missing = [n for n in REQUIRED_FILES if n not in files]
    if missing:
        raise ValueError(f"{state_path} has no hash for {missing}; refusing an unverifiable checkpoint")
    for name, digest in files.items():
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise ValueError(f"{state_path} lists {name!r}, which is not a file of the checkpoint")
        f = path / name
        if not f.is_file() or file_sha256(f) != digest:
            raise ValueError(f"checkpoint file {f} is missing or corrupt (sha256 mismatch)")
    for key, kind, called in (
        ("step", int, "an integer"),
        ("config", dict, "a JSON object"),
        ("task", dict, "a JSON object"),
        ("history", list, "a list"),
        ("optimizer", dict, "a JSON object"),
    ):
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise ValueError(f"{state_path}: {key!r} is missing or not {called}")
    return state


def complete_checkpoints(out: Path) -> list[Path]:
    """``ckpt-NNNNNN`` folders of ``out`` that verify, newest first."""
    found = []
    for p in sorted(out.glob("ckpt-*"), reverse=True):
        if p.is_dir() and CKPT_NAME.match(p.name):
            try:
                verify(p)
            except ValueError:
                continue
            found.append(p)
    return found


def checkpoint_dir(out_dir: str | Path) -> Path:
    """The folder ``latest.json`` points at; ``ValueError`` if the pointer is missing or dangling."""
    out = Path(out_dir)
    if not out.is_dir():
        raise ValueError(f"{out} holds no checkpoint (no such folder)")
    found = read_pointer(out)
    if found is None:
        done = complete_checkpoints(out)
        hint = f"; {done[0].name} verifies: resuming the run (resume=True) continues from it" if done else ""
        raise ValueError(f"{out} holds no checkpoint (no {POINTER}){hint}")
    path = out / found[0]
    if not (path / STATE).is_file():
        raise ValueError(f"{out / POINTER} points at {found[0]!r}, which is not a complete checkpoint")
    return path


def is_run(directory: str | Path) -> bool:
    """Whether ``directory`` looks like a run folder (a pointer, or a checkpoint folder left by a kill)."""
    directory = Path(directory)
    return (directory / POINTER).is_file() or any(directory.glob("ckpt-*"))
