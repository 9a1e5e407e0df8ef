"""GPTConfig with the block fields: models saved before the block config existed still load (checked
against the NumPy reference computed straight from the saved tensors), and every family the config
describes (GPT-2, Llama, Qwen2, Mistral, NoPE, sinusoidal, ALiBi, attention-only) builds, saves,
loads and decodes with a cache exactly as it runs in full."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from attnlab import ref
from attnlab.models import GPT, GPTConfig, load_model

DATA = Path(__file__).parent / "data"
TOL64 = 1e-10


def _reference_logits(directory: Path, ids: np.ndarray) -> np.ndarray:
    """The pre-block-config GPT written out with attnlab.ref from the saved tensors: learned or RoPE
    (interleaved) positions, pre-LayerNorm blocks, exact-GELU MLP, biases everywhere."""
    c = json.loads((directory / "config.json").read_text())["config"]
    w = {k: v.astype(np.float64) for k, v in load_file(str(directory / "model.safetensors")).items()}
    t = ids.shape[1]
    h = w["tok_embed.weight"][ids]  # [B, T, d]
    if c["positions"] == "learned":
        h = h + w["pos_embed.weight"][:t]
    for i in range(c["num_layers"]):
        p = f"blocks.{i}."
        attn = {f"W_{n}": w[f"{p}self_attn.{n}_proj.weight"].T for n in "qkvo" if n != "o"}
        attn |= {f"b_{n}": w[f"{p}self_attn.{n}_proj.bias"] for n in "qkv"}
        attn |= {"W_o": w[f"{p}self_attn.out_proj.weight"].T, "b_o": w[f"{p}self_attn.out_proj.bias"]}
        x = ref.layer_norm(h, w[f"{p}norm1.weight"], w[f"{p}norm1.bias"])
        pos = "rope" if c["positions"] == "rope" else None
        a, _ = ref.multi_head_attention(
            x,
            None,
            attn,
            c["num_heads"],
            num_kv_heads=c["num_kv_heads"],
            mask=ref.causal_mask(t),
            positions=pos,
        )
        h = h + a
        x = ref.layer_norm(h, w[f"{p}norm3.weight"], w[f"{p}norm3.bias"])
        ffn = {"W_1": w[f"{p}ffn.linear1.weight"].T, "b_1": w[f"{p}ffn.linear1.bias"]}
        ffn |= {"W_2": w[f"{p}ffn.linear2.weight"].T, "b_2": w[f"{p}ffn.linear2.bias"]}
        h = h + ref.feed_forward(x, ffn, "gelu")
    head = w.get("lm_head.weight", w["tok_embed.weight"])  # tied: stored once
    return ref.layer_norm(h, w["norm.weight"], w["norm.bias"]) @ head.T  # [B, T, V]


@pytest.mark.parametrize("name", ["gpt_learned_tied", "gpt_rope_gqa_untied"])
def test_model_saved_before_the_block_config_loads_and_computes_the_same(name):
    """The directories were written by attnlab's GPT at the commit before the block config (config.json
    with its 11 fields); they load with the new fields at their defaults and give the reference logits."""
    directory = DATA / name
    saved = json.loads((directory / "config.json").read_text())["config"]
    assert "norm" not in saved and len(saved) == 11  # the old field layout
    model = load_model(directory).double().eval()
    c = model.config
    assert (c.norm, c.ffn, c.activation, c.rope_layout, c.window) == (
        "layer",
        "mlp",
        "gelu",
        "interleaved",
        None,
    )
    assert (c.qkv_bias, c.out_bias, c.ffn_bias) == (True, True, True)
    ids = np.array([[1, 5, 7, 12, 0, 3], [4, 4, 2, 9, 11, 8]])
    want = _reference_logits(directory, ids)
    got = model(torch.from_numpy(ids)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)  # the weights are stored in float32
    assert np.abs(want).max() > 0.1


SIZES = dict(vocab_size=23, d_model=16, num_heads=4, num_layers=2, d_ff=24, max_len=12)
LLAMA = dict(
    positions="rope",
    rope_layout="half",
    rope_base=500000.0,
    norm="rms",
    norm_eps=1e-6,
    ffn="glu",
    activation="silu",
    qkv_bias=False,
    out_bias=False,
    ffn_bias=False,
    num_kv_heads=2,
    tie_weights=False,
)
FAMILIES = {
    "gpt2": dict(activation="gelu_tanh"),
    "llama": LLAMA,
    "qwen2": {**LLAMA, "qkv_bias": True, "tie_weights": True},
    "mistral": {**LLAMA, "window": 3},
    "nope": dict(positions="none"),
    "sinusoidal": dict(positions="sinusoidal"),
    "alibi": dict(positions="alibi", norm="rms"),
    "attention-only": dict(ffn="none", positions="rope", num_layers=1),
    "flash": {**LLAMA, "attention": "flash"},
}


def _family(name: str) -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**SIZES, **FAMILIES[name]})).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


@pytest.mark.parametrize("name", list(FAMILIES))
def test_families_save_load_and_decode_with_a_cache(tmp_path, name):
    model = _family(name)
    ids = torch.randint(0, 23, (2, 9), generator=torch.Generator().manual_seed(1))
    full = model(ids)  # [B, T, V]
    small = _family(name).float()  # models save and load in float32
    small.save(tmp_path)
    again = load_model(tmp_path).eval()
    assert again.config == model.config
    torch.testing.assert_close(again(ids), small(ids), rtol=0, atol=0)
    state = model.start(ids[:, :4])
    rows = [state.last_logits]
    for t in range(4, 9):
        logits, state = model.step(ids[:, t], state)
        rows.append(logits)
    torch.testing.assert_close(torch.stack(rows, 1), full[:, 3:], rtol=0, atol=1e-10)
    later = ids.clone()
    later[:, 5:] = (later[:, 5:] + 1) % 23
    torch.testing.assert_close(model(later)[:, :5], full[:, :5], rtol=0, atol=1e-12)  # causal


def test_family_parameters_follow_the_config():
    names = {n for n, _ in _family("llama").named_parameters()}
    assert "blocks.0.ffn.linear3.weight" in names and "pos_embed.weight" not in names
    assert not any(n.endswith("bias") for n in names) and "lm_head.weight" in names
    qwen = {n for n, _ in _family("qwen2").named_parameters()}
    assert {n for n in qwen if n.endswith("bias")} == {
        f"blocks.{i}.self_attn.{p}_proj.bias" for i in range(2) for p in "qkv"
    }
    assert "lm_head.weight" not in qwen  # tied: one tensor, registered as the embedding
    assert type(_family("llama").norm).__name__ == "RMSNorm"
    assert not any(".ffn." in n or "norm3" in n for n, _ in _family("attention-only").named_parameters())
