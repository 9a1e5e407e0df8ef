"""Reading a Hugging Face checkpoint directory: ``config.json`` and its safetensors weights.

The weights are ``model.safetensors``, or shards ``model-0000i-of-0000n.safetensors`` listed in
``model.safetensors.index.json`` (``{"weight_map": {tensor name: shard file}}``). Only safetensors
are read: a directory holding only ``pytorch_model.bin`` (a pickle, which can run code when
loaded) is refused with a message that says so. Nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from attnlab.models.base import load_state

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "tf_model.h5")


def read_json(path: Path) -> Any:
    """The JSON object in ``path``; a ``ValueError`` naming the file if it is not valid JSON."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a checkpoint: ``path`` is the directory or the file itself."""
    path = Path(path)
    file = path / CONFIG if path.is_dir() else path
    if not file.is_file():
        where = f"no {CONFIG} in {path}" if path.is_dir() else f"no such file {path}"
        raise FileNotFoundError(f"{where} (expected a Hugging Face checkpoint directory)")
    config = read_json(file)
    if not isinstance(config, dict):
        raise ValueError(f"{file} must hold a JSON object, got {type(config).__name__}")
    return config


def weight_files(directory: str | Path) -> list[Path]:
    """The safetensors files holding ``directory``'s weights, in the index's order of first use."""
    directory = Path(directory)
    index = directory / INDEX
    if index.is_file():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index} has no 'weight_map' of tensor name -> shard file")
        files = list(dict.fromkeys(weight_map.values()))
        missing = [f for f in files if not (directory / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{index} names shard(s) {missing} that are not in {directory}")
        return [directory / f for f in files]
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
    weight_map = read_json(index)["weight_map"] if index.is_file() else None
    state: dict[str, torch.Tensor] = {}
    for file in files:
        part = load_state(file)
        if weight_map is not None:
            stray = sorted(k for k in part if weight_map.get(k) != file.name)
            if stray:
                raise ValueError(f"{file} holds tensor(s) {stray[:3]} that {index.name} does not place there")
        state.update(part)
    if weight_map is not None:
        absent = sorted(set(weight_map) - set(state))
        if absent:
            raise ValueError(f"{index} lists tensor(s) {absent[:3]} that no shard holds")
    return state
