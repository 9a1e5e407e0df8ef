"""Render benchmarks/results.json as docs/performance.md."""

from __future__ import annotations

import json
import sys

METHOD = """\
## How the numbers are measured

* **Time.** The candidates of one comparison run in the same process, interleaved (A, B, A, B, …)
  after a warm-up call each, so a busy phase of the shared machine hits both alike. Tables give
  the median and the min–max of the runs; every ratio is median(A) / median(B) from that process.
  PyTorch uses its default thread count (one per core); NumPy's OpenBLAS likewise.
* **NumPy memory.** `tracemalloc` (NumPy reports its array buffers to it): the peak during the call
  minus what was allocated before it — the output and every temporary, not the inputs.
* **PyTorch memory (CPU).** PyTorch has no allocator statistics on the CPU, so a
  `TorchDispatchMode` sees every tensor each ATen operation returns, adds the bytes of its storage
  the first time the storage appears and subtracts them when the storage is freed (a
  `StorageWeakRef` expires); the peak of that running sum is the extra memory of the call. It
  counts every intermediate tensor; scratch buffers private to a fused kernel (SDPA's own tiles)
  are invisible to it, which flatters SDPA by at most a few MiB.
* **FLOP ceiling.** `attnlab audit peak`: the best float32 `[n, n] @ [n, n]` rate (2n³ FLOPs) over
  the sizes in its table, with PyTorch's threads. Utilisation = useful FLOPs per second / ceiling.
"""


def _md_table(t: dict) -> list[str]:
    out = [
        f"**{t['title']}**",
        "",
        "| " + " | ".join(t["columns"]) + " |",
        "| " + " | ".join("---" for _ in t["columns"]) + " |",
    ]
    out += ["| " + " | ".join(r) + " |" for r in t["rows"]]
    return out + [""]


def _machine(m: dict) -> list[str]:
    v = m["versions"]
    rows = [
        ("CPU", f"{m['cpu']}, {m['cores']} cores, {m.get('memory_gib')} GiB"),
        ("OS / Python", f"{m['os']} / {m['python']}"),
        ("versions", ", ".join(f"{k} {val}" for k, val in v.items())),
        (
            "PyTorch",
            f"{m['torch_threads']} threads, BLAS {m['torch_blas']}, CPU capability "
            f"{m['torch_cpu_capability']}",
        ),
        ("NumPy SIMD", ", ".join(m.get("numpy_simd", [])) or "?"),
    ]
    for lib in m["blas"]:
        rows.append(("BLAS", ", ".join(f"{k}={val}" for k, val in lib.items())))
    rows.append(("BLAS environment", ", ".join(f"{k}={val}" for k, val in m["env"].items())))
    la, lb = m.get("load_average"), m.get("load_average_end")
    if la:
        rows.append(
            (
                "load average (1, 5, 15 min)",
                f"start {tuple(round(x, 2) for x in la)}"
                + (f", end {tuple(round(x, 2) for x in lb)}" if lb else ""),
            )
        )
    if m.get("commit"):
        rows.append(("attnlab commit", m["commit"]))
    return ["| | |", "| --- | --- |"] + [f"| {a} | {b} |" for a, b in rows] + [""]


def render(results: dict) -> str:
    benches = results["benchmarks"]
    out = [
        "# Performance",
        "",
        f"Written by `make bench` (`benchmarks/run.py`) on {results['started_utc']} UTC in "
        f"{results['wall_s'] / 60:.1f} minutes; the raw numbers are in `benchmarks/results.json`. "
        "Do not edit by hand: rerun `make bench`."
        + (" **Quick mode: small sizes, not the targets' sizes.**" if results.get("quick") else ""),
        "",
        "## Machine",
        "",
    ]
    out += _machine(results["machine"])
    out += [
        "## Targets",
        "",
        "| benchmark | target | measured | met | what limits it |",
        "| --- | --- | --- | --- | --- |",
    ]
    for b in benches:
        for t in b.get("targets", []):
            out.append(
                f"| {t['what']} | {t['target']} | {t['shown']} | {'yes' if t['met'] else '**no**'} | "
                f"{t['limit'] if not t['met'] else ''} |"
            )
        if "error" in b:
            out.append(
                f"| {b['title']} | (see section) | not measured: the benchmark failed | **no** | "
                f"{b['error'].splitlines()[-1] if b['error'] else ''} |"
            )
        for r in b.get("reports", []):
            out.append(f"| {r['what']} | report | {r['shown']} | — | |")
    out += ["", METHOD]
    for b in benches:
        out += [f"## {b['title']}", "", f"_`{b['name']}`, {b['wall_s']:.0f} s._", ""]
        if "error" in b:
            out += ["The benchmark failed:", "", "```", b["error"], "```", ""]
            continue
        if b.get("about"):
            out += [b["about"], ""]
        for t in b["tables"]:
            out += _md_table(t)
        for n in b.get("notes", []):
            out.append(f"* {n}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results.json") as f:
        sys.stdout.write(render(json.load(f)))
