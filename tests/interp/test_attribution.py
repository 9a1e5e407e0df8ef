"""Direct logit attribution: the parts add up to the model's logit (difference) on GPT-2-, Llama- and
attention-only-shaped decoders; the residual stream's parts add up to h_L; the accumulated stream's
steps are the sub-blocks' writes; the norm-scale hook point is 1/sigma and freezing it is exact."""

from __future__ import annotations

import pytest
import torch

from attnlab.interp.attribution import (
    accumulated_attribution,
    accumulated_resid,
    decompose_resid,
    frozen_final_norm,
    head_outputs,
    logit_attribution,
    run_with_cache,
)
from attnlab.models import GPT, GPTConfig
from attnlab.nn import capture, patch

FAMILIES = {
    "gpt2": dict(positions="learned", activation="gelu_tanh"),
    "llama": dict(
        norm="rms",
        ffn="glu",
        activation="silu",
        positions="rope",
        rope_layout="half",
        num_kv_heads=2,
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        tie_weights=False,
    ),
    "attention-only": dict(positions="rope", ffn="none", tie_weights=False),
}


def _model(family: str, dtype=torch.float64) -> GPT:
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=29, d_model=16, num_heads=4, num_layers=3, d_ff=24, max_len=16, **FAMILIES[family]
        )
    )
    with torch.no_grad():  # non-zero biases and gains, so a part that drops one shows
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.to(dtype).eval()


def _ids(b: int = 2, t: int = 9) -> torch.Tensor:
    return torch.randint(0, 29, (b, t), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
def test_parts_add_up_to_the_logit(family, dtype, tol):
    model, ids = _model(family, dtype), _ids()
    want = model(ids)  # the plain forward (fused norms), not the hooked run's
    for wrong, position in ((None, -1), (7, -1), (7, 3)):
        attr = logit_attribution(model, ids, 5, wrong, position=position)
        logit = want[:, position, 5] - (0 if wrong is None else want[:, position, 7])
        torch.testing.assert_close(attr.values.sum(0), logit.detach(), rtol=0, atol=tol)
        torch.testing.assert_close(attr.logit, logit.detach(), rtol=0, atol=tol)
    heads = attr.heads()  # [L, h, B]
    assert heads.shape == (3, 4, 2)
    assert attr.labels[0] == "embed" and ("final_norm bias" in attr.labels) == (family != "llama")
    assert ("mlp 2" in attr.labels) == (family != "attention-only")
    assert abs(attr.top(1)[0][1]) == float(attr.values[:, 0].abs().max())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_residual_parts_and_heads_add_up(family):
    model, ids = _model(family), _ids()
    _, cache = run_with_cache(model, ids)
    last = cache["blocks.2.resid_post"]
    for heads in (False, True):
        parts = decompose_resid(model, cache, heads=heads)
        torch.testing.assert_close(parts.stack.sum(0), last, rtol=0, atol=1e-12)
    for layer in range(3):  # the heads' writes plus b^O are the attention sub-block's output
        attn = model.blocks[layer].self_attn
        bias = 0 if attn.out_proj.bias is None else attn.out_proj.bias
        got = head_outputs(model, cache, layer).sum(2) + bias
        torch.testing.assert_close(got, cache[f"blocks.{layer}.self_attn.out"], rtol=0, atol=1e-12)


def test_accumulated_stream_steps_are_the_writes_and_its_end_is_the_logit():
    model, ids = _model("gpt2"), _ids()
    _, cache = run_with_cache(model, ids)
    acc = accumulated_resid(model, cache)
    assert acc.labels == ["0_pre", "0_mid", "1_pre", "1_mid", "2_pre", "2_mid", "final_post"]
    steps = acc.stack[1:] - acc.stack[:-1]  # [6, B, T, d]
    for layer in range(3):
        torch.testing.assert_close(
            steps[2 * layer], cache[f"blocks.{layer}.self_attn.out"], rtol=0, atol=1e-12
        )
        torch.testing.assert_close(steps[2 * layer + 1], cache[f"blocks.{layer}.ffn.out"], rtol=0, atol=1e-12)
    assert accumulated_resid(model, cache, mid=False).labels == ["0_pre", "1_pre", "2_pre", "final_post"]
    labels, values = accumulated_attribution(model, ids, 5, 7)
    logits = model(ids).detach()
    torch.testing.assert_close(values[-1], logits[:, -1, 5] - logits[:, -1, 7], rtol=0, atol=1e-10)
    assert labels == acc.labels


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_norm_scale_point_is_one_over_sigma_and_freezing_it_is_exact(family):
    model, ids = _model(family), _ids()
    with capture(
        model, ["final_norm.scale", "final_norm", "blocks.2.resid_post", "blocks.1.norm1.scale"]
    ) as c:
        model(ids)
    x = c["blocks.2.resid_post"]  # what the final norm reads
    centred = x - x.mean(-1, keepdim=True) if family == "gpt2" else x
    eps = model.norm.eps
    torch.testing.assert_close(
        c["final_norm.scale"], torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps)
    )
    bias = 0 if getattr(model.norm, "bias", None) is None else model.norm.bias
    frozen = frozen_final_norm(model, x, c["final_norm.scale"]) + bias
    torch.testing.assert_close(frozen, c["final_norm"], rtol=0, atol=1e-12)
    assert c["blocks.1.norm1.scale"].shape == (2, 9, 1)
    # replacing the scale is what the norm then multiplies by: twice the scale, twice N(x) - b
    with capture(model, ["final_norm"]) as doubled, patch(model, {"final_norm.scale": lambda s: 2 * s}):
        model(ids)
    torch.testing.assert_close(doubled["final_norm"] - bias, 2 * (c["final_norm"] - bias), rtol=0, atol=1e-12)


