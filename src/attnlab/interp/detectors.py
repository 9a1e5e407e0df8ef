"""Head detectors: how much of a head's attention follows a fixed pattern.

For one sequence with attention weights ``A [T, T]`` (rows = queries, each summing to 1) and a
pattern ``P [T, T]`` of 0/1 entries, the score is TransformerLens's ``"mul"`` measure

    score(A, P) = Σ_ij A_ij P_ij / Σ_ij A_ij                                   (in [0, 1])

— the share of all attention that lands where the pattern says. The patterns (tokens ``x [T]``):

=============  =============================================================================
previous       P[i, i-1] = 1                      (a previous-token head)
duplicate      P[i, j] = 1 if x_j = x_i and j < i (attends to an earlier copy of itself)
induction      P[i, j] = 1 if x_{j-1} = x_i, 1 <= j < i (attends to the token *after* an earlier
               copy of itself: the head that completes ``... A B ... A -> B``)
first          P[i, 0] = 1                        (the first token: BOS / [CLS], an attention sink)
current        P[i, i] = 1                        (attends to itself)
=============  =============================================================================

The induction pattern has two conventions (``convention=``). attnlab's (the default) asks for the
attended key strictly before the query, ``j < i``. TransformerLens's (``"tl"``,
``get_induction_head_detection_pattern``) allows ``j = i``: where a token repeats immediately
("A A"), the query at the second A attends to *itself* and TransformerLens counts that as
induction (the token before j = i is x_{i-1} = x_i), so a current-token head scores there too. On
text without immediate repeats (the ``[BOS, r, r]`` probe with distinct r) the two agree exactly; on
text with them they differ by up to 0.13 on real heads. The other patterns are the same in both.

``exclude_first`` zeroes column 0 of ``A`` and ``exclude_current`` its diagonal before the score,
in both the numerator and the denominator (TransformerLens's ``exclude_bos`` and
``exclude_current_token``): a head that parks its spare attention on BOS is then judged by where
the rest goes. Over a batch, the score is the mean of the sequences' scores (as TransformerLens
averages over prompts). A bidirectional encoder (MiniLM) has weights above the diagonal too: the
formula still applies, but ``duplicate`` and ``induction`` count earlier copies only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnlab._checks import choice
from attnlab.names import CONVENTIONS

DETECTORS = ("previous", "duplicate", "induction", "first", "current")


def _check_tokens(tokens: Tensor) -> Tensor:
    if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.dtype.is_floating_point:
        shape = list(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be an integer tensor [B, T], got {shape}")
    return tokens


def detection_pattern(name: str, tokens: Tensor, convention: str = "attnlab") -> Tensor:
    """The 0/1 pattern ``P [B, T, T]`` (float, rows = queries) of detector ``name`` for ``tokens [B, T]``.

    previous: P[i, i-1]; duplicate: x_j = x_i, j < i; induction: x_{j-1} = x_i, 1 <= j < i
    (``convention="tl"``: 1 <= j <= i, TransformerLens's); first: P[i, 0]; current: P[i, i] (see
    the module docstring).
    """
    choice("detector", name, DETECTORS)
    choice("convention", convention, CONVENTIONS)
    tokens = _check_tokens(tokens)
    b, t = tokens.shape
    eye = torch.eye(t, device=tokens.device)  # [T, T]
    if name == "previous":
        return torch.diag(torch.ones(t - 1, device=tokens.device), -1).expand(b, t, t).clone()
    if name == "current":
        return eye.expand(b, t, t).clone()
    if name == "first":
        p = torch.zeros(b, t, t, device=tokens.device)
        p[:, :, 0] = 1.0
        return p
    below = torch.tril(torch.ones(t, t, device=tokens.device), diagonal=-1)  # [T, T]: j < i
    same = (tokens[:, :, None] == tokens[:, None, :]).float()  # [B, T, T]: x_i == x_j
    if name == "duplicate":
        return same * below
    shifted = torch.zeros_like(same)
    shifted[:, :, 1:] = same[:, :, :-1]  # [B, T, T]: entry (i, j) = [x_i == x_{j-1}]
    if convention == "tl":
        below = torch.tril(torch.ones(t, t, device=tokens.device))  # [T, T]: j <= i, the query itself too
    return shifted * below


def head_score(
    weights: Tensor,
    tokens: Tensor,
    detector: str,
    *,
    exclude_first: bool = False,
    exclude_current: bool = False,
    convention: str = "attnlab",
) -> Tensor:
    """Per-head score Σ A⊙P / Σ A, averaged over the batch: ``weights [B, h, T, T]`` -> ``[h]``.

    ``tokens [B, T]`` are the sequences the weights come from (queries and keys are the same
    positions); ``convention`` is the induction pattern's (module doc). Raises ``ValueError`` when
    the exclusions leave no attention to score (e.g. ``first`` with ``exclude_first``, or a
    one-token sequence with ``exclude_current``).
    """
    tokens = _check_tokens(tokens)
    if not isinstance(weights, Tensor) or weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        shape = list(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise ValueError(f"weights must be [B, h, T, T] (self-attention), got {shape}")
    b, _, t, _ = weights.shape
    if tuple(tokens.shape) != (b, t):
        raise ValueError(f"tokens has shape {list(tokens.shape)} but weights [B, h, T, T] has B={b}, T={t}")
    if detector == "first" and exclude_first:
        raise ValueError("the first-token score with exclude_first=True is 0/0: it scores nothing")
    pattern = detection_pattern(detector, tokens, convention).to(weights.dtype)[:, None]  # [B, 1, T, T]
    a = weights.detach()
    keep = torch.ones(t, t, dtype=a.dtype, device=a.device)  # [T, T]: entries of A that count
    if exclude_first:
        keep[:, 0] = 0.0
    if exclude_current:
        keep.fill_diagonal_(0.0)
    a = a * keep  # [B, h, T, T]
    total = a.sum(dim=(-2, -1))  # [B, h]
    if bool((total <= 0).any()):
        raise ValueError(
            f"no attention left to score for detector {detector!r} on sequences of T={t} "
            f"(exclude_first={exclude_first}, exclude_current={exclude_current})"
        )
    return ((a * pattern).sum(dim=(-2, -1)) / total).mean(dim=0)  # [h]


def score_heads(
    attentions: Sequence[Tensor],
    tokens: Tensor,
    detectors: Sequence[str] = DETECTORS,
    *,
    exclude_first: bool = False,
    exclude_current: bool = False,
    convention: str = "attnlab",
) -> dict[str, Tensor]:
    """Every detector on every layer: ``attentions`` (L tensors ``[B, h, T, T]``) -> name -> ``[L, h]``."""
    if not len(attentions):
        raise ValueError("attentions is empty: no layer to score")
    kw = dict(exclude_first=exclude_first, exclude_current=exclude_current, convention=convention)
    return {
        name: torch.stack([head_score(w, tokens, name, **kw) for w in attentions])  # [L, h]
        for name in detectors
    }


def heads_above(scores: Tensor, threshold: float) -> list[tuple[int, int, float]]:
    """``(layer, head, score)`` of every entry of ``scores [L, h]`` above ``threshold``, best first."""
    found = [
        (layer, head, float(scores[layer, head]))
        for layer in range(scores.shape[0])
        for head in range(scores.shape[1])
        if float(scores[layer, head]) > threshold
    ]
    return sorted(found, key=lambda x: -x[2])
