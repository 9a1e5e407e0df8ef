"""``load_hf(directory)``: a Hugging Face checkpoint directory as an attnlab model, by ``model_type``.

======================  ===========================================  =========================
``model_type``          attnlab model                                mapping
======================  ===========================================  =========================
bert                    :class:`attnlab.models.bert.BertEncoder`     :mod:`.bert`
gpt2                    :class:`attnlab.models.GPT` (GPT-2 blocks)   :mod:`.gpt2`
llama, mistral, qwen2   :class:`attnlab.models.GPT` (Llama blocks)   :mod:`.llama`
======================  ===========================================  =========================

Reads ``config.json`` and ``model.safetensors`` (or its shards and index); never a pickle, never
the network. The model is built on the ``meta`` device and the checkpoint's tensors are loaded
into it, so no time is spent on a random initialisation that would be overwritten.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

import attnlab.models.hf.gpt2 as gpt2
import attnlab.models.hf.llama as llama
from attnlab.models.base import check_fits, check_sizes, check_state_dict
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.hf.bert import config_from_hf as bert_config
from attnlab.models.hf.bert import load_bert
from attnlab.models.hf.checkpoint import CONFIG, INDEX, read_hf_config, read_hf_state, weight_files
from attnlab.models.hf.fields import dtype_bytes
from attnlab.models.hf.mapping import map_state, strip_prefix
from attnlab.nn.nonfinite import detect_from_env, mark_nonfinite_weights

FAMILIES: dict[str, ModuleType] = {kind: fam for fam in (gpt2, llama) for kind in fam.MODEL_TYPES}
MODEL_TYPES = ("bert", *FAMILIES)  # every model_type load_hf reads


def model_type(hf: dict[str, Any], source: str) -> str:
    """The checkpoint's ``model_type``; an error listing :data:`MODEL_TYPES` if attnlab has no mapping."""
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise ValueError(
            f"{source}: model_type {kind!r} is not supported; supported: {', '.join(MODEL_TYPES)}"
        )
    return kind


def model_config_from_hf(path: str | Path):
    """The attnlab config (:class:`GPTConfig` or :class:`BertConfig`) of a checkpoint's
    ``config.json``; ``path`` is the directory or the file. Reads no weights (a BERT config
    without weights beside it gets the pooler that ``BertModel`` builds by default)."""
    path = Path(path)
    hf = read_hf_config(path)
    source = str(path / CONFIG if path.is_dir() else path)
    if model_type(hf, source) != "bert":
        config = FAMILIES[hf["model_type"]].config_from_hf(hf, source)
        check_sizes(config, source)  # counting needs no memory, but a loop over 10^12 layers never ends
        return config

    directory = path if path.is_dir() else path.parent
    if not path.is_dir() and path.name != CONFIG:
        raise ValueError(f"{path}: a BERT config is read as {CONFIG} of its directory; rename the file")
    config = bert_config(directory)
    check_sizes(config, source)
    weights = ("model.safetensors", "model.safetensors.index.json")
    return (
        config
        if any((directory / f).is_file() for f in weights)
        else dataclasses.replace(config, pooler=True)
    )


def config_dtype_bytes(path: str | Path) -> tuple[int, str] | None:
    """``(bytes per value, dtype)`` of the ``torch_dtype`` in a checkpoint's ``config.json`` (``path``:
    the directory or the file), ``None`` if it names none: what ``audit cost --config`` sizes memory in."""

    path = Path(path)
    return dtype_bytes(read_hf_config(path), str(path / CONFIG if path.is_dir() else path))


def load_hf(directory: str | Path, dtype: torch.dtype = torch.float32):
    """The model of the Hugging Face checkpoint in ``directory``, in eval mode, weights in ``dtype``.

    A tensor missing, extra or of the wrong shape for ``config.json`` is a ``ValueError`` naming
    it; buffers that are not weights (GPT-2's ``attn.bias`` mask, ``rotary_emb.inv_freq``) are
    ignored; a head tied to the embedding may be stored once or twice (equal). Sizes that would not fit
    in half of this machine's memory are refused before anything is read or allocated. The names of
    tensors holding NaN or infinity are recorded on the model (``nonfinite_weights``)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no checkpoint directory {directory}")
    hf = read_hf_config(directory)
    source = str(directory / CONFIG)
    kind = model_type(hf, source)
    if kind == "bert":
        return load_bert(directory).to(dtype)
    family = FAMILIES[kind]
    config = family.config_from_hf(hf, source)
    check_fits(GPT, config, source)  # before a shard is read or a tensor allocated
    state = read_hf_state(directory)
    files = weight_files(directory)
    where = str(files[0] if len(files) == 1 else directory / INDEX)
    names = strip_prefix(state, family.PREFIXES, family.ANCHOR)
    ours = map_state(family.rules(config), state, names, where, family.TIED if config.tie_weights else None)
    model = build_gpt(config, ours, where, dtype)
    mark_nonfinite_weights(model, state)  # once, by the checkpoint's own tensor names
    return model


def build_gpt(config: GPTConfig, state: dict[str, torch.Tensor], source: str, dtype: torch.dtype) -> GPT:
    """A :class:`GPT` of ``config`` holding ``state`` (our names), built without initialising weights."""
    with torch.device("meta"):
        model = GPT(config)
    if any(True for _ in model.buffers()):  # a table computed at construction: build it for real
        model = GPT(config)
    model = model.to_empty(device="cpu").to(dtype)
    if config.tie_weights:
        model.lm_head.weight = model.tok_embed.weight  # [V, d]: to_empty may have untied them
        state = {**state, "lm_head.weight": state["tok_embed.weight"]}
    check_state_dict(model, state, source)
    model.load_state_dict(state)
    return detect_from_env(model.eval())  # ATTNLAB_DETECT_NONFINITE=1: checked at every point
