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
from typing import Any

import torch

from attnlab.tasks import BOS, EOS, Example, Task
from attnlab.training.data import gpt_prompt, pad_rows


def _rows(result: Any) -> list[list[int]]:
    """Token rows from a decoder's result (a ``[B, L]`` tensor, a list of rows, or a tuple whose
    first item is one of those; with n-best lists the best hypothesis is taken)."""
    if isinstance(result, tuple):
        result = result[0]
    if isinstance(result, dict):
        result = result.get("tokens", result.get("sequences"))
    if torch.is_tensor(result):
        return [[int(t) for t in row] for row in result.tolist()]
    rows = []
    for row in result:
        if isinstance(row, tuple):
            row = row[0]
        if torch.is_tensor(row):
            row = row.tolist()
        if row and isinstance(row[0], (list, tuple)) or (row and torch.is_tensor(row[0])):
            row = row[0]  # n-best: the best hypothesis
            row = row.tolist() if torch.is_tensor(row) else row
        rows.append([int(t) for t in row])
    return rows


def _strip(row: list[int]) -> list[int]:
    if row and row[0] == BOS:
        row = row[1:]
    return row[: row.index(EOS)] if EOS in row else row


@torch.no_grad()
def _gpt_greedy(model, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in prompts]
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for idx in by_len.values():
        prompt = torch.tensor([prompts[i] for i in idx], dtype=torch.long)  # [B, P]
        state = model.start(prompt)
        logits = state.last_logits  # [B, V]
        done = torch.zeros(len(idx), dtype=torch.bool)
        for _ in range(max_new):
            tok = logits.argmax(-1)  # [B]
            for j, i in enumerate(idx):
                if not done[j]:
                    out[i].append(int(tok[j]))
            done |= tok == EOS
            if bool(done.all()):
                break
            logits, state = model.step(tok, state)
    return out


@torch.no_grad()
def _seq2seq_greedy(model, src: torch.Tensor, max_len: int) -> list[list[int]]:
    """Greedy decoding over ``start``/``step``, used only when :mod:`attnlab.decoding` is absent."""
    state = model.start(src)
    tok = torch.full((src.shape[0],), BOS, dtype=torch.long)  # [B]
    out: list[list[int]] = [[] for _ in range(src.shape[0])]
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        logits, state = model.step(tok, state)  # [B, V]
        tok = logits.argmax(-1)  # [B]
        for i in range(len(out)):
            if not done[i]:
                out[i].append(int(tok[i]))
        done |= tok == EOS
        if bool(done.all()):
            break
    return out


@torch.no_grad()
def predict(model, task: Task, sources: Sequence[str], *, decode: str = "greedy", beam_size: int = 4,
            batch_size: int = 256, slack: int = 2) -> list[str]:
    """Decode each source string with ``model`` -> predicted target strings."""
    try:
        from attnlab import decoding
    except ImportError:  # the decoding module is optional here; greedy needs only start/step
        decoding = None
    if decode not in ("greedy", "beam"):
        raise ValueError(f"decode must be 'greedy' or 'beam', got {decode!r}")
    tok = task.tokenizer
    was_training = model.training
    model.eval()
    preds: list[str] = []
    try:
        for lo in range(0, len(sources), batch_size):
            chunk = list(sources[lo: lo + batch_size])
            max_len = max(task.max_target_len(s) for s in chunk) + 1 + slack  # + EOS
            if getattr(model, "kind", "") == "gpt":
                rows = _gpt_greedy(model, [gpt_prompt(s, tok) for s in chunk], max_len)
            else:
                src = pad_rows([tok.encode(s) + [EOS] for s in chunk])  # [B, S]
                if decoding is None:
                    if decode == "beam":
                        raise ValueError("beam search needs attnlab.decoding, which is not installed")
                    rows = _seq2seq_greedy(model, src, max_len)
                    preds.extend(tok.decode(_strip(r)) for r in rows)
                    continue
                if decode == "beam":
                    result = decoding.beam_search(model, src, beam_size=beam_size, max_len=max_len)
                else:
                    result = decoding.greedy(model, src, max_len=max_len, bos_id=BOS, eos_id=EOS)
                rows = _rows(result)
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
