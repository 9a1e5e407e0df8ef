"""Training attnlab's Transformer on the reverse task vs the same model built from torch.nn.Transformer."""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from _common import (
    ceiling_now,
    explain_profile,
    fmt_s,
    profile_table,
    profile_top,
    ratio,
    summary,
    table,
    target,
)
from torch import nn

NAME = "train_transformer"
TITLE = "Training the Transformer on the reverse task vs torch.nn.Transformer"


class TorchSeq2Seq(nn.Module):
    """The same model from torch's own pieces: embeddings × sqrt(d) + sinusoidal positions,
    nn.Transformer (post-norm, batch_first), a linear generator."""

    def __init__(self, vocab: int, d: int, h: int, d_ff: int, layers: int, dropout: float, max_len: int):
        super().__init__()
        self.d = d
        self.src_embed, self.tgt_embed = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
        pos = torch.arange(max_len)[:, None]  # [L, 1]
        freq = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))  # [d / 2]
        pe = torch.zeros(max_len, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
        self.register_buffer("pe", pe)  # [L, d]
        self.core = nn.Transformer(d, h, layers, layers, d_ff, dropout, batch_first=True)
        self.generator = nn.Linear(d, vocab)
        self.drop = nn.Dropout(dropout)

    def _embed(self, emb, ids):
        return self.drop(emb(ids) * math.sqrt(self.d) + self.pe[: ids.shape[1]])  # [B, T, d]

    def forward(self, src, tgt_in, pad_id: int = 0):
        src_pad = src == pad_id  # [B, S], True = ignore (torch's convention)
        t = tgt_in.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(t)  # [T, T] float, -inf above the diagonal
        x, y = self._embed(self.src_embed, src), self._embed(self.tgt_embed, tgt_in)  # [B, S, d], [B, T, d]
        out = self.core(
            x,
            y,
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return self.generator(out)  # [B, T, V]


def _batches(n_batches: int, batch: int):
    from attnlab.tasks import get_task
    from attnlab.training.data import encode_seq2seq

    task = get_task("reverse")  # defaults: 3-12 symbols of 10
    examples = task.sample("train", n_batches * batch, seed=0)
    out = []
    for i in range(n_batches):
        src, tgt_in, tgt_out = encode_seq2seq(examples[i * batch : (i + 1) * batch], task.tokenizer)
        out.append((src, tgt_in, tgt_out))
    return out, task.tokenizer.vocab_size


def _trainer(model, batches):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = {"i": 0}

    def step():
        src, tgt_in, tgt_out = batches[state["i"] % len(batches)]
        state["i"] += 1
        logits = model(src, tgt_in)  # [B, T, V]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def _flops_per_step(step) -> int:
    """Forward + backward FLOPs of one training step (matmuls and attention), FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


def run(ctx: dict) -> dict:
    from attnlab.models import Transformer, TransformerConfig

    quick = ctx.get("quick", False)
    batch, d, h, layers, dropout = 64, 64, 4, 2, 0.0  # `attnlab train transformer` defaults
    batches, vocab = _batches(16, batch)
    torch.manual_seed(0)
    cfg = TransformerConfig(
        src_vocab=vocab,
        tgt_vocab=vocab,
        d_model=d,
        num_heads=h,
        d_ff=4 * d,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        max_len=256,
        dropout=dropout,
    )
    ours = Transformer(cfg).train()
    theirs = TorchSeq2Seq(vocab, d, h, 4 * d, layers, dropout, 256).train()
    steps = {"attnlab": _trainer(ours, batches), "torch": _trainer(theirs, batches)}
    flops = {n: _flops_per_step(s) for n, s in steps.items()}
    for s in steps.values():  # warm-up
        for _ in range(3):
            s()
    block, repeats = (5, 3) if quick else (10, 5)
    runs: dict[str, list] = {n: [] for n in steps}
    for _ in range(repeats):  # blocks of `block` steps, interleaved
        for n, s in steps.items():
            t0 = time.perf_counter()
            for _ in range(block):
                s()
            runs[n].append((time.perf_counter() - t0) / block)
    tokens = sum(int((b[2] != 0).sum()) for b in batches) / len(batches)  # target tokens per step
    peak = ceiling_now(ctx)  # measured again here, just after the timings
    raw = {
        "tokens_per_step": tokens,
        "flops_per_step": flops,
        "peak_flops": peak,
        "params": {
            "attnlab": sum(p.numel() for p in ours.parameters()),
            "torch": sum(p.numel() for p in theirs.parameters()),
        },
    }
    rows = []
    for n in steps:
        s = summary(runs[n])
        tps = tokens / s["median"]
        mfu = flops[n] / s["median"] / peak if peak else None
        raw[n] = {"step_time": s, "tokens_per_s": tps, "mfu": mfu}
        rows.append(
            [
                n,
                fmt_s(s),
                f"{tps:,.0f}",
                f"{flops[n] / 1e9:.3f}",
                f"{100 * mfu:.2f}%" if mfu else "n/a",
                f"{raw['params'][n]:,}",
            ]
        )
    r = ratio(runs["torch"], runs["attnlab"])  # tokens/s of attnlab over torch
    tables, limit = [], ""
    if r < 1.0:
        tops = {n: profile_top(s, n=10) for n, s in steps.items()}
        raw["profile"] = tops
        tables.append(profile_table("Where a training step spends its time (torch.profiler)", tops))
        limit = explain_profile(tops)
    return {
        "name": NAME,
        "title": TITLE,
        "raw": raw,
        "targets": [
            target(
                "Transformer training tokens/s, attnlab / nn.Transformer",
                "≥ 1.0×",
                r,
                r >= 1.0,
                f"{r:.2f}×",
                limit,
            )
        ]
        + (
            [
                target(
                    "Transformer training MFU (attnlab)",
                    "≤ 100% (a ceiling bounds it)",
                    raw["attnlab"]["mfu"],
                    raw["attnlab"]["mfu"] <= 1.0,
                    f"{100 * raw['attnlab']['mfu']:.2f}%",
                    "the ceiling was measured low: `attnlab audit peak` missed a faster kernel or ran busy",
                )
            ]
            if peak
            else []
        ),
        "reports": [] if peak else [{"what": "Transformer training MFU (attnlab)", "shown": "n/a"}],
        "tables": [
            table(
                f"Training steps (forward, backward, AdamW) on reverse, batch {batch}, d={d}, "
                f"h={h}, d_ff={4 * d}, {layers}+{layers} layers, dropout {dropout}, float32 "
                f"(median, min–max of {repeats} blocks of {block} steps)",
                ["model", "time per step", "target tokens/s", "GFLOP per step", "MFU", "parameters"],
                rows,
            )
        ]
        + tables,
        "notes": [
            f"Tokens/s counts the target (label) tokens that are not padding: {tokens:.0f} per step on "
            "average. GFLOP per step is forward + backward as counted by torch.utils.flop_counter on one "
            "step; MFU is that times steps per second over `attnlab audit peak`.",
            "The sizes are `attnlab train`'s defaults for the transformer (d_model 64, 4 heads, 2+2 layers, "
            "batch 64): a model this small is bound by per-operation overhead (hundreds of small "
            "operations per step), not by FLOPs, which keeps both MFUs far from 100%. "
            "nn.Transformer adds a final LayerNorm to each stack; attnlab's post-norm "
            "stacks have none (hence the parameter difference).",
        ],
    }
