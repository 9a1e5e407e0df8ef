"""Streaming a whole file through `attnlab embed --input`: peak memory (RSS) for 100,000 generated
sentences against 10,000 (target: within 1.2x), each run in its own process."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile

from _common import table, target

NAME = "embed_stream"
TITLE = "Streaming embeddings: peak memory independent of the file's length"

CHILD = """
import json, resource, sys
from attnlab.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rc": code, "max_rss_kib": rss}), file=sys.stderr)
"""


def _write(path: str, n: int, seed: int = 0) -> None:
    words = [
        "attention",
        "query",
        "key",
        "value",
        "head",
        "model",
        "layer",
        "token",
        "the",
        "a",
        "of",
        "sentence",
    ]
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + "\n")


def run(ctx: dict) -> dict:
    quick = ctx.get("quick", False)
    sizes = (2_000, 20_000) if quick else (10_000, 100_000)
    rows, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src, out = os.path.join(tmp, f"in{n}.txt"), os.path.join(tmp, f"out{n}.npy")
            _write(src, n)
            args = ["embed", "--input", src, "--output", out, "--dtype", "bfloat16", "--quiet", "--json"]
            env = {
                **os.environ,
                "OMP_NUM_THREADS": os.environ.get("ATTNLAB_BENCH_THREADS", "") or str(os.cpu_count()),
            }
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env
            )
            usage = json.loads(proc.stderr.strip().splitlines()[-1])
            summary = json.loads(proc.stdout.strip().splitlines()[-1])
            raw[n] = {"max_rss_kib": usage["max_rss_kib"], "summary": summary, "load": os.getloadavg()}
            rows.append(
                [
                    f"{n:,}",
                    f"{usage['max_rss_kib'] / 1024:.0f} MiB",
                    f"{summary['sentences_per_s']:.0f}",
                    f"{os.path.getsize(out) / 2**20:.1f} MiB",
                ]
            )
    small, big = (raw[n]["max_rss_kib"] for n in sizes)
    r = big / small
    return {
        "name": NAME,
        "title": TITLE,
        "raw": {str(k): v for k, v in raw.items()},
        "targets": [
            target(
                f"peak RSS streaming {sizes[1]:,} sentences / {sizes[0]:,} sentences",
                "≤ 1.2×",
                r,
                r <= 1.2,
                f"{r:.3f}×",
            )
        ],
        "reports": [],
        "tables": [
            table(
                "attnlab embed --input FILE --output OUT.npy --dtype bfloat16 (MiniLM, chunks of 4,096 "
                "sentences of 3–12 words), one process per run",
                ["sentences", "peak RSS", "sentences/s", "output"],
                rows,
            )
        ],
        "notes": [
            "Peak RSS is the child process's ru_maxrss: the model, PyTorch and one chunk; the file is read "
            "twice (a validating count, then the chunks) and never held whole."
        ],
    }
