"""Hugging Face BERT checkpoints onto :class:`attnlab.models.bert.BertEncoder`.

A checkpoint directory in the Hugging Face layout (``config.json`` + ``model.safetensors``; a
sentence-transformers ``1_Pooling/config.json``, ``modules.json`` and ``sentence_bert_config.json``
say how :func:`attnlab.models.sentence.embed` pools) becomes a :class:`BertConfig`
(:func:`config_from_hf`) and a state dict under our names (:func:`hf_names`, :func:`map_hf_state`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor

from attnlab.models.base import load_state
from attnlab.models.bert import POOLINGS, BertConfig, BertEncoder
from attnlab.nn.nonfinite import detect_from_env

HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


def load_bert(directory: str | Path) -> BertEncoder:
    """Load a Hugging Face BERT checkpoint directory (``config.json`` + ``model.safetensors``; a
    sentence-transformers ``1_Pooling/config.json``, ``modules.json`` and
    ``sentence_bert_config.json`` set how :func:`attnlab.models.sentence.embed` pools), in eval mode.
    Errors name every missing or mis-shaped tensor by its checkpoint name."""
    directory = Path(directory)
    config = config_from_hf(directory)
    model = BertEncoder(config)
    state = load_state(directory / "model.safetensors")
    model.load_state_dict(map_hf_state(model, state, str(directory / "model.safetensors")))
    return detect_from_env(model.eval())  # ATTNLAB_DETECT_NONFINITE=1: checked at every point


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def config_from_hf(directory: str | Path) -> BertConfig:
    """A :class:`BertConfig` from a Hugging Face ``config.json`` (and sentence-transformers files)."""
    directory = Path(directory)
    path = directory / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no config.json in {directory} (expected a BERT checkpoint directory)")
    hf = _read_json(path)
    if hf.get("model_type", "bert") != "bert":
        raise ValueError(f"{path} is a {hf.get('model_type')!r} model, not 'bert'")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"{path}: position_embedding_type {hf['position_embedding_type']!r} is not supported"
        )
    act = hf.get("hidden_act", "gelu")
    if act not in HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {act!r} is not one of {sorted(HF_ACTIVATIONS)}")
    pooling, normalize, max_seq = "mean", False, None
    pool_cfg = directory / "1_Pooling" / "config.json"
    if pool_cfg.is_file():
        p = _read_json(pool_cfg)
        keys = {m: f"pooling_mode_{m}_tokens" for m in POOLINGS} | {"cls": "pooling_mode_cls_token"}
        modes = [m for m in POOLINGS if p.get(keys[m])]
        if len(modes) != 1:
            raise ValueError(f"{pool_cfg} asks for pooling modes {modes}; exactly one is supported")
        pooling = modes[0]
    modules = directory / "modules.json"
    if modules.is_file():
        normalize = any(m.get("type", "").endswith("Normalize") for m in _read_json(modules))
    st_cfg = directory / "sentence_bert_config.json"
    if st_cfg.is_file():
        max_seq = _read_json(st_cfg).get("max_seq_length")
    try:
        return BertConfig(
            vocab_size=hf["vocab_size"],
            d_model=hf["hidden_size"],
            num_heads=hf["num_attention_heads"],
            num_layers=hf["num_hidden_layers"],
            d_ff=hf["intermediate_size"],
            max_len=hf.get("max_position_embeddings", 512),
            type_vocab_size=hf.get("type_vocab_size", 2),
            eps=float(hf.get("layer_norm_eps", 1e-12)),
            activation=HF_ACTIVATIONS[act],
            pad_id=hf.get("pad_token_id", 0) or 0,
            pooler=_has_pooler(directory / "model.safetensors"),
            pooling=pooling,
            normalize=normalize,
            max_seq_length=max_seq,
        )
    except KeyError as exc:
        raise ValueError(f"{path} lacks the field {exc.args[0]!r}") from None


def _has_pooler(weights: Path) -> bool:
    if not weights.is_file():
        return False
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as f:
            return any(k.endswith("pooler.dense.weight") for k in f.keys())  # noqa: SIM118
    except Exception:
        return False  # load_state reports the unreadable file


def hf_names(config: BertConfig) -> dict[str, str]:
    """Our parameter names -> the Hugging Face BertModel's names."""
    names = {
        "word_embeddings.weight": "embeddings.word_embeddings.weight",
        "positions.weight": "embeddings.position_embeddings.weight",
        "token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
        "embed_norm.weight": "embeddings.LayerNorm.weight",
        "embed_norm.bias": "embeddings.LayerNorm.bias",
    }
    parts = {
        "self_attn.q_proj": "attention.self.query",
        "self_attn.k_proj": "attention.self.key",
        "self_attn.v_proj": "attention.self.value",
        "self_attn.out_proj": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "ffn.linear1": "intermediate.dense",
        "ffn.linear2": "output.dense",
        "norm2": "output.LayerNorm",
    }
    for i in range(config.num_layers):
        for ours, theirs in parts.items():
            for p in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    if config.pooler:
        names.update({"pooler.weight": "pooler.dense.weight", "pooler.bias": "pooler.dense.bias"})
    return names


def map_hf_state(model: BertEncoder, state: dict[str, Tensor], source: str) -> dict[str, Tensor]:
    """Rename a Hugging Face state dict to ours. A ``bert.`` prefix (BertFor... heads) and old
    ``gamma``/``beta`` LayerNorm names are accepted; extra tensors (heads, ``position_ids``) are
    ignored. Raises ``ValueError`` naming missing and mis-shaped tensors."""

    def lookup(name: str) -> Tensor | None:
        for candidate in (name, f"bert.{name}"):
            if candidate in state:
                return state[candidate]
            old = candidate.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta"
            )
            if old in state:
                return state[old]
        return None

    expected = model.state_dict()
    out, missing, bad = {}, [], []
    for ours, theirs in hf_names(model.config).items():
        t = lookup(theirs)
        if t is None:
            missing.append(theirs)
        elif tuple(t.shape) != tuple(expected[ours].shape):
            bad.append(f"{theirs} has shape {list(t.shape)}, expected {list(expected[ours].shape)}")
        else:
            out[ours] = t
    if missing or bad:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise ValueError(
            f"{source}: " + "; ".join(([f"missing tensors {missing[:5]}{more}"] if missing else []) + bad[:5])
        )
    return out
