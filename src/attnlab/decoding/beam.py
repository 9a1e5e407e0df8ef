"""Beam search: the one decode loop that is not a choice of the next token (it keeps ``beam_size``
hypotheses and reorders the model's state among them). It shares the loop's start
(:func:`attnlab.decoding.loop._begin`), the model's ``step``/``reorder`` and the fit check
(:func:`~attnlab.decoding.loop.check_fits`): it cannot slide past a decoder's positions, since its
hypotheses' caches are reordered, not re-read, so prompt plus new tokens must fit them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from attnlab._checks import positive_int
from attnlab.decoding.loop import _begin, _pad_id, as_source, check_fits
from attnlab.nn.nonfinite import require_finite_weights


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """A finished hypothesis: generated ``tokens`` (EOS included if it ended with one), the sum of
    their log-probabilities, and ``score = log_prob / len(tokens) ** length_penalty``."""

    tokens: tuple[int, ...]
    log_prob: float
    score: float


class BeamResult(NamedTuple):
    """``tokens [B, L]``: each source's best hypothesis (``pad_id``-padded); ``scores [B]``; and
    ``hypotheses``: per source, the ``n_best`` best, best first."""

    tokens: torch.Tensor
    scores: torch.Tensor
    hypotheses: list[list[Hypothesis]]


def _score(log_prob: float, length: int, alpha: float) -> float:
    return log_prob / length**alpha


@torch.no_grad()
def _beam_one(
    model,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    alpha: float,
    n_best: int,
    bos_id: int,
    eos: frozenset[int],
) -> list[Hypothesis]:
    logits, state = _begin(model, src, bos_id)  # [1, V]
    logp = F.log_softmax(logits.double(), dim=-1).cpu()  # [k, V]
    vocab = logp.shape[-1]
    alive = torch.zeros(1, 0, dtype=torch.long)  # tokens of each live beam  [k, t-1]
    alive_lp = torch.zeros(1, dtype=torch.float64)  # their summed log-probabilities  [k]
    finished: list[Hypothesis] = []
    for t in range(1, max_len + 1):  # t = length of the hypotheses after this step
        flat = (alive_lp[:, None] + logp).reshape(-1)  # every one-token extension  [k V]
        n_finite = int(torch.isfinite(flat).sum())
        top = flat.topk(min(2 * beam_size, n_finite))  # enough to refill the beam after EOS
        keep: list[int] = []
        for rank, (lp, idx) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
            beam, tok = divmod(idx, vocab)
            if tok in eos:
                if rank < beam_size:  # an ended hypothesis ranked in the beam is set aside
                    finished.append(Hypothesis((*alive[beam].tolist(), tok), lp, _score(lp, t, alpha)))
            elif len(keep) < beam_size:
                keep.append(idx)
        index = torch.tensor(keep, dtype=torch.long)
        beam_idx, tok = index // vocab, index % vocab  # [k'] each
        alive = torch.cat([alive[beam_idx], tok[:, None]], dim=1)  # [k', t]
        alive_lp = flat[index]  # [k']
        if t == max_len:  # out of room: the live beams end here, truncated
            finished += [
                Hypothesis(tuple(a), lp, _score(lp, t, alpha))
                for a, lp in zip(alive.tolist(), alive_lp.tolist())
            ]
            break
        finished.sort(key=lambda h: -h.score)
        if not keep or len(finished) >= beam_size:  # the beam is done (fairseq's rule)
            break
        if len(finished) >= n_best:
            # log-probabilities only fall, so a live beam can at best keep its sum at the most
            # favourable final length; stop when none of them can enter the n-best
            bound = max(_score(float(alive_lp.max()), n, alpha) for n in (t + 1, max_len))
            if finished[n_best - 1].score >= bound:
                break
        dev = src.device
        state = model.reorder(state, beam_idx.to(dev))
        logits, state = model.step(tok.to(dev), state)
        logp = F.log_softmax(logits.double(), dim=-1).cpu()
    finished.sort(key=lambda h: -h.score)
    return finished[:n_best]


def beam_search(
    model,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
    bos_id: int = 1,
    eos_id: int | list[int] | None = 2,
    pad_id: int | None = None,
) -> BeamResult:
    """Keep the ``beam_size`` best partial hypotheses at each step (by summed log-probability).

    Each step ranks every one-token extension of the live beams; an extension ending in EOS that
    ranks within the beam is finished and set aside while the best ``beam_size`` others continue.
    The search stops at ``max_len`` (live beams end there, truncated), when ``beam_size``
    hypotheses have finished, or when no live beam can still beat the ``n_best``-th finished one.
    With ``beam_size=1`` this is greedy decoding. ``eos_id``: one id or a list (a hypothesis ends
    at any of them); None or a negative id: none ends before ``max_len``. On a decoder-only model
    the prompt plus ``max_len`` must fit its positions (beam search cannot slide): else a
    ``ValueError`` saying so.
    Hypotheses are ranked by ``score = log p(y | src) / |y| ** length_penalty`` (``|y|`` counts
    EOS; 0 ranks by raw log-probability, 1 by the mean per token).

    Args:
        src: ``[B, S]`` (each row is searched separately). beam_size, max_len, n_best: positive ints.
    Returns:
        :class:`BeamResult` ``(tokens [B, L], scores [B], hypotheses)``.
    """
    require_finite_weights(model)
    beam_size, max_len, n_best = (
        positive_int(n, v) for n, v in (("beam_size", beam_size), ("max_len", max_len), ("n_best", n_best))
    )
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    if not isinstance(length_penalty, (int, float)) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    pad = _pad_id(model, pad_id)
    src = as_source(model, src)  # [B, S]
    check_fits(model, src.shape[1], max_len, slides=False)
    ids = eos_id if isinstance(eos_id, (list, tuple)) else [eos_id]
    eos = frozenset(int(e) for e in ids if e is not None and e >= 0)
    hyps = [
        _beam_one(model, src[b : b + 1], beam_size, max_len, float(length_penalty), n_best, bos_id, eos)
        for b in range(src.shape[0])
    ]
    width = max(len(h[0].tokens) for h in hyps)
    tokens = torch.full((src.shape[0], width), pad, dtype=torch.long)  # [B, L]
    for b, h in enumerate(hyps):
        tokens[b, : len(h[0].tokens)] = torch.tensor(h[0].tokens)
    scores = torch.tensor([h[0].score for h in hyps], dtype=torch.float64)  # [B]
    return BeamResult(tokens.to(src.device), scores, hyps)
