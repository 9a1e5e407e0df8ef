"""Modern blocks as BlockConfigs: RMSNorm, SwiGLU, rotate-half RoPE, bias switches, sliding windows,
attention-only blocks — against Hugging Face transformers' Llama/Qwen2 layers and the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.nn import (
    BlockConfig,
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    KVCache,
    MultiHeadAttention,
    apply_rope,
)
from attnlab.nn.layers import make_norm
from attnlab.nn.positions import rope_cos_sin

TOL64 = 1e-10
LLAMA = dict(
    num_kv_heads=2,
    norm="rms",
    norm_eps=1e-6,
    norm_place="pre",
    ffn="glu",
    activation="silu",
    qkv_bias=False,
    out_bias=False,
    ffn_bias=False,
    positions="rope",
    rope_layout="half",
    rope_base=500000.0,
)


def _x(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _randomise(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    module = module.double().eval()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return module


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_layouts_match_reference(layout):
    x = _x(0, 2, 3, 5, 8)  # [B, h, T, d]
    pos = np.arange(2, 7)
    cos, sin = rope_cos_sin(torch.from_numpy(pos), 8, 500.0, torch.float64)
    got = apply_rope(x, cos, sin, layout=layout).numpy()
    np.testing.assert_allclose(got, ref.apply_rope(x.numpy(), pos, 500.0, layout=layout), rtol=0, atol=TOL64)


def test_half_layout_is_the_interleaved_rotation_on_permuted_features():
    """Pair i is (i, i + d/2) in 'half' and (2i, 2i+1) in 'interleaved': same rotation, features moved."""
    x = _x(1, 4, 6, 10)  # [h, T, d]
    pos = np.arange(6)
    perm = np.stack([np.arange(5), np.arange(5) + 5], axis=1).reshape(-1)  # 0, 5, 1, 6, ... -> interleaved
    half = ref.apply_rope(x.numpy(), pos, layout="half")
    inter = ref.apply_rope(x.numpy()[..., perm], pos, layout="interleaved")
    np.testing.assert_allclose(half[..., perm], inter, rtol=0, atol=TOL64)
    with pytest.raises(ValueError, match=r"^layout\b.*\['interleaved', 'half'\], got 'neox'"):
        ref.apply_rope(x.numpy(), pos, layout="neox")
    with pytest.raises(ValueError, match=r"^layout\b.*'half'.*, got 'neox'"):
        apply_rope(x, *rope_cos_sin(torch.arange(6), 10), layout="neox")


def test_rope_half_equals_transformers_rotate_half():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, k = _x(2, 1, 4, 6, 16), _x(3, 1, 2, 6, 16)
    pos = torch.arange(6)
    cos, sin = rope_cos_sin(pos, 16, 10000.0, torch.float64)  # [T, d/2]
    hf_cos, hf_sin = torch.cat([cos, cos], -1)[None], torch.cat([sin, sin], -1)[None]  # [1, T, d]
    want_q, want_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    torch.testing.assert_close(apply_rope(q, cos, sin, layout="half"), want_q, rtol=0, atol=TOL64)
    torch.testing.assert_close(apply_rope(k, cos, sin, layout="half"), want_k, rtol=0, atol=TOL64)


def test_rms_norm_matches_reference():
    norm = _randomise(make_norm(BlockConfig(8, 2, norm="rms", norm_eps=1e-6)), 4)
    x = _x(5, 2, 3, 8)
    want = ref.rms_norm(x.numpy(), norm.weight.detach().numpy(), eps=1e-6)
    np.testing.assert_allclose(norm(x).detach().numpy(), want, rtol=0, atol=TOL64)
    assert not any("bias" in n for n, _ in norm.named_parameters())


@pytest.mark.parametrize("activation", ["silu", "gelu", "relu", "gelu_tanh"])
def test_glu_ffn_is_act_gate_times_up_then_down(activation):
    """FFN_GLU(x) = (act(x W_1) * x W_3) W_2, checked through the reference's activations."""
    ffn = _randomise(FeedForward(BlockConfig(6, 2, 10, ffn="glu", activation=activation, ffn_bias=False)), 6)
    x = _x(7, 2, 3, 6).numpy()
    w1, w2, w3 = (getattr(ffn, f"linear{i}").weight.detach().numpy().T for i in (1, 2, 3))
    act = {
        "silu": lambda z: z / (1 + np.exp(-z)),
        "gelu": ref.gelu,
        "relu": ref.relu,
        "gelu_tanh": lambda z: ref.gelu(z, approximate="tanh"),
    }[activation]
    want = (act(x @ w1) * (x @ w3)) @ w2
    np.testing.assert_allclose(ffn(torch.from_numpy(x)).detach().numpy(), want, rtol=0, atol=TOL64)


