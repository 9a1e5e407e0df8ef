"""Hugging Face GPT-2 (``model_type: gpt2``) onto :class:`attnlab.models.GPT`.

GPT-2 is pre-norm LayerNorm blocks with biases everywhere, learned positions, a GELU (tanh
approximation, ``gelu_new``) MLP of width ``n_inner`` (default ``4 d``) and a head tied to the
token embedding (unless ``tie_word_embeddings`` is false). Its linear layers are ``Conv1D``
modules that store ``W [d_in, d_out]`` and compute ``x @ W`` — the notes' row convention — so
every one is transposed into ``nn.Linear``'s ``[d_out, d_in]``; ``c_attn [d, 3d]`` is
``W^Q | W^K | W^V`` side by side and is cut in three.
"""

from __future__ import annotations

from typing import Any

from attnlab.models.gpt import GPTConfig
from attnlab.models.hf.fields import activation, flag, number, refuse, size
from attnlab.models.hf.mapping import Rule, rename, split, transposed

MODEL_TYPES = ("gpt2",)
PREFIXES = ("transformer.", "")  # GPT2LMHeadModel, GPT2Model
ANCHOR = "wte.weight"
TIED = ("lm_head.weight", "wte.weight")


def config_from_hf(hf: dict[str, Any], source: str) -> GPTConfig:
    """The :class:`GPTConfig` of a GPT-2 ``config.json`` (``hf``, read from ``source``)."""
    refuse(
        hf,
        source,
        scale_attn_weights=True,
        scale_attn_by_inverse_layer_idx=False,
        add_cross_attention=False,
    )
    d = size(hf, "n_embd", source)
    return GPTConfig(
        vocab_size=size(hf, "vocab_size", source),
        d_model=d,
        num_heads=size(hf, "n_head", source),
        num_layers=size(hf, "n_layer", source),
        d_ff=size(hf, "n_inner", source, 4 * d),
        max_len=size(hf, "n_positions", source),
        positions="learned",
        tie_weights=flag(hf, "tie_word_embeddings", source, True),
        norm="layer",
        norm_eps=number(hf, "layer_norm_epsilon", source, 1e-5),
        ffn="mlp",
        activation=activation(hf, "activation_function", "gelu_new", source),
    )


def rules(c: GPTConfig) -> list[Rule]:
    """Every GPT-2 tensor (names without ``transformer.``), its shape, and ours."""
    d, f, kv = c.d_model, c.d_ff, c.d_model  # GPT-2 has no GQA: K and V are d wide
    out = [
        rename("wte.weight", (c.vocab_size, d), "tok_embed.weight"),
        rename("wpe.weight", (c.max_len, d), "pos_embed.weight"),
        rename("ln_f.weight", (d,), "norm.weight"),
        rename("ln_f.bias", (d,), "norm.bias"),
    ]
    if not c.tie_weights:
        out.append(rename("lm_head.weight", (c.vocab_size, d), "lm_head.weight"))
    qkv = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]
    for i in range(c.num_layers):
        h, o = f"h.{i}.", f"blocks.{i}."
        out += [
            split(
                h + "attn.c_attn.weight",
                (d, d + 2 * kv),
                [o + n + ".weight" for n in qkv],
                [d, kv, kv],
                1,
                True,
            ),
            split(
                h + "attn.c_attn.bias", (d + 2 * kv,), [o + n + ".bias" for n in qkv], [d, kv, kv], 0, False
            ),
            transposed(h + "attn.c_proj.weight", (d, d), o + "self_attn.out_proj.weight"),
            rename(h + "attn.c_proj.bias", (d,), o + "self_attn.out_proj.bias"),
            transposed(h + "mlp.c_fc.weight", (d, f), o + "ffn.linear1.weight"),
            rename(h + "mlp.c_fc.bias", (f,), o + "ffn.linear1.bias"),
            transposed(h + "mlp.c_proj.weight", (f, d), o + "ffn.linear2.weight"),
            rename(h + "mlp.c_proj.bias", (d,), o + "ffn.linear2.bias"),
        ]
        for theirs, ours in (("ln_1", "norm1"), ("ln_2", "norm3")):
            out += [rename(h + f"{theirs}.{p}", (d,), o + f"{ours}.{p}") for p in ("weight", "bias")]
    return out
