"""The docs agree about where things are written: every ``runs/...`` folder a page or the README
names is one a documented ``attnlab train`` command produces (its ``--out``, or the default
``runs/TASK-MODEL``), and every output path a documented command writes is ignored by git."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _text() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in PAGES}


def _train_outputs(text: str) -> set[str]:
    """The run folders the documented ``attnlab train`` lines write."""
    made = set()
    for line in re.findall(r"attnlab train [^\n`]*", text):
        out = re.search(r"--out (\S+)", line)
        if out:
            made.add(out.group(1))
        else:  # the default folder, named after the task and the model
            task = re.search(r"--task (\S+)", line)
            model = re.search(r"--model (\S+)", line)
            if task:
                made.add(f"runs/{task.group(1)}-{model.group(1) if model else 'transformer'}")
    return made


def test_every_run_folder_named_in_the_docs_is_made_by_a_documented_command():
    pages = _text()
    made = set().union(*(_train_outputs(t) for t in pages.values()))
    named = {
        (p.relative_to(ROOT).as_posix(), m)
        for p, t in pages.items()
        for m in re.findall(r"\bruns/[\w.-]*\w", t)
        if m not in ("runs/TASK-MODEL",)
    }
    assert named, "the docs name no run folder: this test lost its subject"
    orphans = sorted((page, path) for page, path in named if path not in made)
    assert not orphans, f"run folders no documented `attnlab train` writes: {orphans}"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_every_documented_output_path_is_ignored_by_git():
    outputs = set()
    for t in _text().values():
        for line in re.findall(r"attnlab [^\n`]*", t):
            outputs.update(re.findall(r"--(?:out|html|output) ([\w./-]+)", line))
    concrete = sorted(o for o in outputs if not re.fullmatch(r"[A-Z_.]+(\.html)?", o) and o != "OUT.html")
    assert {"runs/rev", "out/bottleneck", "explorer.html", "vectors.npy"} <= set(concrete)
    kept = [o for o in concrete if subprocess.run(["git", "check-ignore", "-q", o], cwd=ROOT).returncode != 0]
    assert not kept, f"documented outputs git would offer to commit (add them to .gitignore): {kept}"
