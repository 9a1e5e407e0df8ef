"""Hook points: capture equals what each attention layer computes on its own explicit path, a patch
that zeroes one head equals zeroing that head's slice of W^O, globs, unknown names, declared shapes
that match the tensors, and nothing left behind (or made slower) when no hook is set."""

from __future__ import annotations

import re

import pytest
import torch

from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig
from attnlab.models.bert import BertConfig, BertEncoder
from attnlab.nn import MultiHeadAttention, capture, patch

GPT_SIZES = dict(vocab_size=31, d_model=16, num_heads=4, num_kv_heads=2, num_layers=3, d_ff=24, max_len=16)


def _gpt(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**GPT_SIZES, **kw})).double().eval()


def _ids(b: int = 2, t: int = 7) -> torch.Tensor:
    return torch.randint(0, 31, (b, t), generator=torch.Generator().manual_seed(1))


def test_captured_weights_equal_each_layers_explicit_path():
    """The weights a capture reads are those the attention layer computes on its own explicit path
    from the input it was given; capturing them changes no logit."""
    model, ids = _gpt(positions="rope", rope_layout="half"), _ids()
    with capture(model, ["blocks.*.self_attn.weights", "blocks.*.self_attn.x_q"]) as cache:
        logits = model(ids)
    assert sorted(n for n in cache if n.endswith("weights")) == [
        f"blocks.{i}.self_attn.weights" for i in range(3)
    ]
    for i in range(3):
        _, want = model.blocks[i].self_attn(
            cache[f"blocks.{i}.self_attn.x_q"], is_causal=True, need_weights=True
        )
        torch.testing.assert_close(cache[f"blocks.{i}.self_attn.weights"], want, rtol=0, atol=0)
    torch.testing.assert_close(logits, model(ids), rtol=0, atol=1e-12)


def test_captured_cross_attention_equals_the_layers_own_weights():
    torch.manual_seed(2)
    cfg = TransformerConfig(
        src_vocab=20,
        tgt_vocab=20,
        d_model=16,
        num_heads=2,
        d_ff=32,
        num_encoder_layers=1,
        num_decoder_layers=2,
    )
    t = Transformer(cfg).double().eval()
    src, tgt = torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 9, 4]])
    names = [
        "decoder.layers.1.cross_attn.*",
        "encoder.layers.0.self_attn.weights",
        "encoder.layers.0.resid_post",
    ]
    with capture(t, names) as cache:
        t(src, tgt)
    memory, keep = cache["encoder.layers.0.resid_post"], (src != 0)[:, None, :]  # post-norm: no final norm
    cross = t.decoder.layers[1].cross_attn
    _, want = cross(cache["decoder.layers.1.cross_attn.x_q"], memory, mask=keep, need_weights=True)
    torch.testing.assert_close(cache["decoder.layers.1.cross_attn.weights"], want, rtol=0, atol=1e-12)
    assert bool((want[..., 3] == 0).all())  # the padded source key gets nothing
    w = cache["encoder.layers.0.self_attn.weights"]  # [1, h, S, S]
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 2, 4, dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize("layer, head", [(0, 1), (2, 3)])
def test_zeroing_a_heads_z_equals_zeroing_its_slice_of_w_o(layer, head):
    """Ablating head j: z[..., j, :] = 0 is the same as zeroing the d_k input columns of W^O
    (torch's out_proj.weight [d_model, h*d_k]; rows j*d_k.. of W^O in the notes' x W convention)."""
    model, ids = _gpt(), _ids()
    d_k = 4

    def ablate(z: torch.Tensor) -> torch.Tensor:  # z [B, T, h, d_k]
        z = z.clone()
        z[:, :, head] = 0.0
        return z

    with patch(model, {f"blocks.{layer}.self_attn.z": ablate}):
        patched = model(ids)
    cut = _gpt()
    with torch.no_grad():
        cut.blocks[layer].self_attn.out_proj.weight[:, head * d_k : (head + 1) * d_k] = 0.0
    torch.testing.assert_close(patched, cut(ids), rtol=0, atol=1e-12)
    assert (patched - model(ids)).abs().max() > 1e-4  # the head mattered, and the patch is gone


def test_residual_stream_globs_and_final_norm_follow_the_stream():
    model, ids = _gpt(), _ids()
    with capture(model, ["blocks.*.resid_*", "embed", "final_norm"]) as cache:
        logits = model(ids)
    assert len(cache) == 3 * 3 + 2
    torch.testing.assert_close(cache["blocks.0.resid_pre"], cache["embed"], rtol=0, atol=0)
    for i in range(2):
        torch.testing.assert_close(
            cache[f"blocks.{i}.resid_post"], cache[f"blocks.{i + 1}.resid_pre"], rtol=0, atol=0
        )
    torch.testing.assert_close(cache["final_norm"], model.norm(cache["blocks.2.resid_post"]), rtol=0, atol=0)
    torch.testing.assert_close(model.lm_head(cache["final_norm"]), logits, rtol=0, atol=0)


