"""Badges: each head's head-detector scores above a threshold, as short labels (what the attention
explorer shows beside a head and ``attnlab heads`` abbreviates)."""

from __future__ import annotations

import torch

from attnlab.interp.detectors import score_heads

BADGE_THRESHOLD = 0.4
SHORT = {
    "previous": "prev",
    "duplicate": "dup",
    "induction": "induction",
    "first": "first",
    "current": "current",
}


def ids_of(tokens: list[str]) -> torch.Tensor:
    """Token texts -> ids ``[1, T]`` equal exactly where the texts are equal."""
    index: dict[str, int] = {}
    return torch.tensor([[index.setdefault(t, len(index)) for t in tokens]])


def badges(weights, tokens: list[str], threshold: float = BADGE_THRESHOLD) -> list[list[str]]:
    """Per layer and head, the detector scores above ``threshold`` as short labels, best first
    (``"prev 0.93"``, ``"induction 0.71"``; ``""`` when none): ``weights [L, h, T, T]`` (NumPy or
    torch) of one sequence of ``tokens``, scored through token equality."""
    w = torch.as_tensor(weights, dtype=torch.float64)  # [L, h, T, T]
    scores = score_heads([layer[None] for layer in w], ids_of(list(tokens)))  # name -> [L, h]
    out = []
    for layer in range(w.shape[0]):
        row = []
        for head in range(w.shape[1]):
            found = sorted(((float(s[layer, head]), n) for n, s in scores.items()), reverse=True)
            row.append(" · ".join(f"{SHORT[n]} {v:.2f}" for v, n in found if v > threshold))
        out.append(row)
    return out
