"""Long context and tiled (flash) attention."""

from __future__ import annotations

import numpy as np

from attnlab import ref
from attnlab.lessons.myths.registry import COURSE, myth


@myth(
    27,
    claim="A model uses long context as well as short just because its window is large.",
    source=f"{COURSE}, FlashAttention lesson, Common pitfalls",
    why_false=(
        "Fitting in the window is not the same as being attended to: with more distractors the weight "
        "on any one relevant token dilutes, and a model trained on shorter texts meets positions it never "
        "saw (the extrapolation experiment: RoPE perfect at its training length, far below that at 8x, "
        "though still well above chance)."
    ),
)
def _long_window():
    gap = 3.0  # the one relevant key's logit exceeds each distractor's by 3
    rows = {}
    for t in (10, 1_000, 100_000):
        logits = np.zeros(t)
        logits[0] = gap
        rows[t] = float(ref.softmax(logits)[0])
    lines = ["One relevant key with a logit 3 above each of the T - 1 distractors:"]
    lines += [f"  T = {t:7,}: weight on the relevant key = {w:.4f}" for t, w in rows.items()]
    from dataclasses import replace

    from attnlab.experiments.extrapolation import QUICK, run

    # the quick extrapolation experiment's RoPE model (the same seed, data and numbers), no fine-tunes
    settings = replace(QUICK, models=("rope",), finetune_steps=0)
    result = run(settings, progress=False, log=lambda *_: None)
    plain, pi = result.rows[0], result.rows[1]
    lengths = settings.lengths
    accuracy = {
        name: {t: row.at(t)["accuracy"] for t in lengths} for name, row in (("rope", plain), ("pi", pi))
    }
    lines.append(
        f"A RoPE model trained at T = {lengths[0]} on the latest-passkey task, its window {lengths[-1]} "
        "(attnlab experiment extrapolation --quick):"
    )
    lines += [
        f"  T = {t:4d}: accuracy {accuracy['rope'][t]:.3f}; "
        f"with position interpolation (s = {t // lengths[0]}) {accuracy['pi'][t]:.3f}"
        for t in lengths
    ]
    chance = 1 / settings.num_values  # a passkey is one of num_values values
    lines.append(f"  chance (a guess among {settings.num_values} passkey values): {chance:.3f}")
    lines.append(
        "A window that fits the text does not mean the text is used as well: weights dilute, and "
        "positions never seen in training break a model that was perfect at its training length."
    )
    return lines, {"weights": rows, "accuracy": accuracy, "chance": chance}


@myth(
    29,
    claim="FlashAttention is an approximation of attention.",
    source=f"{COURSE}, FlashAttention lesson",
    why_false=(
        "It computes exact attention tile by tile with an online softmax (running max and sum); only "
        "the memory traffic changes, never the result beyond float rounding."
    ),
)
def _flash_approximate():
    rng = np.random.default_rng(16)
    q, k, v = (rng.normal(size=(2, 4, 200, 16)) for _ in range(3))  # [B, h, T, d]
    dense, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(200))
    diffs = {}
    for block in (16, 64, 128):
        tiled = ref.flash_attention(q, k, v, causal=True, block_q=block, block_k=block)
        diffs[block] = float(np.abs(tiled - dense).max())
    lines = [
        "Causal attention, B=2, h=4, T=200, d=16: tiled (online softmax) vs dense softmax(QK^T/sqrt(d) + M) V",
        *(
            f"  tiles {b:3d} x {b:3d} (largest score block {b * b:,} of {200 * 200:,} entries): "
            f"max difference {d:.1e}"
            for b, d in diffs.items()
        ),
        "The running max and sum rescale exactly: same result up to float rounding, less memory.",
    ]
    return lines, {"max_difference": diffs}
