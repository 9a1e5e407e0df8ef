"""Run every benchmark (``make bench``); write benchmarks/results/KIND.json and docs/performance.md.

The results are kept per kind of CPU (benchmarks/results/intel-amx.json, amd-avx512.json, ...): a run
replaces its own kind's file, and docs/performance.md shows the last run of every kind side by side.

Each benchmark runs in its own subprocess (so one's memory or threads cannot disturb the next, and
a missing engine piece fails only its own section), in the order below. The matmul peak is
measured first and handed to the benchmarks that report a fraction of it.

    python benchmarks/run.py                  # everything (< 15 minutes on the 2-core machine)
    python benchmarks/run.py --only mha,minilm
    python benchmarks/run.py --quick          # small sizes, for checking the scripts themselves
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

BENCHMARKS = [
    "peak",
    "numpy_flash",
    "torch_flash",
    "sdpa_pitfalls",
    "mha",
    "encoder_layer",
    "gpt_generate",
    "generate_hf",
    "minilm",
    "embed",
    "embed_stream",
    "train_transformer",
    "train_gpt_text",
    "beyond_quadratic",
    "serve",
    "demo",
]
TIMEOUT_S = {
    "demo": 600,
    "generate_hf": 1500,
    "numpy_flash": 900,
    "beyond_quadratic": 1200,
    "embed": 2400,
    "embed_stream": 1800,
}


def _child(name: str, ctx_path: str, out_path: str) -> None:
    with open(ctx_path) as f:
        ctx = json.load(f)
    module = importlib.import_module(f"bench_{name}")
    result = module.run(ctx)
    with open(out_path, "w") as f:
        json.dump(result, f, default=float)


def _run_one(name: str, ctx: dict, workdir: str) -> dict:
    import subprocess

    ctx_path = os.path.join(workdir, "ctx.json")
    out_path = os.path.join(workdir, f"{name}.json")
    with open(ctx_path, "w") as f:
        json.dump(ctx, f)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                name,
                "--ctx",
                ctx_path,
                "--result",
                out_path,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=TIMEOUT_S.get(name, 420),
        )
        failed = proc.returncode != 0 or not os.path.exists(out_path)
        err = (proc.stderr or "").strip().splitlines()[-12:]
    except subprocess.TimeoutExpired:
        failed, err = True, [f"timed out after {TIMEOUT_S.get(name, 420)} s"]
    wall = time.perf_counter() - t0
    if failed:
        return {
            "name": name,
            "title": name,
            "error": "\n".join(err),
            "wall_s": wall,
            "tables": [],
            "targets": [],
            "notes": [],
        }
    with open(out_path) as f:
        result = json.load(f)
    result["wall_s"] = wall
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated benchmark names: " + ",".join(BENCHMARKS))
    ap.add_argument("--quick", action="store_true", help="small sizes, to check the scripts")
    ap.add_argument("--out", help="results file (default: benchmarks/results/KIND.json for this CPU's kind)")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--ctx", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        try:
            _child(args.child, args.ctx, args.result)
        except Exception:
            traceback.print_exc()
            return 1
        return 0

    from _common import machine
    from report import load_runs, render
    from tqdm import tqdm

    from attnlab._io import atomic_write_bytes

    names = BENCHMARKS if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {BENCHMARKS}", file=sys.stderr)
        return 2
    if "peak" not in names and any(
        n in names for n in ("minilm", "embed", "train_transformer", "train_gpt_text")
    ):
        names = ["peak"] + names
    started = time.time()
    results = {
        "machine": machine(),
        "quick": args.quick,
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)),
        "benchmarks": [],
    }
    ctx = {"quick": args.quick, "root": ROOT}
    with tempfile.TemporaryDirectory() as workdir:
        bar = tqdm(names, desc="benchmarks", unit="bench")
        for name in bar:
            bar.set_postfix_str(name)
            res = _run_one(name, ctx, workdir)
            if name == "peak" and "error" not in res:
                ctx["peak_flops"] = res["raw"]["peak_flops"]
            results["benchmarks"].append(res)
            status = "error" if "error" in res else "ok"
            tqdm.write(f"{name}: {status} in {res['wall_s']:.0f} s")
    results["wall_s"] = time.time() - started
    out = args.out or os.path.join(HERE, "results", f"{results['machine']['kind']}.json")
    results["machine"]["load_average_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    for res in results["benchmarks"]:
        res.setdefault("machine", results["machine"])
        res.setdefault("started_utc", results["started_utc"])
    if args.only and os.path.exists(out):
        # --only refreshes the named sections and keeps every other section of the last full run
        # (each section carries the machine and time it was measured on).
        with open(out) as f:
            previous = json.load(f)
        fresh = {r["name"] for r in results["benchmarks"] if "name" in r}
        kept = [r for r in previous.get("benchmarks", []) if r.get("name") not in fresh]
        order = {n: i for i, n in enumerate(BENCHMARKS)}
        merged = kept + results["benchmarks"]
        results["benchmarks"] = sorted(merged, key=lambda r: order.get(r.get("name"), 99))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    atomic_write_bytes(out, (json.dumps(results, indent=1, default=float) + "\n").encode())
    atomic_write_bytes(args.doc, render(load_runs(os.path.join(HERE, "results"), latest=out)).encode())
    print(
        f"wrote {os.path.relpath(out, ROOT)} and {os.path.relpath(args.doc, ROOT)} "
        f"in {results['wall_s'] / 60:.1f} min"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
