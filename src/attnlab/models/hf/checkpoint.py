"""Reading a Hugging Face checkpoint directory: ``config.json`` and its safetensors weights.

The weights are ``model.safetensors``, or shards ``model-0000i-of-0000n.safetensors`` listed in
``model.safetensors.index.json`` (``{"weight_map": {tensor name: shard file}}``). Only safetensors
are read: a directory holding only ``pytorch_model.bin`` (a pickle, which can run code when
loaded) is refused with a message that says so. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnlab._io import read_json
from attnlab.models.base import load_state

__all__ = ["read_hf_config", "read_hf_state", "read_json", "weight_files"]

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "tf_model.h5")


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a checkpoint: ``path`` is the directory or the file itself."""
    path = Path(path)
    file = path / CONFIG if path.is_dir() else path
    if not file.is_file():
        where = f"no {CONFIG} in {path}" if path.is_dir() else f"no such file {path}"
        raise FileNotFoundError(f"{where} (expected a Hugging Face checkpoint directory)")
    config = read_json(file, kind=None)
    if not isinstance(config, dict):
        raise ValueError(f"{file} must hold a JSON object, got {type(config).__name__}")
    return config


def _weight_map(index: Path) -> dict[str, str]:
    """The ``weight_map`` of ``index``: tensor name -> shard file name (strings only)."""
    data = read_json(index, kind=None)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index} has no 'weight_map' of tensor name -> shard file")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise ValueError(f"{index}: weight_map[{name!r}] must be a shard's file name, got {shard!r:.60}")
    return weight_map


def _shard(directory: Path, index: Path, name: str) -> Path:
    """``directory / name``, confined to ``directory``: an absolute name, a ``..`` or a symlink
    that leads outside it is refused (an index must not make attnlab open ``/proc/self/environ``
    or another checkpoint's file), before the file is opened."""
    path = directory / name
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise ValueError(f"{index} names shard {name!r}, which is outside {directory}")
    try:
        inside = path.resolve().is_relative_to(directory.resolve())
        path.is_file()  # a name too long raises here
    except (OSError, ValueError, RuntimeError) as exc:  # a loop of links, a NUL, a name too long
        why = getattr(exc, "strerror", None) or exc
        raise ValueError(f"{index} names shard {name[:60]!r}, which cannot be opened ({why})") from None
    if not inside:
        raise ValueError(
            f"{index} names shard {name!r}, a link to {path.resolve()}, outside {directory} "
            "(shards must be files in the checkpoint folder)"
        )
    return path


def weight_files(directory: str | Path) -> list[Path]:
    """The safetensors files holding ``directory``'s weights, in the index's order of first use.

    Every shard the index names must be a file inside ``directory`` (:func:`_shard`)."""
    directory = Path(directory)
    index = directory / INDEX
    if index.is_file():
        names = list(dict.fromkeys(_weight_map(index).values()))
        files = [_shard(directory, index, name) for name in names]
        missing = [name for name, f in zip(names, files, strict=True) if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"{index} names shard(s) {missing} that are not in {directory}")
        return files
    if (directory / WEIGHTS).is_file():
        return [directory / WEIGHTS]
    pickles = [p for p in PICKLES if (directory / p).is_file()]
    if pickles:
        raise ValueError(
            f"{directory} holds {pickles[0]} but no {WEIGHTS}: attnlab reads only safetensors "
            f"(a pickle can run arbitrary code when loaded); save the model with safe_serialization=True"
        )
    raise FileNotFoundError(f"no {WEIGHTS} or {INDEX} in {directory}")


def read_hf_state(directory: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in ``directory`` by its Hugging Face name (all shards merged).

    With an index, each tensor must be in the shard the index names, and a tensor the index does
    not list is an error (a shard of another checkpoint, say)."""
    directory = Path(directory)
    files = weight_files(directory)
    index = directory / INDEX
    weight_map = _weight_map(index) if index.is_file() else None
    names = list(dict.fromkeys(weight_map.values())) if weight_map is not None else [None]
    state: dict[str, torch.Tensor] = {}
    for file, name in zip(files, names, strict=True):
        part = load_state(file)
        if weight_map is not None:
            stray = sorted(k for k in part if weight_map.get(k) != name)
            if stray:
                raise ValueError(f"{file} holds tensor(s) {stray[:3]} that {index.name} does not place there")
        state.update(part)
    if weight_map is not None:
        absent = sorted(set(weight_map) - set(state))
        if absent:
            raise ValueError(f"{index} lists tensor(s) {absent[:3]} that no shard holds")
    return state


def eos_ids(directory: str | Path) -> list[int]:
    """The end-of-sequence ids a checkpoint declares: ``eos_token_id`` of ``generation_config.json``,
    else of ``config.json`` (an int or a list; Llama 3 lists two); ``[]`` when neither has one."""
    directory = Path(directory)
    gen = directory / "generation_config.json"
    sources = [(gen, read_json(gen, kind=None))] if gen.is_file() else []
    for path, source in [*sources, (directory / "config.json", read_hf_config(directory))]:
        eos = source.get("eos_token_id") if isinstance(source, dict) else None
        if eos is None:
            continue
        ids = eos if isinstance(eos, list) else [eos]
        if not all(isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in ids):
            raise ValueError(f"{path}: eos_token_id must be a token id or a list of them, got {eos!r:.60}")
        return ids
    return []
