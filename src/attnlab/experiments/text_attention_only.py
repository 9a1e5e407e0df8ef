"""Does an induction head form on text? A two-layer attention-only GPT trained on a text run's corpus.

The language models of ``attnlab train --text`` (``quick``, ``nanogpt``) have MLPs and no induction
head (:mod:`attnlab.experiments.text_induction`). Olsson et al. (2022) watched induction heads form
first in two-layer attention-only models, so this trains one — attnlab's GPT with ``ffn="none"``,
RoPE, an untied unembedding, AdamW — on random windows of the run's ``train.bin`` (the same tokens
its preset saw) and, every ``every`` steps, reads on ``[BOS, r, r]`` probes of distinct random
tokens (BOS: the line break) the best head's induction and previous-token score
(``exclude_first=True``) and the in-context gain (loss on the first copy minus loss on the repeat,
each copy's first token left out). It "forms" an induction head when the best score passes
:data:`THRESHOLD` at some logged step, the threshold of ``attnlab heads``.

The result (the settings, tokens seen, the log) is cached in ``out/attention-only-<key>.json``,
``key`` a hash of the settings and the run's token file, and read from there the next time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attnlab._checks import positive_int
from attnlab._io import atomic_write_json
from attnlab.devices import torch_threads
from attnlab.interp import repeated_tokens, score_heads
from attnlab.interp.read import attention
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.load import load
from attnlab.tasks.token_stream import TokenStream
from attnlab.training.text_data import TRAIN, read_meta

THRESHOLD = 0.4  # the best induction score that counts as an induction head (as attnlab heads)


@dataclasses.dataclass(frozen=True)
class Trial:
    """Model width ``d_model`` (4 heads), ``context`` (tokens per window), ``steps`` of ``batch``
    windows at ``lr``, a log line every ``every`` steps, ``probes`` probe rows, ``seed``."""

    d_model: int = 64
    context: int = 128
    steps: int = 3000
    batch: int = 16
    lr: float = 3e-3
    every: int = 500
    probes: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "context", "steps", "batch", "every", "probes"):
            positive_int(name, getattr(self, name))
        if self.d_model % 4:
            raise ValueError(f"d_model must be a multiple of the 4 heads, got {self.d_model}")
        if self.context < 5:
            raise ValueError(f"context must leave room for a repeat probe (at least 5), got {self.context}")


def _probe_row(model: GPT, probe: torch.Tensor, length: int) -> dict:
    """Best induction and previous-token score, and the in-context gain, on ``probe [B, 1 + 2 L]``."""
    model.eval()
    with torch.no_grad():
        scores = score_heads(attention(model, probe), probe, ("induction", "previous"), exclude_first=True)
        logits = model(probe[:, :-1])  # [B, 2L, V]
    loss = F.cross_entropy(logits.transpose(1, 2), probe[:, 1:], reduction="none")  # [B, 2L]
    model.train()
    return {
        "induction": round(float(scores["induction"].max()), 4),
        "previous": round(float(scores["previous"].max()), 4),
        "gain": round(float(loss[:, 1:length].mean() - loss[:, length + 1 :].mean()), 4),
    }


def train_trial(run_dir: str | Path, t: Trial, *, log=print) -> dict:
    """Train the module doc's model on ``run_dir``'s ``train.bin`` and log it (no cache)."""
    folder = Path(run_dir)
    meta = read_meta(folder)
    vocab = int(meta["vocab_size"])
    train = np.asarray(TokenStream(folder / TRAIN, vocab).ids)  # [N]
    if len(train) <= t.context + 1:
        raise ValueError(f"{folder} has {len(train)} training tokens, too few for windows of {t.context}")
    torch.manual_seed(t.seed)
    config = GPTConfig(vocab_size=vocab, d_model=t.d_model, num_heads=4, num_layers=2, d_ff=4 * t.d_model,
                       max_len=t.context, positions="rope", ffn="none", tie_weights=False)  # fmt: skip
    model = GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=0.0)
    length = min((t.context - 1) // 2, vocab - 1)
    bos = load(folder).tokenizer.encode("\n")[0]  # a text has no BOS: the line break stands in
    probe = repeated_tokens(t.probes, length, vocab, bos=bos, seed=t.seed + 1)  # [P, 1 + 2 L]
    rng, history, t0, loss = np.random.default_rng(t.seed), [], time.perf_counter(), None
    with torch_threads(1):
        for step in range(t.steps + 1):
            if step % t.every == 0 or step == t.steps:
                row = {"step": step, "train_loss": None if loss is None else round(loss, 4)}
                history.append({**row, **_probe_row(model, probe, length)})
                log(f"step {step}: {history[-1]}")
            if step == t.steps:
                break
            starts = rng.integers(0, len(train) - t.context - 1, t.batch)
            x = torch.from_numpy(np.stack([train[s : s + t.context + 1] for s in starts]).astype(np.int64))
            out = model(x[:, :-1])  # [B, T, V]
            step_loss = F.cross_entropy(out.reshape(-1, vocab), x[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            step_loss.backward()
            opt.step()
            loss = float(step_loss.detach())
    best = max(history, key=lambda r: r["induction"])
    return {
        "settings": dataclasses.asdict(t),
        "run": str(folder),
        "tokens_seen": t.steps * t.batch * t.context,
        "seconds": round(time.perf_counter() - t0, 1),
        "history": history,
        "best_induction": best["induction"],
        "formed": best["induction"] > THRESHOLD,
        "formed_at_step": next((r["step"] for r in history if r["induction"] > THRESHOLD), None),
    }


def run(run_dir: str | Path, out_dir: str | Path, t: Trial = Trial(), *, log=print) -> dict:
    """:func:`train_trial`, cached in ``out_dir`` (module doc); adds ``cached`` (read from there)."""
    folder, out = Path(run_dir), Path(out_dir)
    token_file = json.dumps(read_meta(folder)["files"], sort_keys=True)
    key = hashlib.sha256(
        (json.dumps(dataclasses.asdict(t), sort_keys=True) + token_file).encode()
    ).hexdigest()
    path = out / f"attention-only-{key[:16]}.json"
    if path.is_file():
        return {**json.loads(path.read_text()), "cached": True}
    result = train_trial(folder, t, log=log)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result)
    return {**result, "cached": False}