def test_huge_inputs_keep_their_scale_finite():
    """The hooked norm path rescales rows beyond 2^32 as the fused path does: 1e30 gives finite
    numbers and the same normalised output as 1."""
    model = _model("llama", torch.float32)
    x = torch.randn(1, 3, 16, generator=torch.Generator().manual_seed(2))
    with capture(model, ["final_norm.scale"]) as c:
        big = model.norm(x * 1e30)
    assert torch.isfinite(c["final_norm.scale"]).all()
    torch.testing.assert_close(big, model.norm(x), rtol=1e-5, atol=1e-5)


def test_bad_input_is_one_named_error():
    model, ids = _model("gpt2"), _ids()
    with pytest.raises(ValueError, match=r"^target\b.*\b0\.\.28\b.* 29$"):
        logit_attribution(model, ids, 29)
    with pytest.raises(ValueError, match=r"^position 9\b.*\b9 tokens\b"):
        logit_attribution(model, ids, 1, position=9)
    with pytest.raises(ValueError, match="eval mode"):
        logit_attribution(model.train(), ids, 1)
    from attnlab.models.bert import BertConfig, BertEncoder

    with pytest.raises(ValueError, match="needs a decoder-only model"):
        logit_attribution(
            BertEncoder(BertConfig(vocab_size=20, d_model=8, num_heads=2, num_layers=1)), ids, 1
        )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda m, ids: logit_attribution(m, [[1, 2, 3]], 5),
            r"ids must be an integer tensor \[B, T\], got list",
        ),
        (
            lambda m, ids: logit_attribution(m, torch.tensor([1, 2, 3]), 5),
            r"ids must be an integer tensor \[B, T\] with B, T >= 1, got shape \[3\] "
            r"\(one sequence: ids\[None\]\)",
        ),
        (
            lambda m, ids: logit_attribution(m, ids.double(), 5),
            r"ids must be an integer tensor \[B, T\], got dtype torch.float64",
        ),
        (lambda m, ids: logit_attribution(m, ids, 5, position=2.0), r"position must be an integer, got 2.0"),
        (
            lambda m, ids: logit_attribution(m, ids, 5, position=True),
            r"position must be an integer, got True",
        ),
        (
            lambda m, ids: logit_attribution(m, ids, 5, position=-10),
            r"position -10 is outside the 9 tokens \(-9..8\)",
        ),
        (
            lambda m, ids: accumulated_attribution(m, ids, 5, position=100),
            r"position 100 is outside the 9 tokens",
        ),
        (
            lambda m, ids: accumulated_attribution(m, ids, True),
            r"target must be a token id \(an integer\) in 0..28, got True",
        ),
        (lambda m, ids: logit_attribution(m, ids, 5, wrong=-1), r"wrong must be a token id in 0..28, got -1"),
        (
            lambda m, ids: logit_attribution(m, ids, torch.tensor([5])),
            r"target must be a token id \(an integer\)",
        ),
        (
            lambda m, ids: head_outputs(m, run_with_cache(m, ids)[1], 5),
            r"layer 5 is out of range: the model has layers 0..2",
        ),
        (
            lambda m, ids: head_outputs(m, run_with_cache(m, ids)[1], -1),
            r"layer -1 is out of range: the model has layers 0..2",
        ),
    ],
)
def test_attribution_arguments_are_checked_by_name(call, message):
    """ids are an integer tensor [B, T]; position an int, negative counting from the end; layer an int
    from 0 (negative refused); target an id of the vocabulary (trial B, #15)."""
    model, ids = _model("gpt2"), _ids()
    with pytest.raises(ValueError, match=f"^{message}"):
        call(model, ids)


def test_a_tensor_or_numpy_integer_target_is_that_id():
    """A 0-d integer tensor or a NumPy integer is the id it holds, not "out of range" (trial B, #23)."""
    import numpy as np

    model, ids = _model("gpt2"), _ids()
    want = logit_attribution(model, ids, 5, 7, position=-2)
    for target, wrong, position in (
        (torch.tensor(5), np.int64(7), np.int32(-2)),
        (np.int16(5), torch.tensor(7), torch.tensor(-2)),
    ):
        got = logit_attribution(model, ids, target, wrong, position=position)
        assert (got.target, got.wrong, got.position) == (5, 7, -2) and torch.equal(got.values, want.values)
    labels, values = accumulated_attribution(model, ids, torch.tensor(5), position=np.int64(-1))
    torch.testing.assert_close(values, accumulated_attribution(model, ids, 5)[1], rtol=0, atol=0)
