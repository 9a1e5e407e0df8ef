"""Every worked number of the notes (seed 000) and the plain-language notes (seed 001), recomputed
through attnlab.ref. Expected values are the documents' printed numbers, compared at the printed
precision (``round(x, n) == printed``) or exactly for integers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from attnlab import ref


def rounded(a, n):
    return np.round(np.asarray(a, dtype=np.float64), n).tolist()


def test_dk1_example_weights_half_half_output_half_one():
    # seed 000 sec. 2: d_k=1, q=1, k1=k2=0, v1=[1,0], v2=[0,2] -> scores [0,0], weights [1/2,1/2], z=[0.5,1]
    out, w = ref.scaled_dot_product_attention([[1.0]], [[0.0], [0.0]], [[1.0, 0.0], [0.0, 2.0]])
    assert w.tolist() == [[0.5, 0.5]]
    assert out.tolist() == [[0.5, 1.0]]  # the sum is over values, not keys


def test_two_token_identity_example_0670_0330():
    # seed 001 sec. 3: X = I, W^Q = W^K = W^V = I; scores / sqrt(2) = [0.707, 0]; alpha = [0.670, 0.330]
    eye = np.eye(2)
    params = {"W_q": eye, "W_k": eye, "W_v": eye, "W_o": eye}
    out, w = ref.multi_head_attention(eye[None], None, params, num_heads=1)
    assert round(1 / math.sqrt(2), 3) == 0.707
    assert rounded(w[0, 0, 0], 3) == [0.670, 0.330]
    assert rounded(out[0, 0], 3) == [0.670, 0.330]  # z_1
    assert rounded(out[0, 1], 3) == [0.330, 0.670]  # by symmetry, token 2
    e = math.exp(1 / math.sqrt(2))
    assert w[0, 0, 0, 0] == pytest.approx(e / (e + 1), abs=1e-15)


def test_bahdanau_scores_2_0_give_0881_0119():
    # seed 001 sec. 2: h1=[1,0], h2=[0,1], scores e=[2,0] -> alpha=[0.881,0.119], c_t=[0.881,0.119]
    h = np.eye(2)
    scores, alpha, context = ref.luong_attention(np.array([[2.0, 0.0]]), h, "dot")  # s^T h_i = [2, 0]
    assert scores.tolist() == [[2.0, 0.0]]
    assert rounded(alpha[0], 3) == [0.881, 0.119]
    assert rounded(context[0], 3) == [0.881, 0.119]
    assert alpha[0, 0] == pytest.approx(math.e**2 / (math.e**2 + 1), abs=1e-15)


def test_scaled_vs_unscaled_8_0_at_dk_64():
    # seed 001 sec. 4: raw scores [8, 0] at d_k=64: unscaled [0.9997, 0.0003], scaled (8/8=1) [0.731, 0.269]
    d_k = 64
    q = np.zeros((1, d_k))
    q[0, 0] = 8.0
    k = np.eye(2, d_k)  # q.k_1 = 8, q.k_2 = 0
    v = np.eye(2)
    _, scaled = ref.scaled_dot_product_attention(q, k, v)  # default scale 1/sqrt(64) = 1/8
    _, unscaled = ref.scaled_dot_product_attention(q, k, v, scale=1.0)
    assert rounded(scaled[0], 3) == [0.731, 0.269]
    assert rounded(unscaled[0], 4) == [0.9997, 0.0003]


def test_w_o_example_gives_4_6():
    # seed 000 sec. 6: head outputs [1,2] and [3,4] -> concat [1,2,3,4];
    # W^O with columns [1,0,1,0] and [0,1,0,1] -> [4,6]
    heads = np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]])  # [B=1, h=2, T=1, d_v=2]
    concat = ref.merge_heads(heads)  # [1, 1, 4]
    assert concat.tolist() == [[[1.0, 2.0, 3.0, 4.0]]]
    W_o = np.array([[1, 0, 1, 0], [0, 1, 0, 1]], dtype=float).T  # [4, 2]: the two given columns
    assert (concat @ W_o).tolist() == [[[4.0, 6.0]]]
    # the same through multi_head_attention: one token, so each head outputs its value x W^V + b^V
    params = {
        "W_q": np.ones((2, 4)),
        "W_k": np.ones((2, 4)),
        "W_v": np.zeros((2, 4)),
        "b_v": np.array([1.0, 2.0, 3.0, 4.0]),
        "W_o": W_o,
    }
    out, _ = ref.multi_head_attention(np.ones((1, 1, 2)), None, params, num_heads=2)
    assert out.tolist() == [[[4.0, 6.0]]]  # W^O applied on the right of the concatenation


def test_additive_score_2_tanh_2_is_1_93():
    # seed 001 Q13: with h1 = (1,0) the sum W_a s + U_a h1 is (2,2) and v = (1,1): e = 2 tanh 2 ~ 1.93
    s_prev = np.array([[1.0, 2.0]])  # W_a = I: W_a s = (1, 2); U_a = I: U_a h1 = (1, 0)
    h = np.array([[1.0, 0.0]])
    scores, weights, _ = ref.additive_attention(s_prev, h, np.eye(2), np.eye(2), np.ones(2))
    assert scores[0, 0] == pytest.approx(2 * math.tanh(2), abs=1e-15)
    assert round(float(scores[0, 0]), 2) == 1.93
    assert weights.tolist() == [[1.0]]


def test_weighted_sum_of_values_is_1_0_0_9():
    # seed 001 sec. 4 (Q146): 0.1[1,0] + 0.2[0,1] + 0.5[1,1] + 0.2[2,1] = [1.0, 0.9]
    alpha = np.array([0.1, 0.2, 0.5, 0.2])
    values = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    # logits log(alpha) reproduce alpha through softmax; enter them as an additive bias to zero scores
    out, w = ref.scaled_dot_product_attention(np.zeros((1, 1)), np.zeros((4, 1)), values, bias=np.log(alpha))
    np.testing.assert_allclose(w[0], alpha, atol=1e-15)
    assert rounded(out[0], 10) == [1.0, 0.9]


def test_per_head_query_weights_32768():
    # seed 000 sec. 6: a [512, 64] projection has 512 * 64 = 32,768 weights (the slide's 32,178 is a typo)
    W_q = np.zeros((512, 512))  # all 8 heads' W^Q side by side
    per_head = ref.split_heads(W_q, 8)  # [8, 512, 64]: head i owns columns 64i..64i+63
    assert per_head.shape == (8, 512, 64)
    assert per_head[0].size == 32_768 != 32_178


def test_w_o_parameters_at_768_is_589824():
    # seed 001 Q191: parameters in W_O for d_model = 768: 768^2 = 589,824 (bias not counted)
    params = ref.params_from_torch(nn.MultiheadAttention(768, 12, batch_first=True))
    assert params["W_o"].shape == (768, 768)
    assert params["W_o"].size == 589_824


def test_dense_score_entries_1152():
    # seed 000 sec. 6: B=4, h=2, T=12 -> 4 * 2 * 12^2 = 1,152 score entries
    g = np.random.default_rng(0)
    params = {k: g.normal(size=(8, 8)) for k in ("W_q", "W_k", "W_v", "W_o")}
    _, w = ref.multi_head_attention(g.normal(size=(4, 12, 8)), None, params, num_heads=2)
    assert w.shape == (4, 2, 12, 12) and w.size == 1_152
    _, w2 = ref.multi_head_attention(g.normal(size=(4, 24, 8)), None, params, num_heads=2)
    assert w2.size == 4 * w.size  # doubling T quadruples the score entries


def test_projection_shape_b_10_64():
    # seed 000 sec. 6: [B, 10, 512] @ one [512, 64] query matrix -> Q is [B, 10, 64]
    q, k, v = np.zeros((3, 10, 64)), np.zeros((3, 7, 64)), np.zeros((3, 7, 5))
    out, _ = ref.scaled_dot_product_attention(q, k, v)
    q = np.zeros((3, 10, 512)) @ np.zeros((512, 64))
    assert q.shape == (3, 10, 64)
    assert out.shape == (3, 10, 5)  # values need not share the dot-product width


def _random_encoder_params(g, d, f):
    return {
        "attn": {k: g.normal(size=(d, d)) / math.sqrt(d) for k in ("W_q", "W_k", "W_v", "W_o")},
        "ffn": {"W_1": g.normal(size=(d, f)) / math.sqrt(d), "W_2": g.normal(size=(f, d)) / math.sqrt(f)},
        "norm1": {"gamma": np.ones(d), "beta": np.zeros(d)},
        "norm2": {"gamma": np.ones(d), "beta": np.zeros(d)},
    }


@pytest.mark.slow
def test_six_encoder_layers_keep_50_by_512():
    # seed 001 Q4: [T, d_model] = [50, 512] through 6 separately parameterised layers gives [50, 512]
    g = np.random.default_rng(0)
    x = g.normal(size=(1, 50, 512))
    for _ in range(6):
        x = ref.encoder_layer(x, _random_encoder_params(g, 512, 2048), 8)
        assert x.shape == (1, 50, 512)


def test_output_volume_5_by_20_by_64_is_6400():
    # seed 001 End Term Q4: 5 sentences padded to 20 tokens, d_model = 64 -> 5 * 20 * 64 = 6,400 outputs
    g = np.random.default_rng(0)
    lengths = np.array([20, 13, 7, 20, 1])
    y = ref.encoder_layer(
        g.normal(size=(5, 20, 64)), _random_encoder_params(g, 64, 256), 8, mask=ref.padding_mask(lengths, 20)
    )
    assert y.shape == (5, 20, 64) and y.size == 6_400


def test_encoder_parameter_counts_from_torch_layer():
    # seed 000 sec. 4: MHA 1,050,624, FFN 2,099,712, norms 2,048, layer 3,152,384, six layers 18,914,304
    layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
    p = ref.params_from_torch(layer, dtype=np.float32)
    count = {group: sum(a.size for a in p[group].values()) for group in p}
    assert count["attn"] == 1_050_624
    assert count["ffn"] == 2_099_712
    assert count["norm1"] + count["norm2"] == 2_048
    assert sum(count.values()) == 3_152_384
    assert 6 * sum(count.values()) == 18_914_304
    weights_only = (
        sum(p["attn"][k].size for k in ("W_q", "W_k", "W_v", "W_o"))
        + p["ffn"]["W_1"].size
        + p["ffn"]["W_2"].size
    )
    d, f = 512, 2048
    assert weights_only == 4 * d * d + 2 * d * f
    assert sum(count.values()) == 4 * d * d + 2 * d * f + f + 9 * d


def test_eight_heads_of_64_concatenate_to_512():
    # seed 000 sec. 3: h = 8 heads of [B, T, 64] concatenate to [B, T, 512]; W^O is [512, 512]
    concat = ref.merge_heads(np.zeros((2, 8, 5, 64)))
    assert concat.shape == (2, 5, 512)
    assert ref.params_from_torch(nn.MultiheadAttention(512, 8))["W_o"].shape == (512, 512)


def test_dot_product_variance_lesson_numbers():
    # seed 000 lesson 02 (rng seed 42, 20,000 pairs): Var(q.k) ~ d_k, scaled variance ~ 1
    printed = {4: (4.04, 1.011), 16: (15.87, 0.992), 64: (63.83, 0.997), 256: (253.99, 0.992)}
    rng = np.random.default_rng(42)
    for d, (var, scaled_var) in printed.items():
        q = rng.normal(size=(20000, d))
        k = rng.normal(size=(20000, d))
        dot, _, _ = ref.luong_attention(q[:, None, :], k[:, None, :], "dot")  # [20000, 1, 1]: q_n . k_n
        dot = dot[:, 0, 0]
        assert round(float(np.var(dot)), 2) == var
        assert round(float(np.var(dot / np.sqrt(d))), 3) == scaled_var


def test_variance_argument_with_torch_as_oracle():
    # Var(q.k) = d_k for independent unit-variance coordinates: check the mean of the ref's score
    # variance over a large torch-generated sample is within 3 % of d_k, and 1 after scaling
    torch.manual_seed(0)
    d = 32
    q = torch.randn(50_000, d, dtype=torch.float64).numpy()
    k = torch.randn(50_000, d, dtype=torch.float64).numpy()
    dot = ref.luong_attention(q[:, None], k[:, None], "dot")[0][:, 0, 0]
    assert abs(np.var(dot) / d - 1) < 0.03
    assert abs(np.var(dot / math.sqrt(d)) - 1) < 0.03
