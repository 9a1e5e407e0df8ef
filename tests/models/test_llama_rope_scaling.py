"""A Llama-shaped attnlab GPT with each RoPE scaling gives transformers' LlamaForCausalLM logits
(float32, <= 1e-4), through a state dict converted here (rotate-half layout, GQA, SwiGLU, RMSNorm)
and through the checkpoint loader (``attnlab.models.hf.load_hf`` of ``save_pretrained``'s folder)."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers import logging as hf_logging

from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.hf import load_hf

SCALINGS = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 16},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 16,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
}
TRAINED_LEN = 16  # original_max_position_embeddings above; the inputs are 3x as long


def _hf(scaling: dict | None) -> LlamaForCausalLM:
    params = {"rope_type": "default"} if scaling is None else dict(scaling)
    params["rope_theta"] = 1000.0
    max_pos = TRAINED_LEN * 4
    if params["rope_type"] == "dynamic":  # transformers reads dynamic's trained length from here
        params.pop("original_max_position_embeddings")
        max_pos = TRAINED_LEN
    config = LlamaConfig(
        vocab_size=61,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_pos,
        rms_norm_eps=1e-6,
        rope_parameters=params,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1 so that they are tested too
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def _attnlab(hf: LlamaForCausalLM, scaling: dict | None) -> GPT:
    c = hf.config
    model = GPT(
        GPTConfig(
            vocab_size=c.vocab_size,
            d_model=c.hidden_size,
            num_heads=c.num_attention_heads,
            num_kv_heads=c.num_key_value_heads,
            num_layers=c.num_hidden_layers,
            d_ff=c.intermediate_size,
            max_len=4 * TRAINED_LEN,
            positions="rope",
            rope_layout="half",
            rope_base=1000.0,
            rope_scaling=scaling,
            norm="rms",
            norm_eps=c.rms_norm_eps,
            ffn="glu",
            activation="silu",
            qkv_bias=False,
            out_bias=False,
            ffn_bias=False,
            tie_weights=False,
        )
    ).eval()
    names = {"tok_embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    names["lm_head.weight"] = "lm_head.weight"
    for i in range(c.num_hidden_layers):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        for a, b in (
            ("self_attn.q_proj", "self_attn.q_proj"),
            ("self_attn.k_proj", "self_attn.k_proj"),
            ("self_attn.v_proj", "self_attn.v_proj"),
            ("self_attn.out_proj", "self_attn.o_proj"),
            ("ffn.linear1", "mlp.gate_proj"),
            ("ffn.linear3", "mlp.up_proj"),
            ("ffn.linear2", "mlp.down_proj"),
            ("norm1", "input_layernorm"),
            ("norm3", "post_attention_layernorm"),
        ):
            names[f"{ours}{a}.weight"] = f"{theirs}{b}.weight"
    theirs = hf.state_dict()
    assert set(names) == set(model.state_dict())
    model.load_state_dict({ours: theirs[t] for ours, t in names.items()})
    return model


@pytest.mark.parametrize("kind", SCALINGS)
def test_llama_logits_match_transformers(kind, tmp_path):
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        hf = _hf(SCALINGS[kind])
    finally:
        hf_logging.set_verbosity(level)
    ours = _attnlab(hf, SCALINGS[kind])
    ids = torch.randint(0, 61, (2, 3 * TRAINED_LEN), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = hf(ids).logits  # [B, T, V]
        got = ours(ids)  # [B, T, V]
    assert (got - want).abs().max().item() <= 1e-4
    hf.save_pretrained(tmp_path)
    loaded = load_hf(tmp_path)
    assert loaded.config.rope_scaling == ours.config.rope_scaling or kind == "default"
    with torch.no_grad():
        assert (loaded(ids) - want).abs().max().item() <= 1e-4
    if kind != "default":  # the scaling matters at this length: plain RoPE gives other logits
        plain = _attnlab(hf, None)
        with torch.no_grad():
            assert (plain(ids) - want).abs().max().item() > 1e-3


@pytest.mark.parametrize("command", [["generate", "DIR", "hello"], ["audit", "params", "--config", "DIR"]])
def test_a_factor_past_the_bound_is_one_line_in_generate_and_audit(tmp_path, command):
    """{"type": "dynamic", "factor": 1e308} made the length factor x 64 = inf (an OverflowError)."""
    import json

    from click.testing import CliRunner

    from attnlab.cli import cli

    config = LlamaConfig(
        vocab_size=50,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=64,
    ).to_dict()
    config["rope_scaling"] = {"type": "dynamic", "factor": 1e308}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(cli, [str(tmp_path) if a == "DIR" else a for a in command])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.splitlines() == [
        f"Error: {tmp_path / 'config.json'}: rope_scaling['factor'] must be at most 1e+06, got 1e+308"
    ]
