"""Decode with a trained model and score the result: token accuracy and exact-sequence accuracy.

Seq2seq models decode with :mod:`attnlab.decoding` (greedy or beam search over the model's
``start``/``step``/``reorder`` protocol). A GPT continues the prompt ``[BOS] x [SEP]`` greedily
through the same ``start``/``step`` protocol, prompts of equal length batched together.

Scores for predictions ``p`` against targets ``y`` (as symbol strings):

- token accuracy = sum_i #{j < |y_i| : p_ij = y_ij} / sum_i |y_i|  (a short prediction misses the rest)
- exact accuracy = #{i : p_i = y_i} / N  (the whole sequence, length included)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.decoding import beam_search, greedy
from attnlab.tasks import BOS, EOS, Example, Task
from attnlab.training.data import gpt_prompt, pad_rows


def _strip(row: list[int]) -> list[int]:
    if row and row[0] == BOS:
        row = row[1:]
    return row[: row.index(EOS)] if EOS in row else row


def _device(model) -> torch.device:
    """Where ``model``'s parameters are (its inputs go there too)."""
    return next(model.parameters()).device


def model_positions(model) -> int | None:
    """The positions ``model`` has (its config's ``max_len``), None for a model without a limit."""
    positions = getattr(getattr(model, "config", None), "max_len", None)
    return positions if isinstance(positions, int) else None


@torch.no_grad()
def _gpt_greedy(model, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """Greedy continuations (``pad_id`` after EOS), prompts of equal length decoded as one batch."""
    out: list[list[int]] = [[] for _ in prompts]
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    positions = model_positions(model)
    for length, idx in by_len.items():
        prompt = torch.tensor([prompts[i] for i in idx], dtype=torch.long, device=_device(model))  # [B, P]
        # the last new token is never fed: P + new - 1 positions (the slack stops at the model's end)
        new = max_new if positions is None else max(1, min(max_new, positions - length + 1))
        for i, row in zip(idx, greedy(model, prompt, max_len=new, eos_id=EOS).tolist()):  # [B, L]
            out[i] = row
    return out


@torch.no_grad()
def predict(
    model,
    task: Task,
    sources: Sequence[str],
    *,
    decode: str = "greedy",
    beam_size: int = 4,
    batch_size: int = 256,
    slack: int = 2,
) -> list[str]:
    """Decode each source string with ``model`` -> predicted target strings."""
    if decode not in ("greedy", "beam"):
        raise ValueError(f"decode must be 'greedy' or 'beam', got {decode!r}")
    tok = task.tokenizer
    if decode == "beam" and beam_size > tok.vocab_size:  # (a beam wider than the choices is a slip)
        raise ValueError(f"beam_size={beam_size:,} is more than the vocabulary ({tok.vocab_size:,} tokens)")
    was_training = model.training
    model.eval()
    preds: list[str] = []
    # a seq2seq model's decoding slack stops at its last position
    end = None if getattr(model, "DECODER_ONLY", False) else model_positions(model)
    try:
        for lo in range(0, len(sources), batch_size):
            chunk = list(sources[lo : lo + batch_size])
            max_len = max(task.max_target_len(s) for s in chunk) + 1 + slack  # + EOS
            if end is not None:
                max_len = max(1, min(max_len, end))
            if getattr(model, "DECODER_ONLY", False):
                rows = _gpt_greedy(model, [gpt_prompt(s, tok) for s in chunk], max_len)
            else:
                src = pad_rows([tok.encode(s) + [EOS] for s in chunk]).to(_device(model))  # [B, S]
                if decode == "beam":
                    tokens = beam_search(model, src, beam_size=beam_size, max_len=max_len).tokens  # [B, L]
                else:
                    tokens = greedy(model, src, max_len=max_len, bos_id=BOS, eos_id=EOS)  # [B, L]
                rows = tokens.tolist()
            preds.extend(tok.decode(_strip(r)) for r in rows)
    finally:
        model.train(was_training)
    return preds


def score(preds: Sequence[str], targets: Sequence[str]) -> dict[str, float]:
    """``{"token_acc", "exact", "n"}`` of predictions against targets (see module doc)."""
    if len(preds) != len(targets):
        raise ValueError(f"preds has {len(preds)} items but targets has {len(targets)}")
    hit = sum(sum(a == b for a, b in zip(p, y)) for p, y in zip(preds, targets))
    total = sum(len(y) for y in targets)
    exact = sum(p == y for p, y in zip(preds, targets))
    n = len(targets)
    return {"token_acc": hit / total if total else 0.0, "exact": exact / n if n else 0.0, "n": n}


def evaluate_examples(model, task: Task, examples: Sequence[Example], **kw) -> dict[str, float]:
    """Decode ``examples``' sources and score against their targets."""
    preds = predict(model, task, [e.src for e in examples], **kw)
    return score(preds, [e.tgt for e in examples])
