"""Wall time of ``make demo`` (the main job), run once in a subprocess from the repository root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from _common import table

NAME = "demo"
TITLE = "make demo"


def run(ctx: dict) -> dict:
    root = ctx["root"]
    if shutil.which("make"):
        cmd = ["make", "-s", "demo"]
    else:  # what the Makefile's demo target runs
        cmd = [os.path.join(os.path.dirname(sys.executable), "attnlab"), "demo", "--out", "out/demo"]
    if ctx.get("quick"):
        cmd = [os.path.join(os.path.dirname(sys.executable), "attnlab"), "lesson", "--list"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=560)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {proc.returncode}:\n{tail}")
    lines = len(proc.stdout.splitlines())
    return {
        "name": NAME,
        "title": TITLE,
        "targets": [],
        "reports": [{"what": "`make demo` wall time", "shown": f"{wall:.1f} s"}],
        "raw": {"command": cmd, "wall_s": wall, "stdout_lines": lines},
        "tables": [
            table(
                "One run",
                ["command", "wall time", "lines printed"],
                [[f"`{' '.join(cmd)}`", f"{wall:.1f} s", lines]],
            )
        ],
        "notes": [
            "One run (the demo is minutes of work, not a micro-benchmark); it includes Python "
            "start-up, every import and writing the report under out/demo."
        ],
    }
