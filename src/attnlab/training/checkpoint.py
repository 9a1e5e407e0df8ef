"""Training checkpoints: written atomically as a set, never with pickle.

Layout of an output folder ``DIR``::

    DIR/latest.json             {"checkpoint": "ckpt-000200", "step": 200}  (the pointer, written last)
    DIR/ckpt-000200/            one complete checkpoint:
        config.json, model.safetensors     the model (``SavableModel.save``)
        optimizer.safetensors              AdamW moments and step counts
        rng.safetensors                    torch's CPU generator state
        state.json                         step, TrainConfig, task, history, optimizer param groups,
                                           and the sha256 of every file above
    DIR/config.json, DIR/model.safetensors a copy of the latest model (a saved model anyone can read);
                                           ``attnlab.models.load(DIR)`` reads the verified checkpoint

A checkpoint is built in a fresh ``DIR/.ckpt-tmp-*`` folder, fsynced, renamed to ``ckpt-NNNNNN``,
and only then does ``latest.json`` (replaced atomically with ``os.replace``) point at it; older
checkpoint folders are deleted after that. A process killed at any instant therefore leaves
``latest.json`` naming a complete, verified checkpoint (or no checkpoint at all). Reading a run
(the pointer, verification) is :mod:`attnlab._runs`, below the models, so that loading never writes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from attnlab._io import atomic_write_bytes, atomic_write_json, file_sha256
from attnlab._runs import (
    CKPT_NAME,
    FORMAT,
    POINTER,
    STATE,
    checkpoint_dir,
    complete_checkpoints,
    read_pointer,
    verify,
)
from attnlab.models.base import load_state
from attnlab.models.registry import load_model
from attnlab.nn.nonfinite import mark_nonfinite_weights, say_nonfinite_weights
from attnlab.training.config import TrainConfig


@dataclass
class Checkpoint:
    """A loaded checkpoint: ``model`` (on CPU), ``optimizer_state`` for ``load_state_dict``,
    ``rng_state`` (torch CPU), ``step``, ``config`` and the metrics ``history``."""

    model: torch.nn.Module
    optimizer_state: dict[str, Any]
    rng_state: torch.Tensor
    step: int
    config: TrainConfig
    history: list[dict[str, Any]]
    path: Path
    recent: list = field(default_factory=list)  # the last (loss, token accuracy) pairs of training
    restored: list[str] = field(default_factory=list)  # top-level files found damaged and restored


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _optimizer_split(sd: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimizer ``state_dict`` -> (tensors for safetensors, JSON-able rest)."""
    tensors, scalars = {}, {}
    for pid, st in sd["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                tensors[f"state.{pid}.{k}"] = v.detach().contiguous().cpu()
            else:
                scalars[f"{pid}.{k}"] = v
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _optimizer_join(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, t in tensors.items():
        _, pid, k = key.split(".", 2)
        state.setdefault(int(pid), {})[k] = t
    for key, v in meta["scalars"].items():
        pid, k = key.split(".", 1)
        state.setdefault(int(pid), {})[k] = v
    groups = []
    for g in meta["param_groups"]:
        g = dict(g)
        if isinstance(g.get("betas"), list):
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    return {"state": state, "param_groups": groups}


def latest_step(out_dir: str | Path) -> int | None:
    """Step of the checkpoint ``latest.json`` points at, or None when there is none."""
    found = read_pointer(Path(out_dir))
    return None if found is None else found[1]


def recover_pointer(out_dir: str | Path) -> int | None:
    """A run killed after its checkpoint folder was complete but before ``latest.json`` was written
    has no pointer: point it at the newest verified checkpoint. Returns that step (None: none)."""
    out = Path(out_dir)
    if not out.is_dir() or read_pointer(out) is not None:
        return None
    done = complete_checkpoints(out)
    if not done:
        return None
    step = int(done[0].name.split("-")[1])
    atomic_write_json(out / POINTER, {"checkpoint": done[0].name, "step": step})
    return step


def sync_top_level(out_dir: str | Path, path: Path, files: dict[str, str]) -> list[str]:
    """Make ``DIR/config.json`` and ``DIR/model.safetensors`` equal the verified checkpoint ``path``:
    each is checked against the checkpoint's recorded sha256 (a run killed while replacing them leaves
    older weights there; a flipped byte on disk, damaged ones). Returns the names it rewrote ([] when
    both matched, or the folder is read-only: loading still uses the verified checkpoint)."""
    out = Path(out_dir)
    stale = [
        n
        for n in ("config.json", "model.safetensors")
        if not (out / n).is_file() or file_sha256(out / n) != files.get(n)
    ]
    for name in stale:
        try:
            atomic_write_bytes(out / name, (path / name).read_bytes())
        except OSError:
            return []
    return stale


def restored_note(out_dir: str | Path, path: Path, names: list[str]) -> str:
    """The one line saying which top-level files :func:`sync_top_level` restored from ``path``."""
    files = " and ".join(str(Path(out_dir) / n) for n in names)
    return f"{files} did not match the verified checkpoint {path.name} (sha256): restored from it"


def restore_top_level(out_dir: str | Path) -> str | None:
    """Verify the top-level copy of the run ``out_dir`` against its latest checkpoint (itself
    verified first) and restore what differs; the note to show, or None when nothing differed."""
    path = checkpoint_dir(out_dir)
    names = sync_top_level(out_dir, path, verify(path)["files"])
    return restored_note(out_dir, path, names) if names else None


def save_checkpoint(
    out_dir: str | Path,
    *,
    model,
    optimizer: torch.optim.Optimizer,
    step: int,
    config: TrainConfig,
    history: list[dict[str, Any]],
    task_spec: dict[str, Any],
    recent: list | None = None,
) -> Path:
    """Write a complete checkpoint for ``step`` and point ``latest.json`` at it (see module doc)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ckpt-tmp-", dir=out))
    model.save(tmp)
    opt_tensors, opt_meta = _optimizer_split(optimizer.state_dict())
    save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
    save_file({"torch_cpu": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
    files = sorted(p.name for p in tmp.iterdir())
    for name in files:  # flush every file before the folder becomes visible
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    state = {
        "format": FORMAT,
        "step": step,
        "config": config.to_dict(),
        "task": task_spec,
        "history": history,
        "recent": [list(r) for r in (recent or [])],
        "optimizer": opt_meta,
        "files": {name: file_sha256(tmp / name) for name in files},
    }
    atomic_write_json(tmp / STATE, state)
    _fsync_dir(tmp)
    name = f"ckpt-{step:06d}"
    final = out / name
    if final.exists():  # left by a run killed after this rename but before the pointer moved
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(out)
    atomic_write_json(out / POINTER, {"checkpoint": name, "step": step})
    _fsync_dir(out)
    for old in out.iterdir():  # only now may older checkpoints go
        if (
            old.is_dir()
            and old.name != name
            and (old.name.startswith("ckpt-") or old.name.startswith(".ckpt-tmp-"))
        ):
            shutil.rmtree(old, ignore_errors=True)
    model.save(out)  # the convenience copy for load_model(DIR); each file replaced atomically
    return final


def load_checkpoint(out_dir: str | Path) -> Checkpoint:
    """Read and verify the latest checkpoint in ``out_dir``. Anything missing, unreadable or not
    matching its recorded sha256 raises ``ValueError``; only a stale top-level model copy is rewritten
    (from the verified checkpoint)."""
    return load_checkpoint_at(out_dir, checkpoint_dir(out_dir))


def load_checkpoint_at(out_dir: str | Path, path: Path) -> Checkpoint:
    """The checkpoint folder ``path`` of the run ``out_dir``, verified and loaded."""
    state = verify(path)
    restored = sync_top_level(out_dir, path, state["files"])
    try:
        config = TrainConfig.from_dict(state["config"])
    except ValueError as exc:  # a value the checkpoint holds, not one the caller gave: say where
        raise ValueError(f"checkpoint {path / STATE} holds a bad config: {exc}") from None
    except TypeError as exc:
        raise ValueError(f"checkpoint {path} is incomplete: missing {exc}") from None
    try:
        model = load_model(path)
        found = mark_nonfinite_weights(model)  # once: a run that diverged is not resumed
        if found:
            raise ValueError(
                f"checkpoint {path}: the weights hold NaN or infinity, {say_nonfinite_weights(found)}; "
                "cannot resume training from it"
            )
        opt_state = _optimizer_join(load_state(path / "optimizer.safetensors"), state["optimizer"])
        rng = load_state(path / "rng.safetensors")["torch_cpu"]
        step, history = int(state["step"]), list(state["history"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"checkpoint {path} is incomplete: missing {exc}") from None
    recent = state.get("recent", [])
    recent = recent if isinstance(recent, list) else []
    return Checkpoint(model, opt_state, rng, step, config, history, path, recent, restored)


def resume_folder(out_dir: str | Path) -> Path:
    """``out_dir`` as a ``Path`` when it is a folder; a resume of one that does not exist (a mistyped
    path) is a ``ValueError``, never a fresh run (``attnlab train --resume`` and ``train(resume=True)``)."""
    out = Path(out_dir)
    if not out.is_dir():
        raise ValueError(f"{out} holds no checkpoint (no such folder)")
    return out


def resume_point(out_dir: str | Path) -> tuple[Path, str | None] | None:
    """The checkpoint folder a resume continues, and a one-line note when it is not the one
    ``latest.json`` names; None when ``out_dir`` holds no checkpoint at all.

    The pointer's checkpoint if it verifies; otherwise (no pointer: a kill between a checkpoint's
    rename and its pointer; or the pointer's checkpoint damaged or gone) the newest ``ckpt-NNNNNN``
    folder that verifies. A pointer that is itself malformed, or names something outside ``out_dir``,
    is a ``ValueError`` (as for :func:`checkpoint_dir`), and so is a folder where nothing verifies."""
    out = resume_folder(out_dir)
    found = read_pointer(out)
    failed: list[tuple[str, str]] = []  # (folder, why it does not verify)
    if found is not None:
        try:
            verify(out / found[0])
            return out / found[0], None
        except ValueError as exc:
            failed.append((found[0], str(exc)))
    folders = [p for p in sorted(out.glob("ckpt-*"), reverse=True) if CKPT_NAME.match(p.name) and p.is_dir()]
    for path in folders:
        if found is not None and path.name == found[0]:
            continue
        try:
            verify(path)
        except ValueError as exc:
            failed.append((path.name, str(exc)))
            continue
        why = f"{POINTER} names {found[0]}" if found else f"it has no {POINTER}"
        skipped = "; ".join(f"{name} skipped: {reason}" for name, reason in failed)
        return path, (
            f"{out}: {why}; resuming from {path.name} (step {int(path.name[5:])}), the newest checkpoint "
            f"that verifies" + (f" ({skipped})" if skipped else "")
        )
    if found is None and not folders:
        return None
    reasons = "; ".join(f"{name}: {reason}" for name, reason in failed)
    raise ValueError(f"{out} holds no checkpoint that verifies ({reasons})")


def load_resumable(out_dir: str | Path) -> tuple[Checkpoint, str | None]:
    """The checkpoint :func:`resume_point` chooses, loaded, and its note (None: the pointer's)."""
    chosen = resume_point(out_dir)
    if chosen is None:
        raise ValueError(f"{out_dir} holds no checkpoint (no {POINTER} and no ckpt-NNNNNN folder)")
    return load_checkpoint_at(out_dir, chosen[0]), chosen[1]


def point_at(out_dir: str | Path, path: Path) -> None:
    """Make ``latest.json`` name the checkpoint folder ``path`` (atomically)."""
    atomic_write_json(Path(out_dir) / POINTER, {"checkpoint": path.name, "step": int(path.name[5:])})


def load_trained(out_dir: str | Path) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``(model in eval mode, state.json dict)`` of the latest checkpoint in a training folder,
    every file verified against its sha256 first. Reading never writes: a stale top-level copy is
    left for the next training step to replace (:func:`load_checkpoint` does, on resuming)."""
    path = checkpoint_dir(out_dir)
    state = verify(path)
    model = load_model(path)
    model.eval()
    return model, state
