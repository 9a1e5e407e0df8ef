"""This machine's float32 matmul ceiling (``attnlab audit peak``), used for FLOP fractions."""

from __future__ import annotations

from _common import table

NAME = "peak"
TITLE = "FLOP ceiling (attnlab audit peak)"


def run(ctx: dict) -> dict:
    from attnlab.audit.peak import measure_peak

    rep = measure_peak(seconds=1.0 if ctx.get("quick") else 4.0)
    rows = [[r["n"], f"{r['flops_per_s'] / 1e9:.1f}", r["repeats"]] for r in rep["by_size"]]
    return {
        "name": NAME,
        "title": TITLE,
        "raw": rep,
        "tables": [
            table(
                f"float32 [n, n] @ [n, n], {rep['threads']} threads, best repeat",
                ["n", "GFLOP/s", "repeats"],
                rows,
            )
        ],
        "targets": [],
        "reports": [
            {"what": "FLOP ceiling (float32 matmul)", "shown": f"{rep['peak_flops'] / 1e9:.1f} GFLOP/s"}
        ],
        "notes": ["The ceiling every utilisation figure below is divided by."],
    }
