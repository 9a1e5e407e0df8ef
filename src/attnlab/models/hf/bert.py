"""Hugging Face BERT checkpoints onto :class:`attnlab.models.bert.BertEncoder`.

A checkpoint directory in the Hugging Face layout (``config.json`` + ``model.safetensors``; a
sentence-transformers ``1_Pooling/config.json``, ``modules.json`` and ``sentence_bert_config.json``
say how :func:`attnlab.models.sentence.embed` pools) becomes a :class:`BertConfig`
(:func:`config_from_hf`) and a state dict under our names (:func:`hf_names`, :func:`map_hf_state`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from attnlab._io import read_json
from attnlab.models.base import check_fits, check_floating, load_state
from attnlab.models.bert import POOLINGS, BertConfig, BertEncoder
from attnlab.models.hf.fields import flag, number, size, text
from attnlab.nn.nonfinite import detect_from_env

HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


def load_bert(directory: str | Path) -> BertEncoder:
    """Load a Hugging Face BERT checkpoint directory (``config.json`` + ``model.safetensors``; a
    sentence-transformers ``1_Pooling/config.json``, ``modules.json`` and
    ``sentence_bert_config.json`` set how :func:`attnlab.models.sentence.embed` pools), in eval mode.
    Errors name every missing or mis-shaped tensor by its checkpoint name."""
    directory = Path(directory)
    config = config_from_hf(directory)
    check_fits(BertEncoder, config, str(directory / "config.json"))  # before allocating
    model = BertEncoder(config)
    state = load_state(directory / "model.safetensors")
    model.load_state_dict(map_hf_state(model, state, str(directory / "model.safetensors")))
    return detect_from_env(model.eval())  # ATTNLAB_DETECT_NONFINITE=1: checked at every point


def _read_object(path: Path, kind: type = dict) -> Any:
    """The JSON value of ``path`` (:func:`attnlab._io.read_json`), which must be a ``kind``."""
    value = read_json(path, kind=None)
    if not isinstance(value, kind):
        raise ValueError(f"{path} must hold a JSON {'object' if kind is dict else 'list'}, got {value!r:.60}")
    return value


def config_from_hf(directory: str | Path) -> BertConfig:
    """A :class:`BertConfig` from a Hugging Face ``config.json`` (and sentence-transformers files);
    every field's JSON type is checked (:mod:`attnlab.models.hf.fields`), a wrong one named."""
    directory = Path(directory)
    path = directory / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no config.json in {directory} (expected a BERT checkpoint directory)")
    hf = _read_object(path)
    if hf.get("model_type", "bert") != "bert":
        raise ValueError(f"{path} is a {hf.get('model_type')!r} model, not 'bert'")
    if text(hf, "position_embedding_type", str(path), "absolute") != "absolute":
        raise ValueError(
            f"{path}: position_embedding_type {hf['position_embedding_type']!r} is not supported"
        )
    act = text(hf, "hidden_act", str(path), "gelu")
    if act not in HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {act!r} is not one of {sorted(HF_ACTIVATIONS)}")
    pooling, normalize, max_seq = "mean", False, None
    pool_cfg = directory / "1_Pooling" / "config.json"
    if pool_cfg.is_file():
        p = _read_object(pool_cfg)
        keys = {m: f"pooling_mode_{m}_tokens" for m in POOLINGS} | {"cls": "pooling_mode_cls_token"}
        modes = [m for m in POOLINGS if flag(p, keys[m], str(pool_cfg), False)]
        if len(modes) != 1:
            raise ValueError(f"{pool_cfg} asks for pooling modes {modes}; exactly one is supported")
        pooling = modes[0]
    modules = directory / "modules.json"
    if modules.is_file():
        entries = _read_object(modules, list)
        if not all(isinstance(m, dict) for m in entries):
            raise ValueError(f"{modules} must be a list of objects, got {entries!r:.60}")
        normalize = any(text(m, "type", str(modules), "").endswith("Normalize") for m in entries)
    st_cfg = directory / "sentence_bert_config.json"
    if st_cfg.is_file():
        max_seq = size(_read_object(st_cfg), "max_seq_length", str(st_cfg), None)
    source = str(path)
    pad = hf.get("pad_token_id")
    if pad is not None and (not isinstance(pad, int) or isinstance(pad, bool) or pad < 0):
        raise ValueError(f"{source}: pad_token_id must be an integer >= 0, got {pad!r}")
    return BertConfig(
        vocab_size=size(hf, "vocab_size", source),
        d_model=size(hf, "hidden_size", source),
        num_heads=size(hf, "num_attention_heads", source),
        num_layers=size(hf, "num_hidden_layers", source),
        d_ff=size(hf, "intermediate_size", source),
        max_len=size(hf, "max_position_embeddings", source, 512),
        type_vocab_size=size(hf, "type_vocab_size", source, 2),
        norm_eps=number(hf, "layer_norm_eps", source, 1e-12),
        activation=HF_ACTIVATIONS[act],
        pad_id=pad or 0,
        pooler=_has_pooler(directory / "model.safetensors"),
        pooling=pooling,
        normalize=normalize,
        max_seq_length=max_seq,
    )


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
            check_floating(theirs, t, expected[ours], source)
            out[ours] = t
    if missing or bad:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise ValueError(
            f"{source}: " + "; ".join(([f"missing tensors {missing[:5]}{more}"] if missing else []) + bad[:5])
        )
    return out
