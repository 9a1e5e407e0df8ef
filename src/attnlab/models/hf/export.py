"""An attnlab :class:`~attnlab.models.GPT` written out as a Hugging Face GPT-2 checkpoint, the inverse
of :mod:`attnlab.models.hf.gpt2`: ``transformers.GPT2LMHeadModel.from_pretrained(folder)`` loads it
and ``AutoTokenizer.from_pretrained(folder)`` its tokenizer.

Files written (:data:`FILES`)::

    config.json             model_type gpt2: n_embd, n_head, n_layer, n_inner, n_positions,
                            activation_function, layer_norm_epsilon, tie_word_embeddings, dropouts
    model.safetensors       GPT-2's names and layout: Conv1D weights W [d_in, d_out] (x @ W), so each
                            nn.Linear weight [d_out, d_in] is transposed; W^Q | W^K | W^V side by
                            side as c_attn [d, 3d]; the tied head stored once (as wte)
    tokenizer.json          the model's tokenizer (a character vocabulary is a BPE model with no
                            merges: one id per character; byte-level BPE as it was learnt)
    tokenizer_config.json   tokenizer_class PreTrainedTokenizerFast, model_max_length = n_positions

GPT-2 is one architecture: pre-norm LayerNorm blocks with biases everywhere, learned absolute
positions, an MLP, full softmax attention over every earlier position. A model whose config
differs in any of these (:func:`unexportable`) is refused with one line naming each setting. The
activation may be any of attnlab's four: exact GELU is ``gelu`` in ``transformers`` (GPT-2's own
tanh approximation is ``gelu_new``), and ``relu``/``silu`` keep their names. An untied head is
written as ``lm_head.weight`` with ``tie_word_embeddings: false``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from attnlab._io import atomic_write_json, check_out_path

CONFIG, WEIGHTS, TOKENIZER, TOKENIZER_CONFIG = FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)
# attnlab's activation -> transformers' ACT2FN name (the inverse of fields.ACTIVATIONS)
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}
# what GPT-2 is, field by field: (attnlab field, the value GPT-2 has, what GPT-2 does instead)
GPT2_IS = (
    ("positions", "learned", "adds learned absolute positions to the embeddings"),
    ("norm", "layer", "uses LayerNorm"),
    ("ffn", "mlp", "has a two-layer MLP"),
    ("qkv_bias", True, "has Q/K/V biases"),
    ("out_bias", True, "has an output-projection bias"),
    ("ffn_bias", True, "has MLP biases"),
    ("window", None, "attends to every earlier position"),
)
SOFTMAX_KINDS = ("sdpa", "explicit", "flash")  # the same exact softmax attention, three kernels


def unexportable(config) -> list[str]:
    """The settings of a :class:`~attnlab.models.gpt.GPTConfig` that GPT-2 cannot express, each as
    ``"positions='rope' (GPT-2 adds learned absolute positions ...)"``; empty when it exports."""
    out = [
        f"{field}={getattr(config, field)!r} (GPT-2 {does})"
        for field, value, does in GPT2_IS
        if getattr(config, field) != value
    ]
    if config.num_kv_heads not in (None, config.num_heads):
        out.append(f"num_kv_heads={config.num_kv_heads!r} (GPT-2 has one key/value head per query head)")
    if config.attention not in SOFTMAX_KINDS:
        out.append(f"attention={config.attention!r} (GPT-2 has softmax attention)")
    return out


def gpt2_config(config) -> dict[str, Any]:
    """The ``config.json`` of a GPT-2 checkpoint equal to ``config`` (a ``GPTConfig``); a
    ``ValueError`` naming every setting GPT-2 cannot express (:func:`unexportable`)."""
    problems = unexportable(config)
    if problems:
        raise ValueError("cannot export to GPT-2: " + "; ".join(problems))
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config.vocab_size,
        "n_positions": config.max_len,
        "n_ctx": config.max_len,
        "n_embd": config.d_model,
        "n_layer": config.num_layers,
        "n_head": config.num_heads,
        "n_inner": config.d_ff,
        "activation_function": HF_ACTIVATIONS[config.activation],
        "layer_norm_epsilon": config.norm_eps,
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "scale_attn_weights": True,
        "tie_word_embeddings": config.tie_weights,
        "initializer_range": 0.02,
        "bos_token_id": None,  # GPT-2's default 50256 lies outside a small vocabulary
        "eos_token_id": None,  # a text run has no end-of-text token: generation runs to --max-new
        "use_cache": True,
        "torch_dtype": "float32",
    }


def gpt2_state(model) -> dict[str, torch.Tensor]:
    """``model``'s weights (float32, contiguous) under GPT-2's names (``transformer.h.{i}...``):
    the inverse of :func:`attnlab.models.hf.gpt2.rules` (a test maps them back and compares)."""
    c, ours = model.config, model.state_dict()
    t = "transformer."

    def conv1d(name: str) -> torch.Tensor:  # nn.Linear [d_out, d_in] -> Conv1D [d_in, d_out]
        return ours[name].t()

    out = {
        t + "wte.weight": ours["tok_embed.weight"],
        t + "wpe.weight": ours["pos_embed.weight"],
        t + "ln_f.weight": ours["norm.weight"],
        t + "ln_f.bias": ours["norm.bias"],
    }
    if not c.tie_weights:
        out["lm_head.weight"] = ours["lm_head.weight"]
    for i in range(c.num_layers):
        h, o = f"{t}h.{i}.", f"blocks.{i}."
        qkv = [o + f"self_attn.{p}_proj" for p in "qkv"]
        out[h + "attn.c_attn.weight"] = torch.cat([conv1d(n + ".weight") for n in qkv], dim=1)  # [d, 3d]
        out[h + "attn.c_attn.bias"] = torch.cat([ours[n + ".bias"] for n in qkv])  # [3d]
        out[h + "attn.c_proj.weight"] = conv1d(o + "self_attn.out_proj.weight")
        out[h + "attn.c_proj.bias"] = ours[o + "self_attn.out_proj.bias"]
        out[h + "mlp.c_fc.weight"] = conv1d(o + "ffn.linear1.weight")  # [d, d_ff]
        out[h + "mlp.c_fc.bias"] = ours[o + "ffn.linear1.bias"]
        out[h + "mlp.c_proj.weight"] = conv1d(o + "ffn.linear2.weight")  # [d_ff, d]
        out[h + "mlp.c_proj.bias"] = ours[o + "ffn.linear2.bias"]
        for theirs, mine in (("ln_1", "norm1"), ("ln_2", "norm3")):
            for p in ("weight", "bias"):
                out[h + f"{theirs}.{p}"] = ours[o + f"{mine}.{p}"]
    return {k: v.detach().to(torch.float32).contiguous().clone() for k, v in out.items()}


def export_gpt2(model, tokenizer, out_dir: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write ``model`` (a GPT) and ``tokenizer`` (a ``tokenizers.Tokenizer``) to ``out_dir`` as a
    GPT-2 checkpoint (:data:`FILES`); returns the paths written.

    Every check runs before anything is written. ``out_dir`` must be new or empty, or, with
    ``overwrite``, hold only files of an earlier export; the files are written into a temporary
    folder beside it and moved in when all are complete."""
    from safetensors.torch import save_file

    config = gpt2_config(model.config)  # refuses an unexportable model first
    out = _check_out(out_dir, overwrite)
    state = gpt2_state(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        staged = Path(tmp)
        atomic_write_json(staged / CONFIG, config)
        save_file(state, str(staged / WEIGHTS), metadata={"format": "pt"})
        # attnlab's tokenizer interface keeps the library's own tokenizer as .backend
        getattr(tokenizer, "backend", tokenizer).save(str(staged / TOKENIZER))
        atomic_write_json(
            staged / TOKENIZER_CONFIG,
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": model.config.max_len,
                "clean_up_tokenization_spaces": False,  # decode gives back the text exactly
            },
        )
        out.mkdir(exist_ok=True)
        for name in FILES:
            os.replace(staged / name, out / name)
    return [out / name for name in FILES]


def _check_out(out_dir: str | Path, overwrite: bool) -> Path:
    """``out_dir`` checked: writable, and new, empty, or (``overwrite``) an earlier export's folder."""
    out = check_out_path(out_dir, "out_dir")
    if not out.exists():
        return out
    held = sorted(p.name for p in out.iterdir())
    if held and not overwrite:
        raise ValueError(f"out_dir={out} is not empty; choose a new folder or pass overwrite=True")
    foreign = [name for name in held if name not in FILES]
    if foreign:
        raise ValueError(
            f"out_dir={out} holds files that are not an export's ({', '.join(foreign[:3])}); "
            "overwrite=True replaces only an earlier export"
        )
    return out