def _copy_hf_layer(ours: DecoderLayer, theirs) -> None:
    pairs = {
        "self_attn.q_proj": "self_attn.q_proj",
        "self_attn.k_proj": "self_attn.k_proj",
        "self_attn.v_proj": "self_attn.v_proj",
        "self_attn.out_proj": "self_attn.o_proj",
        "norm1": "input_layernorm",
        "norm3": "post_attention_layernorm",
        "ffn.linear1": "mlp.gate_proj",
        "ffn.linear3": "mlp.up_proj",
        "ffn.linear2": "mlp.down_proj",
    }
    with torch.no_grad():
        for a, b in pairs.items():
            dst, src = ours.get_submodule(a), theirs.get_submodule(b)
            dst.weight.copy_(src.weight)
            dst_bias = getattr(dst, "bias", None)
            assert (dst_bias is None) == (getattr(src, "bias", None) is None), a
            if dst_bias is not None:
                dst.bias.copy_(src.bias)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_decoder_block_equals_transformers_layer(family):
    """A Llama block (RMSNorm, SwiGLU, rotate-half RoPE with theta, GQA, no biases) and Qwen2's (Q/K/V
    biases only) equal transformers' own decoder layers on the same weights."""
    if family == "llama":
        from transformers import LlamaConfig as Config
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer as Layer
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as Rotary
    else:
        from transformers import Qwen2Config as Config
        from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer as Layer
        from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding as Rotary
    hf_cfg = Config(
        hidden_size=32,
        intermediate_size=44,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        rope_theta=500000.0,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    theirs = _randomise(Layer(hf_cfg, layer_idx=0), 8)
    block = BlockConfig(32, 4, 44, **{**LLAMA, "qkv_bias": family == "qwen2"})
    ours = DecoderLayer(block, cross_attention=False).double().eval()
    _copy_hf_layer(ours, theirs)
    x = _x(9, 2, 7, 32)
    pos = torch.arange(7)[None].expand(2, 7)
    cos_sin = Rotary(hf_cfg)(x, pos)
    causal = torch.full((7, 7), float("-inf"), dtype=torch.float64).triu(1)[None, None]  # [1, 1, T, T]
    out = theirs(x, attention_mask=causal, position_ids=pos, position_embeddings=cos_sin)
    want = out[0] if isinstance(out, tuple) else out
    # transformers computes RoPE's frequencies and RMSNorm in float32 even for float64 inputs: 1e-5
    torch.testing.assert_close(ours(x, is_causal=True), want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("window", [1, 3, 9])
@pytest.mark.parametrize("attention", ["sdpa", "explicit", "flash"])
def test_sliding_window_matches_reference_with_its_mask(ref_mha_params, window, attention):
    cfg = BlockConfig(
        16, 4, num_kv_heads=2, positions="rope", rope_layout="half", window=window, attention=attention
    )
    m = _randomise(MultiHeadAttention(cfg), 10)
    x = _x(11, 2, 6, 16)
    want, _ = ref.multi_head_attention(
        x.numpy(),
        None,
        ref_mha_params(m),
        4,
        num_kv_heads=2,
        mask=ref.sliding_window_mask(6, 6, window),
        positions="rope",
        rope_layout="half",
    )
    got, _ = m(x, is_causal=True)
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=0, atol=TOL64)
    cache = KVCache()  # decoding: the window slides over the cached keys
    rows = [m(x[:, :2], is_causal=True, cache=cache)[0]]
    rows += [m(x[:, t : t + 1], is_causal=True, cache=cache)[0] for t in range(2, 6)]
    np.testing.assert_allclose(torch.cat(rows, 1).detach().numpy(), want, rtol=0, atol=TOL64)


def test_explicit_attention_kind_always_returns_the_same_as_sdpa():
    fast = _randomise(MultiHeadAttention(BlockConfig(16, 4, positions="alibi")), 12)
    slow = MultiHeadAttention(BlockConfig(16, 4, positions="alibi", attention="explicit")).double().eval()
    slow.load_state_dict(fast.state_dict())
    x = _x(13, 2, 5, 16)
    torch.testing.assert_close(slow(x, is_causal=True)[0], fast(x, is_causal=True)[0], rtol=0, atol=1e-12)


def test_bias_switches_are_separate():
    def biases(**kw):
        layer = EncoderLayer(BlockConfig(8, 2, 16, **kw))
        return sorted(n for n, _ in layer.named_parameters() if n.endswith("bias") and "norm" not in n)

    qkv = ["self_attn.k_proj.bias", "self_attn.q_proj.bias", "self_attn.v_proj.bias"]
    ffn = ["ffn.linear1.bias", "ffn.linear2.bias"]
    assert biases(qkv_bias=True, out_bias=False, ffn_bias=False) == qkv
    assert biases(qkv_bias=False, out_bias=True, ffn_bias=False) == ["self_attn.out_proj.bias"]
    assert biases(qkv_bias=False, out_bias=False, ffn_bias=True) == ffn
    assert biases() == sorted([*qkv, "self_attn.out_proj.bias", *ffn])


@pytest.mark.parametrize("place", ["post", "pre"])
def test_attention_only_block_has_no_ffn(ref_mha_params, place):
    """ffn='none': Y = N_1(X + MHA(X)) (post) or X + MHA(N_1(X)) (pre), nothing after it."""
    layer = _randomise(EncoderLayer(BlockConfig(8, 2, ffn="none", norm_place=place)), 14)
    assert layer.ffn is None and layer.norm2 is None
    assert not any(n.startswith(("ffn", "norm2")) for n, _ in layer.named_parameters())
    x = _x(15, 1, 4, 8).numpy()
    g, b = layer.norm1.weight.detach().numpy(), layer.norm1.bias.detach().numpy()
    p = ref_mha_params(layer.self_attn)
    if place == "pre":
        want = x + ref.multi_head_attention(ref.layer_norm(x, g, b), None, p, 2)[0]
    else:
        want = ref.layer_norm(x + ref.multi_head_attention(x, None, p, 2)[0], g, b)
    np.testing.assert_allclose(layer(torch.from_numpy(x)).detach().numpy(), want, rtol=0, atol=TOL64)
    dec = DecoderLayer(BlockConfig(8, 2, ffn="none"), cross_attention=False)
    assert dec.ffn is None and dec.norm3 is None
    with pytest.raises(ValueError, match=r"^FeedForward\b.*\bffn\b.*'none'"):
        FeedForward(BlockConfig(8, 2, ffn="none"))


def test_cross_attention_takes_no_positions_or_window():
    layer = DecoderLayer(BlockConfig(8, 2, positions="rope", window=2))
    assert layer.self_attn.positions == "rope" and layer.self_attn.window == 2
    assert layer.cross_attn.positions is None and layer.cross_attn.window is None
