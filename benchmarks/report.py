"""Render benchmarks/results/*.json (the last run of each CPU kind) as docs/performance.md."""

from __future__ import annotations

import glob
import json
import os
import sys

from _common import KINDS

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
  the sizes in its table and every kernel attnlab runs (`torch.mm` and oneDNN's prepacked linear),
  with PyTorch's threads; measured first, and again inside each benchmark that divides by it, right
  after its timings (the larger counts). Utilisation = useful FLOPs per second / ceiling, and a
  utilisation above 100% is reported as a missed target: the ceiling was wrong.
"""


def where_time_goes() -> str:
    """The hand-written analysis (benchmarks/where_time_goes.md: profiles, levers, what limits a
    missed target), placed after the method on the rendered page."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "where_time_goes.md")) as f:
        return f.read().rstrip() + "\n"


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
    if m.get("cpu_caps"):
        have = ", ".join(m.get("cpu_hardware_flags", [])) or "?"
        caps = ", ".join(f"{k}={v}" for k, v in m["cpu_caps"].items())
        rows.append(("vector-unit caps", f"{caps}: this kind emulated on a CPU with {have}"))
    for path, said in m.get("kernel_choices", {}).items():
        rows.append((f"kernel: {path}", said))
    if m.get("commit"):
        rows.append(("attnlab commit", m["commit"]))
    return ["| | |", "| --- | --- |"] + [f"| {a} | {b} |" for a, b in rows] + [""]


def load_runs(folder: str, latest: str | None = None) -> dict[str, dict]:
    """The last run of each CPU kind: ``{kind: results}`` from ``folder/*.json``; ``latest`` (a results
    file anywhere) replaces its kind's entry."""
    runs = {}
    paths = sorted(glob.glob(os.path.join(folder, "*.json")))
    for path in paths + ([latest] if latest else []):
        with open(path) as f:
            results = json.load(f)
        runs[results["machine"].get("kind", "other")] = results
    return runs


def _label(kind: str, results: dict) -> str:
    return f"{KINDS.get(kind, kind)}, {results['started_utc'][:10]}"


def _side_by_side(runs: dict[str, dict]) -> list[str]:
    """One row per target, one column per CPU kind: the measured figure and whether it met its target
    there (a target that differs between kinds is given per kind)."""
    kinds = list(runs)
    rows: dict[str, dict[str, dict]] = {}
    for kind, results in runs.items():
        for b in results["benchmarks"]:
            for t in b.get("targets", []):
                rows.setdefault(t["what"], {})[kind] = t
            for r in b.get("reports", []):
                rows.setdefault(r["what"], {})[kind] = {"target": "report", **r, "met": None}
            if "error" in b:
                rows.setdefault(b["title"], {})[kind] = {
                    "target": "(see section)",
                    "shown": "failed",
                    "met": False,
                }
    out = [
        "| benchmark | target | " + " | ".join(_label(k, runs[k]) for k in kinds) + " |",
        "| --- | --- | " + " | ".join("---" for _ in kinds) + " |",
    ]
    for what, by_kind in rows.items():
        goals = {k: t["target"] for k, t in by_kind.items()}
        if len(set(goals.values())) == 1:
            goal = next(iter(goals.values()))
        else:
            goal = "; ".join(
                f"{KINDS.get(k, k).split(' with')[0].split(',')[0]}: {g}" for k, g in goals.items()
            )
        cells = []
        for k in kinds:
            t = by_kind.get(k)
            if t is None:
                cells.append("not measured")
            elif t["met"] is None:
                cells.append(t["shown"])
            else:
                cells.append(f"{t['shown']} " + ("(met)" if t["met"] else "**(missed)**"))
        out.append(f"| {what} | {goal} | " + " | ".join(cells) + " |")
    return out + [""]


def _missed(runs: dict[str, dict]) -> list[str]:
    """What limits each missed target, per kind."""
    out = []
    for kind, results in runs.items():
        for b in results["benchmarks"]:
            for t in b.get("targets", []):
                if not t["met"] and t.get("limit"):
                    out.append(f"* {KINDS.get(kind, kind)}, {t['what']}: {t['limit']}")
    return (["What limits each missed target:", ""] + out + [""]) if out else []


def _sections(results: dict, level: str) -> list[str]:
    out = []
    for b in results["benchmarks"]:
        out += [f"{level} {b['title']}", "", f"_`{b['name']}`, {b['wall_s']:.0f} s._", ""]
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
    return out


def render(runs: dict[str, dict]) -> str:
    """docs/performance.md from the last run of each CPU kind (:func:`load_runs`)."""
    out = [
        "# Performance",
        "",
        "Written by `make bench` (`benchmarks/run.py`); the raw numbers are in `benchmarks/results/`, one "
        "file per kind of CPU, and each run replaces only its own kind's. Do not edit by hand: rerun "
        "`make bench`. The machines that build attnlab are of "
        f"{len(KINDS) - 1} kinds ({', '.join(v for k, v in KINDS.items() if k != 'other')}); the last "
        "run on each is shown side by side.",
        "",
    ]
    for kind, results in runs.items():
        out.append(
            f"* {_label(kind, results)}: {results['machine']['cpu']}, "
            f"{', '.join(results['machine'].get('cpu_flags', [])) or 'flags not recorded'}; "
            f"{results['wall_s'] / 60:.1f} minutes"
            + (" (**quick mode: small sizes, not the targets' sizes**)" if results.get("quick") else "")
        )
    out += ["", "## Targets", ""] + _side_by_side(runs) + _missed(runs) + [METHOD, where_time_goes()]
    for kind, results in runs.items():
        out += [f"## {_label(kind, results)}", "", "### Machine", ""]
        out += _machine(results["machine"])
        out += _sections(results, "###")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.stdout.write(render(load_runs(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results"))))
