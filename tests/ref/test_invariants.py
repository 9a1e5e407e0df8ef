"""Properties every attention must have, checked on random inputs (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import ref

SEEDS = st.integers(0, 2**32 - 1)


def _params(g, d, h, d_head):
    return {
        "W_q": g.normal(size=(d, h * d_head)),
        "W_k": g.normal(size=(d, h * d_head)),
        "W_v": g.normal(size=(d, h * d_head)),
        "W_o": g.normal(size=(h * d_head, d)),
        "b_q": g.normal(size=h * d_head),
        "b_k": g.normal(size=h * d_head),
        "b_v": g.normal(size=h * d_head),
        "b_o": g.normal(size=d),
    }


@settings(max_examples=30, deadline=None)
@given(
    seed=SEEDS,
    t_q=st.integers(1, 7),
    extra=st.integers(0, 4),
    d=st.integers(1, 8),
    scale=st.floats(0.01, 10.0),
    masked=st.booleans(),
)
def test_every_weight_row_sums_to_one(seed, t_q, extra, d, scale, masked):
    g = np.random.default_rng(seed)
    t_k = t_q + extra
    q, k, v = g.normal(size=(2, t_q, d)) * scale, g.normal(size=(2, t_k, d)), g.normal(size=(2, t_k, 3))
    mask = ref.causal_mask(t_q, t_k) if masked else None
    _, w = ref.scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
    assert np.all(w >= 0)
    _, w_add, _ = ref.additive_attention(q, k, g.normal(size=(d, 4)), g.normal(size=(d, 4)), g.normal(size=4))
    np.testing.assert_allclose(w_add.sum(-1), 1.0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, t=st.integers(2, 7), h=st.sampled_from([1, 2, 3]), d_head=st.integers(1, 4))
def test_self_attention_without_positions_is_permutation_equivariant(seed, t, h, d_head):
    g = np.random.default_rng(seed)
    d = h * d_head
    params = _params(g, d, h, d_head)
    x = g.normal(size=(1, t, d))
    perm = g.permutation(t)
    out, w = ref.multi_head_attention(x, x, params, h)
    out_p, w_p = ref.multi_head_attention(x[:, perm], x[:, perm], params, h)
    np.testing.assert_allclose(out_p, out[:, perm], atol=1e-10)  # MHA(P X) = P MHA(X)
    np.testing.assert_allclose(w_p, w[:, :, perm][:, :, :, perm], atol=1e-12)


def test_rope_breaks_permutation_equivariance(rng):
    params = _params(rng, 4, 2, 2)
    x = rng.normal(size=(1, 5, 4))
    perm = np.array([4, 3, 2, 1, 0])
    out, _ = ref.multi_head_attention(x, x, params, 2, positions="rope")
    out_p, _ = ref.multi_head_attention(x[:, perm], x[:, perm], params, 2, positions="rope")
    assert np.max(np.abs(out_p - out[:, perm])) > 1e-3


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, t=st.integers(2, 8), changed=st.data())
def test_causal_output_never_changes_when_a_later_token_changes(seed, t, changed):
    g = np.random.default_rng(seed)
    j = changed.draw(st.integers(1, t - 1), label="changed position")
    params = _params(g, 8, 2, 4)
    x = g.normal(size=(1, t, 8))
    x2 = x.copy()
    x2[0, j] = g.normal(size=8) * 10  # change token j (and nothing before it)
    for positions in (None, "rope", "alibi"):
        out, _ = ref.multi_head_attention(x, x, params, 2, mask=ref.causal_mask(t), positions=positions)
        out2, _ = ref.multi_head_attention(x2, x2, params, 2, mask=ref.causal_mask(t), positions=positions)
        np.testing.assert_array_equal(out2[0, :j], out[0, :j])  # positions before j: bit-identical
        assert np.max(np.abs(out2[0, j:] - out[0, j:])) > 0  # position j itself does see it


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, t_k=st.integers(2, 10), d_k=st.sampled_from([1, 4, 16, 64, 256]))
def test_scaling_by_inverse_sqrt_dk_preserves_each_rows_order(seed, t_k, d_k):
    g = np.random.default_rng(seed)
    q, k, v = g.normal(size=(3, d_k)), g.normal(size=(t_k, d_k)), g.normal(size=(t_k, 2))
    _, w_scaled = ref.scaled_dot_product_attention(q, k, v)
    _, w_raw = ref.scaled_dot_product_attention(q, k, v, scale=1.0)
    logits = q @ k.T
    order = np.argsort(logits, axis=-1, kind="stable")
    for w in (w_scaled, w_raw):
        sorted_w = np.take_along_axis(w, order, axis=-1)
        assert np.all(np.diff(sorted_w, axis=-1) >= 0)  # weights rise with the logits in both cases
    if d_k > 1:  # scaling shrinks the spread: the top weight is never larger than without scaling
        assert np.all(w_scaled.max(-1) <= w_raw.max(-1) + 1e-15)


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, t=st.integers(1, 6), window=st.integers(1, 6))
def test_sliding_window_output_ignores_tokens_outside_the_window(seed, t, window):
    g = np.random.default_rng(seed)
    q, k, v = g.normal(size=(t, 3)), g.normal(size=(t, 3)), g.normal(size=(t, 2))
    out, w = ref.scaled_dot_product_attention(q, k, v, ref.sliding_window_mask(t, t, window))
    for i in range(t):
        lo = max(0, i - window + 1)
        ref_i, _ = ref.scaled_dot_product_attention(q[i : i + 1], k[lo : i + 1], v[lo : i + 1])
        np.testing.assert_allclose(out[i], ref_i[0], atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, t_q=st.integers(1, 5), t_k=st.integers(2, 7))
def test_cross_attention_is_invariant_to_the_order_of_the_memory(seed, t_q, t_k):
    g = np.random.default_rng(seed)
    params = _params(g, 6, 2, 3)
    x, memory = g.normal(size=(1, t_q, 6)), g.normal(size=(1, t_k, 6))
    perm = g.permutation(t_k)
    out, w = ref.multi_head_attention(x, memory, params, 2)
    out_p, w_p = ref.multi_head_attention(x, memory[:, perm], params, 2)
    np.testing.assert_allclose(out_p, out, atol=1e-10)  # a set of keys, not a sequence
    np.testing.assert_allclose(w_p, w[..., perm], atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, t=st.integers(1, 7), positions=st.sampled_from([None, "rope", "alibi"]))
def test_one_query_over_the_cached_prefix_equals_that_row_of_full_causal_attention(seed, t, positions):
    # the lower-right causal alignment: decoding step i (t_q = 1, t_k = i + 1) sees every cached key
    g = np.random.default_rng(seed)
    params = _params(g, 8, 2, 4)
    x = g.normal(size=(1, t, 8))
    full, _ = ref.multi_head_attention(x, x, params, 2, mask=ref.causal_mask(t), positions=positions)
    for i in range(t):
        step, _ = ref.multi_head_attention(
            x[:, i : i + 1], x[:, : i + 1], params, 2, mask=ref.causal_mask(1, i + 1), positions=positions
        )
        np.testing.assert_allclose(step[0, 0], full[0, i], atol=1e-10)
