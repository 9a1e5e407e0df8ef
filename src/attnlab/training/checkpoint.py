"""Training checkpoints: written atomically as a set, never with pickle.

Layout of an output folder ``DIR``::

    DIR/latest.json             {"checkpoint": "ckpt-000200", "step": 200}  (the pointer, written last)
    DIR/ckpt-000200/            one complete checkpoint:
        config.json, model.safetensors     the model (``SavableModel.save``)
        optimizer.safetensors              AdamW moments and step counts
        rng.safetensors                    torch's CPU generator state
        state.json                         step, TrainConfig, task, history, optimizer param groups,
                                           and the sha256 of every file above
    DIR/config.json, DIR/model.safetensors the latest model, for ``attnlab.models.load_model(DIR)``

A checkpoint is built in a fresh ``DIR/.ckpt-tmp-*`` folder, fsynced, renamed to ``ckpt-NNNNNN``,
and only then does ``latest.json`` (replaced atomically with ``os.replace``) point at it; older
checkpoint folders are deleted after that. A process killed at any instant therefore leaves
``latest.json`` naming a complete, verified checkpoint (or no checkpoint at all).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from attnlab._io import atomic_write_json
from attnlab.models.base import load_model, load_state
from attnlab.training.config import TrainConfig

POINTER = "latest.json"
STATE = "state.json"
FORMAT = 1


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
    pointer = Path(out_dir) / POINTER
    if not pointer.is_file():
        return None
    try:
        return int(json.loads(pointer.read_text())["step"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{pointer} is corrupt (not a checkpoint pointer)") from None


def save_checkpoint(
    out_dir: str | Path,
    *,
    model,
    optimizer: torch.optim.Optimizer,
    step: int,
    config: TrainConfig,
    history: list[dict[str, Any]],
    task_spec: dict[str, Any],
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
        "optimizer": opt_meta,
        "files": {name: _sha256(tmp / name) for name in files},
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


def checkpoint_dir(out_dir: str | Path) -> Path:
    """The folder ``latest.json`` points at; ``ValueError`` if the pointer is missing or dangling."""
    out = Path(out_dir)
    pointer = out / POINTER
    if not pointer.is_file():
        raise ValueError(f"{out} holds no checkpoint (no {POINTER})")
    try:
        name = json.loads(pointer.read_text())["checkpoint"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{pointer} is corrupt (not a checkpoint pointer)") from None
    path = out / str(name)
    if not (path / STATE).is_file():
        raise ValueError(f"{pointer} points at {name!r}, which is not a complete checkpoint")
    return path


def load_checkpoint(out_dir: str | Path) -> Checkpoint:
    """Read and verify the latest checkpoint in ``out_dir``. Anything missing, unreadable or not
    matching its recorded sha256 raises ``ValueError`` (nothing is modified)."""
    path = checkpoint_dir(out_dir)
    try:
        state = json.loads((path / STATE).read_text())
    except ValueError:
        raise ValueError(f"{path / STATE} is corrupt (not valid JSON)") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path / STATE} is not an attnlab checkpoint of format {FORMAT}")
    for name, digest in state.get("files", {}).items():
        f = path / name
        if not f.is_file() or _sha256(f) != digest:
            raise ValueError(f"checkpoint file {f} is missing or corrupt (sha256 mismatch)")
    try:
        config = TrainConfig.from_dict(state["config"])
        model = load_model(path)
        opt_state = _optimizer_join(load_state(path / "optimizer.safetensors"), state["optimizer"])
        rng = load_state(path / "rng.safetensors")["torch_cpu"]
        step, history = int(state["step"]), list(state["history"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"checkpoint {path} is incomplete: missing {exc}") from None
    return Checkpoint(model, opt_state, rng, step, config, history, path)


def load_trained(out_dir: str | Path) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``(model in eval mode, state.json dict)`` of the latest checkpoint in a training folder."""
    path = checkpoint_dir(out_dir)
    try:
        state = json.loads((path / STATE).read_text())
    except ValueError:
        raise ValueError(f"{path / STATE} is corrupt (not valid JSON)") from None
    model = load_model(path)
    model.eval()
    return model, state
