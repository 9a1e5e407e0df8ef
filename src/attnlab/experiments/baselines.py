"""N-gram baselines: the competence gate a trained language model passes before any verdict.

Unigram, bigram and trigram tables are counted on the training tokens and score held-out tokens in
nats per token, with add-one (Laplace) smoothing over the vocabulary ``V``:

    p(w | h) = (c(h, w) + 1) / (c(h) + V)

(``h`` the previous ``n - 1`` tokens; ``c(h)`` counts ``h`` followed by any token in the training
text). The first ``n - 1`` held-out tokens have no full history and are not scored; every order
scores the same positions (those with two tokens before them) so the three are comparable. A model
is competent (:func:`gate`) when its held-out loss is below the best table's by at least ``margin``
nats per token.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MARGIN = 0.1  # nats per token by which a model must beat the best n-gram table
ORDERS = {"unigram": 1, "bigram": 2, "trigram": 3}


def _keys(ids: np.ndarray, n: int, vocab: int) -> np.ndarray:
    """The ``n``-gram ending at each position ``n - 1 ..`` of ``ids [N]`` as one integer ``[N - n + 1]``."""
    key = np.zeros(len(ids) - n + 1, dtype=np.int64)
    for j in range(n):
        key = key * vocab + ids[j : len(ids) - n + 1 + j]
    return key


def ngram_loss(train: Sequence[int], held_out: Sequence[int], n: int, vocab: int) -> float:
    """Mean ``-log p`` (nats per token) of ``held_out [M]`` under the add-one ``n``-gram table of
    ``train [N]`` (ids in ``[0, vocab)``), over positions 2 .. M - 1 (module doc)."""
    if n not in (1, 2, 3):
        raise ValueError(f"n must be 1, 2 or 3, got {n!r}")
    tr, ho = np.asarray(train, dtype=np.int64), np.asarray(held_out, dtype=np.int64)
    if len(tr) < n or len(ho) < 3:
        raise ValueError(f"train has {len(tr)} tokens and held_out {len(ho)}: too few for {n}-grams")
    for name, ids in (("train", tr), ("held_out", ho)):
        if ids.min() < 0 or ids.max() >= vocab:
            raise ValueError(f"{name} has ids outside [0, {vocab})")
    grams, counts = np.unique(_keys(tr, n, vocab), return_counts=True)
    held = _keys(ho, n, vocab)[3 - n :]  # the n-grams ending at positions 2 .. M - 1
    found = np.searchsorted(grams, held).clip(max=len(grams) - 1)
    c = np.where(grams[found] == held, counts[found], 0)
    if n == 1:
        total = np.full(len(held), len(tr))
    else:  # c(h): the histories, counted where they are followed by a token in train
        hist, hist_counts = np.unique(_keys(tr[:-1], n - 1, vocab), return_counts=True)
        h = held // vocab
        at = np.searchsorted(hist, h).clip(max=len(hist) - 1)
        total = np.where(hist[at] == h, hist_counts[at], 0)
    return float(np.mean(np.log(total + vocab) - np.log(c + 1)))


def ngram_losses(train: Sequence[int], held_out: Sequence[int], vocab: int) -> dict[str, float]:
    """``{"unigram": .., "bigram": .., "trigram": ..}``: each table's held-out loss (nats/token)."""
    return {name: round(ngram_loss(train, held_out, n, vocab), 4) for name, n in ORDERS.items()}


def gate(model_loss: float, losses: dict[str, float], margin: float = MARGIN) -> dict:
    """The competence gate: ``{"best": name, "best_loss", "model_loss", "margin", "passed"}``;
    passed when ``model_loss <= best_loss - margin``."""
    best = min(losses, key=losses.get)
    return {
        "best": best,
        "best_loss": losses[best],
        "model_loss": round(float(model_loss), 4),
        "margin": margin,
        "passed": bool(model_loss <= losses[best] - margin),
    }


def too_weak(gate_result: dict | None) -> str:
    """The verdict's sentence for a model that failed :func:`gate` (or has no held-out loss)."""
    if gate_result is None:
        return "The model is too weak to test this: its run records no held-out loss to gate it with."
    g = gate_result
    return (
        f"The model is too weak to test this: its held-out loss {g['model_loss']:.3f} nats/token is not "
        f"{g['margin']} below the {g['best']} table's {g['best_loss']:.3f}; train with the 'nanogpt' preset "
        "(or more steps) and study that run."
    )


def describe(baselines: dict[str, float] | None, gate_result: dict | None) -> str:
    """One line: the tables' held-out losses and the gate, as the experiments print it before a verdict."""
    if not baselines:
        return "n-gram baselines: none"
    tables = ", ".join(f"{k} {v:.3f}" for k, v in baselines.items())
    if gate_result is None:
        return f"n-gram baselines (add-one, nats/token): {tables}; the run records no held-out loss"
    g = gate_result
    return (
        f"n-gram baselines (add-one, nats/token): {tables}; the model {g['model_loss']:.3f}: "
        f"{'passes' if g['passed'] else 'fails'} the gate (at least {g['margin']} below the best)"
    )
