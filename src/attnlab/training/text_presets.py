"""Settings for ``attnlab train --text ... --preset NAME``: the options a preset sets (any option given
on the command line wins). Both train a GPT on characters.

- ``quick``: small enough for ``make demo`` on a 2-core CPU (see docs/training.md for the measured
  time and held-out loss); its samples already have speakers and line breaks.
- ``nanogpt``: nanoGPT's documented CPU run of ``shakespeare_char`` (README, "I only have a
  MacBook"): 4 layers, 4 heads, width 128, context 64, batch 12, 2,000 steps, lr 1e-3 decaying to
  1e-4 over the run (our cosine ends at 10% of the peak too), 100 warm-up steps, weight decay 0.1,
  gradient clipping at 1.0, no dropout, 20 x 12 = 240 held-out windows per evaluation.
"""

from __future__ import annotations

from typing import Any

TEXT_PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "model": "gpt",
        "tokenizer": "char",
        "layers": 2,
        "heads": 4,
        "d_model": 128,
        "context": 64,
        "batch": 16,
        "steps": 500,
        "lr": 3e-3,
        "warmup": 50,
        "weight_decay": 0.1,
        "dropout": 0.0,
        "eval_every": 250,
        "eval_size": 64,
    },
    "nanogpt": {
        "model": "gpt",
        "tokenizer": "char",
        "layers": 4,
        "heads": 4,
        "d_model": 128,
        "context": 64,
        "batch": 12,
        "steps": 2000,
        "lr": 1e-3,
        "warmup": 100,
        "weight_decay": 0.1,
        "clip": 1.0,
        "dropout": 0.0,
        "eval_every": 250,
        "eval_size": 240,
    },
}
