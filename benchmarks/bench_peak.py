"""This machine's float32 matmul ceiling (``attnlab audit peak``), used for FLOP fractions."""

from __future__ import annotations

from _common import table

NAME = "peak"
TITLE = "FLOP ceiling (attnlab audit peak)"


def run(ctx: dict) -> dict:
    from attnlab.audit.peak import measure_peak

    rep = measure_peak(seconds=1.0 if ctx.get("quick") else 4.0)
    kernels = list(rep["by_size"][0]["kernels"])
    rows = [
        [r["n"]] + [f"{r['kernels'][k] / 1e9:.1f}" for k in kernels] + [r["kernel"]] for r in rep["by_size"]
    ]
    return {
        "name": NAME,
        "title": TITLE,
        "raw": rep,
        "tables": [
            table(
                f"float32 [n, n] @ [n, n], {rep['threads']} threads, best repeat, GFLOP/s by kernel",
                ["n"] + kernels + ["fastest"],
                rows,
            )
        ],
        "targets": [],
        "reports": [
            {"what": "FLOP ceiling (float32 matmul)", "shown": f"{rep['peak_flops'] / 1e9:.1f} GFLOP/s"}
        ],
        "notes": [
            "The ceiling every utilisation figure below is divided by: the best rate of every kernel "
            "attnlab's fast paths run (torch.mm, and oneDNN's prepacked linear that the encoder and "
            "embedding paths use). One kernel's rate is no ceiling for another: on an AMD Zen 5, "
            "torch.mm (MKL) measured 207 GFLOP/s while the prepacked path ran MiniLM at 160% of that."
        ],
    }
