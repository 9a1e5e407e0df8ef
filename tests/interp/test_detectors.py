"""Head detectors on hand-built attention matrices whose scores are known exactly, against a
naive loop over the definition, and on repeated random sequences [BOS, r, r]."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from attnlab.interp import DETECTORS, detection_pattern, head_score, repeated_tokens, score_heads


def _naive(a, x, name, exclude_first=False, exclude_current=False) -> float:
    """The definition, one entry at a time: Σ A_ij P_ij / Σ A_ij over the entries kept."""
    t = len(x)
    num = den = 0.0
    for i in range(t):
        for j in range(t):
            if (exclude_first and j == 0) or (exclude_current and i == j):
                continue
            p = {
                "previous": j == i - 1,
                "duplicate": j < i and x[j] == x[i],
                "induction": 1 <= j < i and x[j - 1] == x[i],
                "first": j == 0,
                "current": j == i,
            }[name]
            num += a[i][j] * p
            den += a[i][j]
    return num / den


def _one(a) -> torch.Tensor:
    return torch.as_tensor(a, dtype=torch.float64)[None, None]  # [1, 1, T, T]


def test_previous_token_head_scores_exactly():
    t = 6
    a = torch.zeros(t, t, dtype=torch.float64)
    a[0, 0] = 1.0
    for i in range(1, t):
        a[i, i - 1] = 1.0
    x = torch.arange(t)[None]
    assert head_score(_one(a), x, "previous").item() == pytest.approx(5 / 6, abs=1e-15)
    assert head_score(_one(a), x, "current").item() == pytest.approx(1 / 6, abs=1e-15)
    # excluding column 0 drops rows 0 and 1's mass: the remaining 4 entries are all previous-token
    assert head_score(_one(a), x, "previous", exclude_first=True).item() == 1.0


def test_uniform_causal_attention_scores_are_exact_fractions():
    t = 4
    a = [[(1.0 / (i + 1) if j <= i else 0.0) for j in range(t)] for i in range(t)]
    x = torch.tensor([[7, 3, 7, 3]])
    got = head_score(_one(a), x, "previous").item()
    want = Fraction(1, 2) + Fraction(1, 3) + Fraction(1, 4)  # row i puts 1/(i+1) on i-1
    assert got == pytest.approx(float(want / 4), abs=1e-15)  # 13/48
    # duplicate: row 2 (7) sees 7 at 0 -> 1/3; row 3 (3) sees 3 at 1 -> 1/4; total mass 4
    assert head_score(_one(a), x, "duplicate").item() == pytest.approx((1 / 3 + 1 / 4) / 4, abs=1e-15)
    # induction: row 2 (7): x_{j-1} = 7 at j = 1 -> 1/3; row 3 (3): x_{j-1} = 3 at j = 2 -> 1/4
    assert head_score(_one(a), x, "induction").item() == pytest.approx((1 / 3 + 1 / 4) / 4, abs=1e-15)
    assert head_score(_one(a), x, "first").item() == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_perfect_induction_head_on_a_repeated_sequence():
    L = 5
    x = repeated_tokens(1, L, 50, seed=3)  # [1, 11]
    t = x.shape[1]
    a = torch.zeros(t, t, dtype=torch.float64)
    for i in range(t):
        a[i, i - L + 1 if i > L else 0] = 1.0  # the repeat attends to the token after the earlier copy
    assert head_score(_one(a), x, "induction").item() == pytest.approx(L / t, abs=1e-15)
    assert head_score(_one(a), x, "induction", exclude_first=True).item() == 1.0
    assert head_score(_one(a), x, "duplicate").item() == 0.0
    assert head_score(_one(a), x, "first").item() == pytest.approx((t - L) / t, abs=1e-15)


def test_patterns_on_repeated_tokens_have_exactly_L_matches():
    L = 7
    x = repeated_tokens(4, L, 30, bos=2, seed=0)  # [4, 15]
    assert x.shape == (4, 15) and bool((x[:, 0] == 2).all())
    assert bool((x[:, 1 : L + 1] == x[:, L + 1 :]).all())
    assert bool((x[:, 1:] != 2).all())
    for name in ("duplicate", "induction"):
        p = detection_pattern(name, x)  # [4, T, T]
        assert p.sum(dim=(1, 2)).tolist() == [L] * 4
    assert torch.equal(repeated_tokens(4, L, 30, bos=2, seed=0), x)


@pytest.mark.parametrize("exclude_first", [False, True])
@pytest.mark.parametrize("exclude_current", [False, True])
def test_random_weights_match_the_naive_definition(exclude_first, exclude_current):
    g = torch.Generator().manual_seed(0)
    b, h, t = 3, 2, 9
    scores = torch.randn(b, h, t, t, generator=g, dtype=torch.float64)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    a = scores.masked_fill(~causal, float("-inf")).softmax(-1)  # [B, h, T, T]
    x = torch.randint(0, 4, (b, t), generator=g)  # a small vocabulary: many duplicates
    for name in DETECTORS:
        if name == "first" and exclude_first:
            continue
        got = head_score(a, x, name, exclude_first=exclude_first, exclude_current=exclude_current)
        for head in range(h):
            want = (
                sum(
                    _naive(a[s, head].tolist(), x[s].tolist(), name, exclude_first, exclude_current)
                    for s in range(b)
                )
                / b
            )  # the mean over the batch of each sequence's score
            assert got[head].item() == pytest.approx(want, abs=1e-12)


def test_score_heads_stacks_layers():
    x = repeated_tokens(2, 4, 20)
    t = x.shape[1]
    eye = torch.eye(t, dtype=torch.float64).expand(2, 3, t, t)
    first = torch.zeros(2, 3, t, t, dtype=torch.float64)
    first[..., 0] = 1.0
    s = score_heads([eye, first], x)
    assert s["current"].tolist() == [[1.0] * 3, [1 / t] * 3]
    assert s["first"].tolist() == [[1 / t] * 3, [1.0] * 3]


def test_bad_input_is_one_clear_error():
    x = repeated_tokens(1, 3, 10)
    a = torch.eye(7)[None, None]
    with pytest.raises(ValueError, match=r"^detector\b.*'previous'.*, got 'sink'"):
        head_score(a, x, "sink")
    with pytest.raises(ValueError, match="0/0"):
        head_score(a, x, "first", exclude_first=True)
    with pytest.raises(ValueError, match="no attention left"):
        head_score(a, x, "previous", exclude_current=True)  # identity weights: nothing off-diagonal
    with pytest.raises(ValueError, match=r"^tokens\b.*\[1, 6\].*\bT=7\b"):
        head_score(a, x[:, :6], "previous")
    with pytest.raises(ValueError, match=r"^weights\b.*\[B, h, T, T\].*\[1, 7, 7\]$"):
        head_score(a[0], x, "previous")
    with pytest.raises(ValueError, match=r"\b12 distinct\b.*\b9 ids 0\.\.8$"):
        repeated_tokens(1, 12, 10)


def test_the_induction_conventions_differ_only_on_immediate_repeats():
    """attnlab's induction pattern needs the key strictly before the query; TransformerLens's also
    counts the query itself where x_{i-1} = x_i ("A A"): a pure current-token head scores 0 under
    one and 2/5 under the other on [BOS, 5, 5, 7, 7], and the two agree on the repeat probe."""
    x = torch.tensor([[0, 5, 5, 7, 7]])
    current = torch.eye(5)[None, None]  # [1, 1, T, T]: every query attends to itself
    assert head_score(current, x, "induction").item() == 0.0
    assert head_score(current, x, "induction", convention="tl").item() == pytest.approx(0.4)
    diff = detection_pattern("induction", x, "tl") - detection_pattern("induction", x)
    assert diff[0].nonzero().tolist() == [[2, 2], [4, 4]]  # only the diagonal where a token repeats at once
    probe = repeated_tokens(3, 6, 20, seed=1)  # distinct r: no immediate repeat
    for name in ("previous", "duplicate", "induction", "first", "current"):
        assert torch.equal(detection_pattern(name, probe, "tl"), detection_pattern(name, probe))
    with pytest.raises(ValueError, match=r"^convention\b.*\['attnlab', 'tl'\], got 'hf'"):
        detection_pattern("induction", x, "hf")
