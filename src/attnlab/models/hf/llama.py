"""Hugging Face Llama, Mistral and Qwen2 (``model_type: llama | mistral | qwen2``) onto
:class:`attnlab.models.GPT`.

The three share one block: pre-norm RMSNorm, rotate-half RoPE with the checkpoint's
``rope_theta`` (Hugging Face permutes Meta's weights so that each head's dimension i pairs with
i + d_k/2), grouped-query attention with ``num_key_value_heads``, a SwiGLU FFN
``(silu(x W_gate) * x W_up) W_down`` and no biases, except: Qwen2 has Q/K/V biases, Llama may have
``attention_bias`` / ``mlp_bias``, Mistral attends within a sliding window of ``sliding_window``
positions. The head is untied unless ``tie_word_embeddings``. ``nn.Linear`` weights are stored as
attnlab stores them, so every tensor is a rename.
"""

from __future__ import annotations

from typing import Any

from attnlab.models.gpt import GPTConfig
from attnlab.models.hf.fields import activation, flag, number, rope, size
from attnlab.models.hf.mapping import Rule, rename

MODEL_TYPES = ("llama", "mistral", "qwen2")
PREFIXES = ("model.", "")  # LlamaForCausalLM, LlamaModel
ANCHOR = "embed_tokens.weight"
TIED = ("lm_head.weight", "embed_tokens.weight")


def _window(hf: dict[str, Any], kind: str, source: str) -> int | None:
    """Mistral's ``sliding_window`` (null: full attention); Qwen2's only with ``use_sliding_window``."""
    if kind == "mistral":
        return size(hf, "sliding_window", source, None)
    if kind == "qwen2" and flag(hf, "use_sliding_window", source, False):
        raise ValueError(
            f"{source}: use_sliding_window=true (Qwen2's window on layers from max_window_layers on) "
            "is not supported; supported: false"
        )
    return None


def config_from_hf(hf: dict[str, Any], source: str) -> GPTConfig:
    """The :class:`GPTConfig` of a Llama/Mistral/Qwen2 ``config.json`` (``hf``, read from ``source``)."""
    kind = hf["model_type"]
    d, heads = size(hf, "hidden_size", source), size(hf, "num_attention_heads", source)
    head_dim = size(hf, "head_dim", source, None)
    if head_dim is not None and head_dim * heads != d:
        raise ValueError(
            f"{source}: head_dim={head_dim} with num_attention_heads={heads} is not hidden_size={d}; "
            "attnlab supports head_dim = hidden_size / num_attention_heads only"
        )
    types = hf.get("layer_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise ValueError(f"{source}: layer_types must be a list of strings, got {types!r}")
    layer_types = set(types or ["full_attention"]) - {"full_attention", "sliding_attention"}
    if layer_types:
        raise ValueError(f"{source}: layer_types {sorted(layer_types)} are not supported")
    theta, scaling = rope(hf, source)
    max_len = size(hf, "max_position_embeddings", source)
    if scaling is not None and scaling["rope_type"] == "dynamic":  # it is the trained length there:
        max_len = int(max_len * scaling["factor"])  # dynamic NTK is meant to reach factor times it
    attention_bias = flag(hf, "attention_bias", source, False)
    return GPTConfig(
        vocab_size=size(hf, "vocab_size", source),
        d_model=d,
        num_heads=heads,
        num_kv_heads=size(hf, "num_key_value_heads", source, heads),
        num_layers=size(hf, "num_hidden_layers", source),
        d_ff=size(hf, "intermediate_size", source),
        max_len=max_len,
        positions="rope",
        rope_layout="half",
        rope_base=theta,
        rope_scaling=scaling,
        tie_weights=flag(hf, "tie_word_embeddings", source, False),
        norm="rms",
        norm_eps=number(hf, "rms_norm_eps", source, 1e-6),
        ffn="glu",
        activation=activation(hf, "hidden_act", "silu", source),
        qkv_bias=kind == "qwen2" or attention_bias,
        out_bias=attention_bias,
        ffn_bias=flag(hf, "mlp_bias", source, False),
        window=_window(hf, kind, source),
    )


def rules(c: GPTConfig) -> list[Rule]:
    """Every tensor (names without ``model.``), its shape, and ours."""
    d, f, kv = c.d_model, c.d_ff, (c.num_kv_heads or c.num_heads) * (c.d_model // c.num_heads)
    out = [
        rename("embed_tokens.weight", (c.vocab_size, d), "tok_embed.weight"),
        rename("norm.weight", (d,), "norm.weight"),
    ]
    if not c.tie_weights:
        out.append(rename("lm_head.weight", (c.vocab_size, d), "lm_head.weight"))
    for i in range(c.num_layers):
        h, o = f"layers.{i}.", f"blocks.{i}."
        linears = [  # (theirs, ours, [d_out, d_in], has a bias)
            ("self_attn.q_proj", "self_attn.q_proj", (d, d), c.qkv_bias),
            ("self_attn.k_proj", "self_attn.k_proj", (kv, d), c.qkv_bias),
            ("self_attn.v_proj", "self_attn.v_proj", (kv, d), c.qkv_bias),
            ("self_attn.o_proj", "self_attn.out_proj", (d, d), c.out_bias),
            ("mlp.gate_proj", "ffn.linear1", (f, d), c.ffn_bias),
            ("mlp.up_proj", "ffn.linear3", (f, d), c.ffn_bias),
            ("mlp.down_proj", "ffn.linear2", (d, f), c.ffn_bias),
        ]
        for theirs, ours, shape, bias in linears:
            out.append(rename(h + theirs + ".weight", shape, o + ours + ".weight"))
            if bias:
                out.append(rename(h + theirs + ".bias", shape[:1], o + ours + ".bias"))
        out += [
            rename(h + "input_layernorm.weight", (d,), o + "norm1.weight"),
            rename(h + "post_attention_layernorm.weight", (d,), o + "norm3.weight"),
        ]
    return out