def test_bert_resid_post_follows_the_stream_to_the_last_hidden_state():
    torch.manual_seed(3)
    bert = BertEncoder(BertConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=8))
    ids, keep = torch.tensor([[2, 5, 9, 3], [2, 7, 3, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    with capture(bert, ["embed", "layers.*.resid_*", "layers.1.ffn.hidden"]) as cache:
        out = bert(ids, keep)
    torch.testing.assert_close(cache["embed"], bert.embed_tokens(ids), rtol=0, atol=0)
    torch.testing.assert_close(cache["layers.0.resid_pre"], cache["embed"], rtol=0, atol=0)
    torch.testing.assert_close(cache["layers.1.resid_pre"], cache["layers.0.resid_post"], rtol=0, atol=0)
    torch.testing.assert_close(cache["layers.1.resid_post"], out.last_hidden_state, rtol=0, atol=0)
    assert cache["layers.1.ffn.hidden"].shape == (2, 4, 32)


def test_every_declared_shape_matches_the_captured_tensor():
    """hook_points() names every point with its shape; capturing '*' records each of them, and each
    tensor has the declared rank and the declared sizes."""
    model, (b, t) = _gpt(ffn="glu", activation="silu", norm="rms"), (2, 5)
    points = model.hook_points()
    assert points["blocks.1.self_attn.z"] == "[B, T_q, h, d_k]"
    assert points["blocks.0.ffn.hidden"] == "[B, T, d_ff]"
    assert list(points)[:4] == ["tok_embed", "embed", "final_norm", "blocks.0.resid_pre"]
    assert points["final_norm.scale"] == points["blocks.0.norm1.scale"] == "[B, T, 1]"
    with capture(model, ["*"]) as cache:
        model(_ids(b, t))
    assert set(cache) == set(points)
    sizes = {"B": b, "T": t, "T_q": t, "T_k": t, "T_new": t, "h": 4, "h_kv": 2, "d_k": 4, "d_model": 16}
    sizes |= {"d_ff": 24, "h*d_k": 16, "h_kv*d_k": 8, "1": 1}
    for name, shape in points.items():
        want = [sizes[s.strip()] for s in shape.strip("[]").split(",")]
        assert list(cache[name].shape) == want, name


def test_unknown_names_are_errors_with_close_matches():
    model = _gpt()
    with pytest.raises(
        ValueError,
        match=r"\bhook point\b.*'blocks\.0\.self_attn\.weight'.*\['blocks\.0\.self_attn\.weights'",
    ):
        with capture(model, ["blocks.0.self_attn.weight"]):
            pass
    with pytest.raises(ValueError, match=r"\bhook point\b.*'blocks\.9\.\*'"):
        with patch(model, {"blocks.9.*": lambda t: t}):
            pass
    with pytest.raises(ValueError, match=r"\bhook point\b.*'blah'.*\bGPT\.hook_points\(\)"):
        with capture(model, "blah"):
            pass
    assert all(m._hooks is None for m in model.modules() if hasattr(m, "_at"))  # nothing left installed


def test_hooks_leave_no_trace_and_weights_force_the_explicit_path_of_one_layer_only(monkeypatch):
    model, ids = _gpt(), _ids()
    calls = []
    explicit = MultiHeadAttention._explicit
    monkeypatch.setattr(
        MultiHeadAttention, "_explicit", lambda self, *a: calls.append(self) or explicit(self, *a)
    )
    want = model(ids)
    # no weights asked: the fused path
    with capture(model, ["blocks.*.self_attn.z", "blocks.*.self_attn.q_heads"]):
        model(ids)
    assert calls == []
    with capture(model, ["blocks.1.self_attn.weights"]):
        model(ids)
    assert calls == [model.blocks[1].self_attn]
    with pytest.raises(RuntimeError, match="boom"), patch(model, {"blocks.0.resid_post": lambda t: t * 0}):
        raise RuntimeError("boom")
    assert all(m._hooks is None for m in model.modules() if hasattr(m, "_at"))
    assert all("_hooks" not in vars(m) for m in model.modules())
    torch.testing.assert_close(model(ids), want, rtol=0, atol=0)


def test_capture_during_incremental_decoding_and_with_trace():
    model, ids = _gpt(), _ids(1, 6)
    state = model.start(ids[:, :4])
    with capture(model, ["blocks.0.self_attn.k_heads", "blocks.0.self_attn.weights"]) as cache:
        model.step(ids[:, 4], state)
    assert cache["blocks.0.self_attn.k_heads"].shape == (1, 2, 5, 4)  # the cached keys and the new one
    assert cache["blocks.0.self_attn.weights"].shape == (1, 4, 1, 5)
    seen = []
    attn = model.blocks[0].self_attn
    attn.trace = lambda name, t: seen.append(name)
    with capture(model, ["blocks.0.self_attn.out"]) as cache:
        model(ids)
    attn.trace = None
    assert seen == list(MultiHeadAttention.POINTS) and "blocks.0.self_attn.out" in cache
    assert attn._hooks is None


def test_the_shape_audit_labels_every_declared_attention_point():
    from attnlab.audit.shapes import TRACE_LABELS

    assert set(MultiHeadAttention.POINTS) <= set(TRACE_LABELS)


@pytest.mark.parametrize(
    "replace,returned",
    [
        (lambda x: x.mean(1, keepdim=True), "[1, 1, 16] float64"),  # would broadcast into [1, 1, V] logits
        (lambda x: x.float(), "[1, 7, 16] float32"),
        (lambda x: x.numpy(), "a ndarray, not a torch tensor"),
    ],
)
def test_a_patch_must_return_the_points_shape_dtype_and_device(replace, returned):
    """A replacement that is not a tensor of the point's shape, dtype and device is one ValueError
    naming the point, what came back and what was expected; the hook is gone afterwards."""
    model, ids = _gpt(), _ids(1, 7)
    with torch.no_grad():
        want = model(ids)
        message = f"patch for blocks.0.resid_post returned {returned}; expected [1, 7, 16] float64"
        with pytest.raises(ValueError, match=re.escape(message)):
            with patch(model, {"blocks.0.resid_post": replace}):
                model(ids)
        with patch(model, {"blocks.*.resid_post": lambda x: None, "blocks.1.self_attn.z": lambda z: z * 1}):
            torch.testing.assert_close(model(ids), want, rtol=0, atol=0)  # None and same-shaped: accepted
    assert all("_hooks" not in vars(m) for m in model.modules())
