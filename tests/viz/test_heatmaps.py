"""heatmap(weights, x_tokens, y_tokens): draws the matrix as given, labels rows/columns, checks shapes."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.ref import additive_attention
from attnlab.viz import heatmap


def test_heatmap_draws_the_alignment_matrix_with_labels_and_values():
    rng = np.random.default_rng(42)  # the notes' 05_additive_attention, one decoder step
    enc = rng.normal(size=(4, 3))
    dec = rng.normal(size=3)
    W, U, v = rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), rng.normal(size=5)
    _, alpha, _ = additive_attention(dec[None], enc, U, W, v)  # [1, 4]; the notes put W on enc
    np.testing.assert_allclose(alpha[0], [0.384, 0.327, 0.176, 0.113], atol=5e-4)  # the notes' alpha
    ax = heatmap(alpha, ["h1", "h2", "h3", "h4"], ["s_t"], title="alpha")
    assert np.array_equal(ax.images[0].get_array(), alpha)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["h1", "h2", "h3", "h4"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["s_t"]
    assert [t.get_text() for t in ax.texts] == ["0.38", "0.33", "0.18", "0.11"]
    assert ax.get_title() == "alpha"
    plt.close(ax.figure)


def test_heatmap_accepts_a_torch_head_and_draws_into_given_axes():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        _, w = mha(x, x, x, need_weights=True, average_attn_weights=False)  # [1, 2, 5, 5]
    fig, axes = plt.subplots(1, 2)
    got = heatmap(w[0, 1], list("abcde"), list("abcde"), ax=axes[1])
    assert got is axes[1] and not axes[0].images
    np.testing.assert_allclose(got.images[0].get_array().sum(axis=1), np.ones(5), atol=1e-6)
    plt.close(fig)


def test_a_tensor_that_requires_grad_or_is_bfloat16_is_drawn_as_its_values():
    w = torch.tensor([[0.25, 0.75], [1.0, 0.0]], requires_grad=True) * 1  # part of a graph
    for weights in (w, w.detach().bfloat16()):
        ax = heatmap(weights, ["a", "b"], ["c", "d"])
        np.testing.assert_array_equal(ax.images[0].get_array(), [[0.25, 0.75], [1.0, 0.0]])
        plt.close(ax.figure)


def test_large_matrices_are_not_annotated_by_default():
    w = np.full((20, 30), 1 / 30)
    ax = heatmap(w, [str(i) for i in range(30)], [str(i) for i in range(20)])
    assert len(ax.texts) == 0
    plt.close(ax.figure)


@pytest.mark.parametrize(
    "weights, x, y, words",
    [
        (np.ones((2, 3)), ["a", "b"], ["p", "q"], "x_tokens has 2 labels but weights [2, 3] has T_k=3"),
        (np.ones((2, 3)), ["a", "b", "c"], ["p"], "y_tokens has 1 labels but weights [2, 3] has T_q=2"),
        (np.ones((1, 2, 3)), ["a"], ["p"], "2-D matrix [T_q, T_k], got shape [1, 2, 3]"),
        (np.array([[np.nan]]), ["a"], ["p"], "NaN"),
        (np.array([["a"]]), ["a"], ["p"], "numeric"),
    ],
)
def test_bad_input_names_the_argument_and_shapes(weights, x, y, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        heatmap(weights, x, y)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_any_row_stochastic_matrix_is_drawn_unchanged(t_q, t_k, seed):
    w = np.random.default_rng(seed).dirichlet(np.ones(t_k), size=t_q)  # [T_q, T_k]
    ax = heatmap(w, [f"k{j}" for j in range(t_k)], [f"q{i}" for i in range(t_q)])
    drawn = np.asarray(ax.images[0].get_array())
    assert drawn.shape == (t_q, t_k) and np.array_equal(drawn, w)
    assert len(ax.texts) == t_q * t_k  # small: every cell carries its value
    plt.close(ax.figure)
