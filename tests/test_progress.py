"""Progress suits where it goes: plain lines at a bounded rate when the output is not a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from attnlab.progress import PlainProgress, progress_mode


def test_mode_follows_the_stream_and_quiet(monkeypatch):
    monkeypatch.delenv("ATTNLAB_PROGRESS", raising=False)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert progress_mode(Tty()) == "bar"
    assert progress_mode(io.StringIO()) == "plain"
    assert progress_mode(Tty(), quiet=True) == "off"
    monkeypatch.setenv("ATTNLAB_PROGRESS", "off")
    assert progress_mode(Tty()) == "off"


def test_plain_progress_prints_at_most_one_line_per_interval_and_one_at_the_end():
    out = io.StringIO()
    p = PlainProgress(total=1000, desc="train", unit="step", every_s=3600, stream=out)
    for _ in range(1000):
        p.update(1)
    p.close()
    p.close()  # closing twice prints nothing more
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("train: 1000/1000 step (100%)")

    out = io.StringIO()
    p = PlainProgress(range(7), desc="x", every_s=0.0, stream=out)
    assert list(p) == list(range(7))
    assert len(out.getvalue().splitlines()) == 7 + 1  # every update (interval 0) and the end


def test_train_into_a_file_writes_a_short_log_and_the_final_line_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_PROGRESS"}
    cmd = [
        sys.executable,
        "-m",
        "attnlab.cli",
        "train",
        "--task",
        "dates",
        "--model",
        "gpt",
        "--steps",
        "300",
        "--d-model",
        "16",
        "--heads",
        "2",
        "--layers",
        "1",
        "--eval-every",
        "100",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 20, lines  # a redrawn bar wrote one line per step (300+) into files
    finals = [ln for ln in lines if "step 300" in ln]
    assert len(finals) == 1, lines
    assert "runs/dates-gpt/latest.json (no --out given" in proc.stdout  # it says where the model is
    assert (tmp_path / "runs" / "dates-gpt" / "latest.json").exists()
    again = subprocess.run(cmd[:-2] + ["--steps", "2"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "runs" / "dates-gpt-2" / "latest.json").exists()  # never onto the first run
