"""attnlab.interp.equation: one query of one head, its numbers read from the forward, checked
against attnlab.ref on the same tensors (GPT-2-like, Llama-like with RoPE and GQA, ALiBi, a window,
and a BERT)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attnlab import ref
from attnlab.interp.equation import TEMPERATURES, entropy, query_math
from attnlab.models import GPT, BertConfig, BertEncoder, GPTConfig
from attnlab.nn.hooks import capture

LLAMA = dict(
    positions="rope",
    rope_layout="half",
    num_kv_heads=2,
    norm="rms",
    ffn="glu",
    activation="silu",
    qkv_bias=False,
)


def _gpt(**block):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=30, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=40, **block)
    return GPT(config).eval()


def _ids(t: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 30, (1, t), generator=torch.Generator().manual_seed(seed))


def _all_weights(model, ids, prefix="blocks"):
    with torch.inference_mode(), capture(model, [f"{prefix}.*.self_attn.weights"]) as cache:
        model(ids) if prefix == "blocks" else model.encode(ids)
    return torch.stack([cache[f"{prefix}.{i}.self_attn.weights"][0] for i in range(len(cache))])


@pytest.mark.parametrize(
    "block", [{}, LLAMA, {"positions": "alibi"}, {"window": 3}], ids=lambda b: str(b)[:20]
)
def test_each_step_recomputes_with_the_reference(block):
    model, ids = _gpt(**block), _ids()
    r = query_math(model, ids, 1, 3, 7)
    # the weights are the forward's own row, bit for bit (as the attention view captures it)
    assert torch.equal(r.weights.float(), _all_weights(model, ids)[1, 3, 7])
    # softmax(K q * scale + b + M) of the reference, on the same q and K, gives them
    mask = np.arange(12) <= 7 if "window" not in block else (np.arange(12) <= 7) & (np.arange(12) > 7 - 3)
    assert r.mask.numpy().tolist() == mask.tolist()
    bias = ref.alibi_bias(4, 12)[3, 7] if block.get("positions") == "alibi" else 0.0
    q, k, v = (x.numpy() for x in (r.q, r.k, r.v))
    want = ref.masked_softmax((k @ q) / math.sqrt(8) + bias, mask)  # d_k = 32 / 4
    assert np.abs(want - r.weights.numpy()).max() < 1e-6
    assert r.scale == 1 / math.sqrt(8) and r.checks()["softmax"] < 1e-6
    # z = a V is the head's output, and ref's whole attention agrees
    assert np.abs(want @ v - r.z.numpy()).max() < 1e-6 and r.checks()["av"] < 1e-6
    whole = ref.scaled_dot_product_attention(
        q[None], k, v, mask[None], bias=np.asarray(bias, dtype=np.float64) * np.ones((1, 12))
    )
    assert np.abs(whole[0] - r.z.numpy()).max() < 1e-6
    assert r.checks()["scores"] < 1e-5


def test_rope_rotates_q_and_k_and_names_the_gqa_group():
    model, ids = _gpt(**LLAMA), _ids()
    r = query_math(model, ids, 0, 3, 5)
    assert r.rotated and (r.kv_head, r.group, r.heads) == (1, [2, 3], 4)
    # q and k after the rotation are ref.apply_rope of q and k before it, at their positions
    q = ref.apply_rope(r.q_pre.numpy()[None], [5], layout="half")[0]
    k = ref.apply_rope(r.k_pre.numpy(), np.arange(12), layout="half")
    assert np.abs(q - r.q.numpy()).max() < 1e-5 and np.abs(k - r.k.numpy()).max() < 1e-5
    assert float((r.q - r.q_pre).abs().max()) > 1e-3  # it did turn
    # heads 2 and 3 read the same keys
    assert torch.equal(query_math(model, ids, 0, 2, 5).k, r.k)
    # a GPT-2 block does not rotate: before = after
    plain = query_math(_gpt(), ids, 0, 1, 5)
    assert not plain.rotated and torch.equal(plain.q, plain.q_pre) and plain.group == [1]


def test_the_layer_adds_up_at_that_position():
    model, ids = _gpt(), _ids()
    r = query_math(model, ids, 1, 0, 4)
    block = model.blocks[1]
    # o = Concat(z) W^O; u = x + o; y = u + FFN(N_2(u)) (pre-norm)
    w_o, b_o = block.self_attn.out_proj.weight.double(), block.self_attn.out_proj.bias.double()
    assert torch.allclose(r.concat @ w_o.T + b_o, r.attn_out, atol=1e-5)
    assert torch.equal(r.concat[:8], r.z)  # head 0's columns of Concat are its z
    assert torch.allclose(r.resid_pre + r.attn_out, r.resid_mid, atol=1e-5)
    assert torch.allclose(r.resid_mid + r.ffn_out, r.resid_post, atol=1e-5)
    with torch.inference_mode():
        assert torch.allclose(block.ffn(r.ffn_in.float()).double(), r.ffn_out, atol=1e-5)
        assert torch.allclose(block.norm1(r.resid_pre.float()).double(), r.attn_in, atol=1e-5)
    assert (r.norm_place, r.norm) == ("pre", "layer")


def test_what_ifs_no_scale_no_mask_and_temperature():
    model, ids = _gpt(), _ids()
    r = query_math(model, ids, 0, 2, 6)
    un = r.unscaled()
    keep = r.mask.numpy()
    assert np.abs(un["weights"].numpy() - ref.masked_softmax(r.raw.numpy(), keep)).max() < 1e-12
    assert un["entropy"][0] == pytest.approx(entropy(r.weights)) and un["max"][1] == float(
        un["weights"].max()
    )
    raw = r.raw.numpy()[keep]
    assert un["var_raw"] == pytest.approx(raw.var()) and un["var_scaled"] == pytest.approx(raw.var() / 8)
    # no mask: the future keys take weight, and nothing is masked any more
    free = r.unmasked()
    want = ref.softmax(r.raw.numpy() / math.sqrt(8))
    assert np.abs(free["weights"].numpy() - want).max() < 1e-12
    assert free["future_share"] == pytest.approx(want[7:].sum()) and free["future_share"] > 0
    assert {f["key"] for f in free["future"]} == set(range(7, 12))
    assert query_math(model, ids, 0, 2, 11).unmasked()["future_share"] == 0.0  # the last token: none
    # temperature on the next-token distribution at this position
    temps = r.temperatures()
    assert [t["temperature"] for t in temps] == list(TEMPERATURES)
    with torch.inference_mode():
        logits = model(ids)[0, 6].double()
    for t in temps:
        p = torch.softmax(logits / t["temperature"], -1)
        assert t["top"][0]["id"] == int(p.argmax()) and t["top"][0]["p"] == pytest.approx(float(p.max()))
    assert [t["entropy"] for t in temps] == sorted(t["entropy"] for t in temps)  # hotter: flatter


def test_an_encoder_sees_every_key_and_has_no_next_token():
    torch.manual_seed(0)
    model = BertEncoder(BertConfig(vocab_size=30, d_model=32, num_heads=4, num_layers=2, d_ff=64)).eval()
    ids = _ids(9)
    r = query_math(model, ids, 1, 1, 3)
    assert r.mask.all() and not r.causal and r.norm_place == "post"
    assert torch.equal(r.weights.float(), _all_weights(model, ids, "layers")[1, 1, 3])
    assert r.checks()["softmax"] < 1e-6 and r.checks()["av"] < 1e-6
    assert r.unmasked() is None and r.temperatures() is None
    assert torch.equal(r.ffn_in, r.resid_mid)  # post-norm: the FFN reads u = N_1(x + o)


@pytest.mark.parametrize(
    ("field", "value"),
    [("layer", 2), ("layer", -1), ("head", 4), ("head", "1"), ("position", 12), ("position", float("nan"))]
    + [("position", 10**30), ("layer", True), ("head", 1.0)],
)
def test_a_bad_layer_head_or_position_is_named(field, value):
    args = {"layer": 0, "head": 0, "position": 0, field: value}
    with pytest.raises(ValueError, match=rf"^{field}\b.*\binteger\b.*, got {re.escape(repr(value))}$"):
        query_math(_gpt(), _ids(), **args)


def test_attention_that_is_not_a_softmax_is_refused():
    with pytest.raises(ValueError, match="layer 0's attention"):
        query_math(_gpt(attention="linear"), _ids(), 0, 0, 0)
