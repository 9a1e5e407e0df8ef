"""Bad input: every mistake is a ValueError whose message names the argument and the shapes involved
(never a NumPy broadcasting traceback, never a NaN result)."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab import ref

g = np.random.default_rng(0)
Q, K, V = g.normal(size=(2, 3, 4)), g.normal(size=(2, 5, 4)), g.normal(size=(2, 5, 6))
X = g.normal(size=(2, 3, 8))
P8 = {k: g.normal(size=(8, 8)) for k in ("W_q", "W_k", "W_v", "W_o")}
NAN_Q = Q.copy()
NAN_Q[1, 2, 3] = np.nan
NAN_P = dict(P8, W_v=np.where(np.eye(8) > 0, np.nan, 1.0))
LN = {"gamma": np.ones(8), "beta": np.zeros(8)}
FFN = {"W_1": g.normal(size=(8, 16)), "W_2": g.normal(size=(16, 8))}
ENC = {"attn": P8, "ffn": FFN, "norm1": LN, "norm2": LN}

CASES = {
    # mismatched widths
    "sdpa d_k": (
        lambda: ref.scaled_dot_product_attention(Q, K[..., :3], V),
        ["k has d_k=3", "q has d_k=4", "[2, 3, 4]", "[2, 5, 3]"],
    ),
    "sdpa T_k": (
        lambda: ref.scaled_dot_product_attention(Q, K, V[:, :4]),
        ["v has T_k=4", "k has T_k=5", "[2, 4, 6]"],
    ),
    "sdpa batch": (
        lambda: ref.scaled_dot_product_attention(Q, np.tile(K, (3, 1, 1)), np.tile(V, (3, 1, 1))),
        ["q [2, 3, 4]", "k [6, 5, 4]", "do not broadcast"],
    ),
    "mha W_q rows": (
        lambda: ref.multi_head_attention(X[..., :6], None, P8, 2),
        ["W_q", "[8, 8]", "d_model=6"],
    ),
    "mha kv batch": (lambda: ref.multi_head_attention(X, X[:1], P8, 2), ["x_kv", "batch 1", "batch 2"]),
    "additive W_a": (
        lambda: ref.additive_attention(Q, K, np.ones((3, 2)), np.ones((4, 2)), np.ones(2)),
        ["W_a has 3 rows", "d_s=4"],
    ),
    "additive d_a": (
        lambda: ref.additive_attention(Q, K, np.ones((4, 2)), np.ones((4, 3)), np.ones(2)),
        ["W_a [4, 2]", "U_a [4, 3]", "v_a [2]"],
    ),
    "luong dot": (lambda: ref.luong_attention(Q, V, "dot"), ["d_s=4", "d_h=6"]),
    "luong general": (
        lambda: ref.luong_attention(Q, V, "general", W=np.ones((6, 4))),
        ["W has shape [6, 4]", "[4, 6]"],
    ),
    "layer_norm gamma": (lambda: ref.layer_norm(X, np.ones(7), np.zeros(7)), ["gamma [7]", "width 8"]),
    "rms_norm gamma": (lambda: ref.rms_norm(X, np.ones(3)), ["gamma [3]", "width 8"]),
    "ffn W_1": (lambda: ref.feed_forward(X[..., :5], FFN), ["W_1 has shape [8, 16]", "d_model=5"]),
    "ffn W_2": (
        lambda: ref.feed_forward(X, {"W_1": np.ones((8, 16)), "W_2": np.ones((15, 8))}),
        ["W_2 has shape [15, 8]", "d_ff=16"],
    ),
    "rope positions": (lambda: ref.apply_rope(Q, np.arange(4)), ["positions has shape [4]", "T=3"]),
    "rope odd width": (lambda: ref.apply_rope(V[..., :5], np.arange(5)), ["d=5", "[2, 5, 5]"]),
    # wrong ranks
    "sdpa rank": (lambda: ref.scaled_dot_product_attention(np.ones(4), K, V), ["q", "at least 2", "[4]"]),
    "mha rank": (lambda: ref.multi_head_attention(X[0], None, P8, 2), ["x_q", "rank 3", "[3, 8]"]),
    "encoder rank": (lambda: ref.encoder_layer(X[0], ENC, 2), ["x", "rank 3", "[3, 8]"]),
    "decoder memory rank": (lambda: ref.decoder_layer(X, X[0], {}, 2), ["memory", "rank 3", "[3, 8]"]),
    "v_a rank": (
        lambda: ref.additive_attention(Q, K, np.ones((4, 2)), np.ones((4, 2)), np.ones((2, 1))),
        ["v_a", "rank 1", "[2, 1]"],
    ),
    "merge_heads rank": (lambda: ref.merge_heads(np.ones((3, 4))), ["x", "at least 3", "[3, 4]"]),
    "W_q rank": (
        lambda: ref.multi_head_attention(X, None, dict(P8, W_q=np.ones(8)), 2),
        ["params['W_q']", "rank 2", "[8]"],
    ),
    # masks that do not broadcast / are not boolean
    "sdpa mask": (
        lambda: ref.scaled_dot_product_attention(Q, K, V, np.ones((3, 4), dtype=bool)),
        ["mask of shape [3, 4]", "[2, 3, 5]"],
    ),
    "sdpa float mask": (
        lambda: ref.scaled_dot_product_attention(Q, K, V, np.zeros((3, 5))),
        ["mask must be boolean", "float64"],
    ),
    "mha mask": (
        lambda: ref.multi_head_attention(X, None, P8, 2, mask=np.ones((2, 3, 4), dtype=bool)),
        ["mask of shape [2, 3, 4]", "[2, 3, 3]"],
    ),
    "additive mask": (
        lambda: ref.additive_attention(
            Q, K, np.ones((4, 2)), np.ones((4, 2)), np.ones(2), mask=np.ones((2, 1, 4), dtype=bool)
        ),
        ["mask of shape [2, 1, 4]", "[2, 3, 5]"],
    ),
    "bias": (
        lambda: ref.scaled_dot_product_attention(Q, K, V, bias=np.ones((4, 4))),
        ["bias", "[4, 4]", "[2, 3, 5]"],
    ),
    # heads
    "d_model % num_heads": (
        lambda: ref.multi_head_attention(X, None, P8, 3),
        ["d_model", "[8, 8]", "num_heads=3"],
    ),
    "split_heads": (lambda: ref.split_heads(X, 3), ["width 8", "[2, 3, 8]", "num_heads=3"]),
    "num_heads % num_kv_heads": (
        lambda: ref.multi_head_attention(X, None, P8, 4, num_kv_heads=3),
        ["num_heads=4", "num_kv_heads=3"],
    ),
    "W_k for kv heads": (
        lambda: ref.multi_head_attention(X, None, P8, 4, num_kv_heads=2),
        ["W_k [8, 8]", "num_kv_heads*d_k", "2*2"],
    ),
    "num_heads zero": (lambda: ref.multi_head_attention(X, None, P8, 0), ["num_heads", "positive", "0"]),
    "W_o": (
        lambda: ref.multi_head_attention(X, None, dict(P8, W_o=np.ones((6, 8))), 2),
        ["W_o", "[6, 8]", "2*4"],
    ),
    # NaN inputs
    "sdpa NaN": (lambda: ref.scaled_dot_product_attention(NAN_Q, K, V), ["q contains NaN", "[2, 3, 4]"]),
    "softmax NaN": (lambda: ref.softmax(np.array([1.0, np.nan])), ["x contains NaN", "[2]"]),
    "mha NaN weight": (
        lambda: ref.multi_head_attention(X, None, NAN_P, 2),
        ["params['W_v'] contains NaN", "[8, 8]"],
    ),
    "layer_norm NaN": (
        lambda: ref.layer_norm(np.full((2, 8), np.nan), np.ones(8), np.zeros(8)),
        ["x contains NaN", "[2, 8]"],
    ),
    "additive NaN": (
        lambda: ref.additive_attention(Q, K, np.full((4, 2), np.nan), np.ones((4, 2)), np.ones(2)),
        ["W_a contains NaN", "[4, 2]"],
    ),
    "ffn NaN": (
        lambda: ref.feed_forward(X, dict(FFN, b_2=np.full(8, np.inf))),
        ["params['b_2'] contains NaN", "[8]"],
    ),
    "encoder NaN": (
        lambda: ref.encoder_layer(np.where(np.eye(3, 8) > 0, np.nan, X), ENC, 2),
        ["x contains NaN", "[2, 3, 8]"],
    ),
    # options and other values
    "empty row": (lambda: ref.scaled_dot_product_attention(Q, K, V, np.arange(5) > 9), ["query row (0, 0)"]),
    "empty_rows value": (
        lambda: ref.scaled_dot_product_attention(Q, K, V, np.ones(5, bool), empty_rows="nan"),
        ["empty_rows", "'nan'"],
    ),
    "luong kind": (lambda: ref.luong_attention(Q, K, "bilinear"), ["kind", "'bilinear'"]),
    "norm": (lambda: ref.encoder_layer(X, ENC, 2, norm="sandwich"), ["norm", "'sandwich'"]),
    "activation": (lambda: ref.feed_forward(X, FFN, "swish"), ["activation", "'swish'"]),
    "positions": (
        lambda: ref.multi_head_attention(X, None, P8, 2, positions="learned"),
        ["positions", "'learned'"],
    ),
    "padding lengths": (lambda: ref.padding_mask(np.array([3, 0]), 3), ["lengths", "1..3", "[3, 0]"]),
    "padding rank": (lambda: ref.padding_mask(np.ones((2, 2), dtype=int), 3), ["lengths", "[2, 2]"]),
    "window": (lambda: ref.sliding_window_mask(3, 3, window=0), ["window", "positive"]),
    "gelu approximate": (lambda: ref.gelu(X, approximate="sigmoid"), ["approximate", "'sigmoid'"]),
    "string input": (lambda: ref.softmax(np.array(["a", "b"])), ["x must be a numeric array"]),
    "layer_norm eps zero": (
        lambda: ref.layer_norm(np.ones((2, 8)), np.ones(8), np.zeros(8), eps=0.0),
        ["row (0,)", "constant", "eps=0"],
    ),
    "layer_norm eps negative": (
        lambda: ref.layer_norm(X, np.ones(8), np.zeros(8), eps=-1.0),
        ["eps", ">= 0", "-1.0"],
    ),
    "rms_norm eps zero": (lambda: ref.rms_norm(np.zeros((2, 8)), np.ones(8), eps=0.0), ["row (0,)", "eps=0"]),
    "rope base": (lambda: ref.apply_rope(V[..., :4], np.arange(5), base=0.0), ["base", "> 0", "0.0"]),
    "empty_rows without mask": (
        lambda: ref.scaled_dot_product_attention(Q, K, V, empty_rows="nan"),
        ["empty_rows", "'nan'"],
    ),
    "sdpa scale NaN": (
        lambda: ref.scaled_dot_product_attention(Q, K, V, scale=float("nan")),
        ["scale must be a finite number", "nan"],
    ),
    "sdpa no keys": (
        lambda: ref.scaled_dot_product_attention(Q, K[:, :0], V[:, :0]),
        ["k has T_k=0", "[2, 0, 4]"],
    ),
    "softmax empty axis": (lambda: ref.softmax(np.ones((2, 0))), ["x has no entries", "[2, 0]"]),
    "log_softmax axis": (lambda: ref.log_softmax(np.ones((2, 3)), axis=2), ["axis=2", "x", "[2, 3]"]),
    "encoder missing group": (
        lambda: ref.encoder_layer(X, {"attn": P8, "ffn": FFN}, 2),
        ["params is missing 'norm1'", "['attn', 'ffn']"],
    ),
    "decoder missing group": (
        lambda: ref.decoder_layer(X, X, {"self_attn": P8}, 2),
        ["params is missing 'cross_attn'"],
    ),
    "norm missing gamma": (
        lambda: ref.encoder_layer(X, dict(ENC, norm2={}), 2),
        ["params['norm2'] is missing 'gamma'"],
    ),
    "missing param": (
        lambda: ref.multi_head_attention(X, None, {"W_q": P8["W_q"]}, 2),
        ["params is missing", "'W_k'"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_a_value_error_naming_argument_and_shapes(case):
    fn, needles = CASES[case]
    with pytest.raises(ValueError) as info:
        fn()
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    assert "\n" not in message  # one line: it becomes the CLI's one-line error
