"""`attnlab embed --input --resume` against the worst an interrupted run can leave: a part whose
bytes were damaged, a manifest that is not an object, Ctrl-C (a real SIGINT to a real process),
progress after every batch. Each case asserts the exact message and that the rows equal a fresh
run's, byte for byte."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.embedding.stream import Interrupted, embed_file

N, CHUNK = 250, 50


def _write(path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    words = ["attention", "query", "key", "value", "head", "the", "a", "model", "layer", "é", "日本"]
    path.write_text(
        "".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 20))) + "\n" for _ in range(n))
    )


class _Recorder:
    """A silent progress bar that records every update and interrupts (Ctrl-C) past ``stop``."""

    def __init__(self, stop: int | None = None):
        self.updates, self.lines, self.stop = [], [], stop

    def __call__(self, total):
        self.total = total
        return self

    def update(self, n: int) -> None:
        self.updates.append(n)
        if self.stop is not None and sum(self.updates) > self.stop:
            raise KeyboardInterrupt

    def write(self, line: str) -> None:
        self.lines.append(line)

    def close(self) -> None:
        pass


@pytest.fixture
def interrupted(tiny, tmp_path):
    """A fresh run's bytes, and a run of the same file interrupted during its third part."""
    model, tokenizer = tiny
    src = tmp_path / "in.txt"
    _write(src, N)
    embed_file(model, tokenizer, str(src), str(tmp_path / "ref.npy"), chunk_size=CHUNK, progress=_Recorder())
    out = tmp_path / "out.npy"
    bar = _Recorder(stop=2 * CHUNK + 10)
    with pytest.raises(Interrupted) as info:
        embed_file(model, tokenizer, str(src), str(out), chunk_size=CHUNK, progress=bar)
    return src, out, (tmp_path / "ref.npy").read_bytes(), info.value, bar


def test_progress_comes_after_every_batch_and_an_interrupt_says_what_was_kept(interrupted):
    _, out, _, stop, bar = interrupted
    assert bar.total == N and bar.updates == [32, 18, 32, 18, 32]  # batches of 32 within parts of 50
    assert (stop.kept, stop.total, stop.parts) == (100, N, 2)
    assert str(stop) == f"interrupted: 100 of 250 sentences kept in 2 part(s) in {out}.parts"
    assert len(list((out.parent / "out.npy.parts").glob("0*.npy"))) == 2
    from_stdin = Interrupted(1_536, 3, None, out.parent / "o.npy.parts")  # stdin: no total known
    assert (
        str(from_stdin) == f"interrupted: 1,536 sentences kept in 3 part(s) in {out.parent / 'o.npy.parts'}"
    )


def test_a_damaged_part_is_embedded_again_and_said(tiny, interrupted):
    src, out, ref, _, _ = interrupted
    parts = out.parent / "out.npy.parts"
    part = next(parts.glob("000001-*.npy"))
    with open(part, "r+b") as f:  # a NaN written over row 3, column 2 of the second part
        f.seek(128 + (3 * 16 + 2) * 4)
        f.write(np.array([np.nan], dtype="<f4").tobytes())
    bar = _Recorder()
    summary = embed_file(*tiny, str(src), str(out), chunk_size=CHUNK, resume=True, progress=bar)
    assert bar.lines == [
        f"{parts}: part 1 (sentences 51-100) failed its sha256 check (damaged); embedding it again"
    ]
    assert (summary["resumed_chunks"], summary["redone_chunks"], summary["chunks"]) == (1, 1, 5)
    assert out.read_bytes() == ref and not np.isnan(np.load(out)).any()


def test_parts_without_a_manifest_are_redone_and_said(tiny, interrupted):
    src, out, ref, _, _ = interrupted
    parts = out.parent / "out.npy.parts"
    (parts / "manifest.json").unlink()
    bar = _Recorder()
    summary = embed_file(*tiny, str(src), str(out), chunk_size=CHUNK, resume=True, progress=bar)
    assert bar.lines == [f"{parts} holds 2 part(s) but no manifest.json to check them by: starting again"]
    assert summary["resumed_chunks"] == 0 and out.read_bytes() == ref


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "content,problem",
    [
        ("[1, 2]", "is damaged (holds a JSON array, not a JSON object)"),
        ("3", "is damaged (holds a JSON number, not a JSON object)"),
        ('{"a": [[{"b": null}]]}', "is damaged (no manifest version)"),
        (DEEP, "is damaged (JSON nested too deeply to read)"),
        ('{"version": 1}', "was written by another attnlab (manifest version 1, this one writes 2)"),
        ("", "is damaged (not valid JSON: Expecting value at line 1)"),
    ],
)
def test_a_manifest_that_is_not_an_object_is_one_line(tmp_path, content, problem):
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\n")
    parts = tmp_path / "o.npy.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text(content)
    args = ["embed", "--input", str(src), "--output", str(tmp_path / "o.npy"), "--resume"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: --resume: {parts / 'manifest.json'} {problem}; pass --overwrite to start again"
    ]


@pytest.mark.slow
def test_sigint_keeps_the_finished_parts_and_resume_completes_them(tiny_checkpoint, tmp_path):
    """A real `attnlab embed` subprocess and a real SIGINT: exit 130, one line saying how many
    sentences were kept in how many parts (equal to the part files left), then --resume writes the
    bytes of an uninterrupted run."""
    src = tmp_path / "in.txt"
    _write(src, 12000, seed=1)  # 120 parts: on a quiet machine 3000 sentences (0.5 s) finished first
    common = ["--model", str(tiny_checkpoint), "--input", str(src), "--chunk-size", "100", "--batch", "8"]

    def run(*args):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "ATTNLAB_PROGRESS": "plain"}
        cmd = [sys.executable, "-m", "attnlab", "embed", *common, *args]
        # SIGINT as a terminal delivers it, also where the suite runs with it ignored (nohup, a
        # background job): a Python started with SIGINT ignored never turns it into KeyboardInterrupt
        default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
        return subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=default_sigint
        )

    ref = run("--output", str(tmp_path / "ref.npy"), "--quiet")
    assert ref.wait() == 0, ref.stderr.read()
    out, parts = tmp_path / "out.npy", tmp_path / "out.npy.parts"
    victim = run("--output", str(out))
    while len(list(parts.glob("0*.npy"))) < 3:
        assert victim.poll() is None, "the run finished before it could be interrupted"
        time.sleep(0.005)
    victim.send_signal(signal.SIGINT)
    _, stderr = victim.communicate()
    assert victim.returncode == 130, stderr
    last = stderr.strip().splitlines()[-1]
    m = re.fullmatch(
        r"interrupted: ([\d,]+) of 12,000 sentences kept in (\d+) part\(s\) in (.*); "
        r"run the same command with --resume to continue into (.*)",
        last,
    )
    assert m and m.group(3) == str(parts) and m.group(4) == str(out), last
    kept, count = int(m.group(1).replace(",", "")), int(m.group(2))
    assert count >= 3 and kept == 100 * count == 100 * len(list(parts.glob("0*.npy")))
    assert not list(parts.glob(".*tmp*"))  # a part cut short leaves nothing behind
    resumed = run("--output", str(out), "--resume", "--quiet")
    _, stderr = resumed.communicate()
    assert resumed.returncode == 0, stderr
    assert out.read_bytes() == (tmp_path / "ref.npy").read_bytes()


def test_the_command_says_the_redo_and_counts_it(tiny, tiny_checkpoint, tmp_path):
    src, out = tmp_path / "in.txt", tmp_path / "out.npy"
    _write(src, N)
    kw = {"chunk_size": CHUNK, "model_name": str(tiny_checkpoint)}  # the settings the command records
    with pytest.raises(Interrupted):
        embed_file(*tiny, str(src), str(out), progress=_Recorder(stop=CHUNK + 1), **kw)
    parts = tmp_path / "out.npy.parts"
    part = next(parts.glob("000000-*.npy"))
    part.write_bytes(part.read_bytes()[:-4] + np.array([np.nan], dtype="<f4").tobytes())  # the last value
    args = ["embed", "--model", str(tiny_checkpoint), "--input", str(src), "--output", str(out)]
    result = CliRunner().invoke(cli, [*args, "--chunk-size", str(CHUNK), "--resume", "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"warning: {parts}: part 0 (sentences 1-50) failed its sha256 check (damaged); embedding it again"
    ]
    assert result.stdout.startswith(
        f"wrote 250 x 16 float32 embeddings to {out} (0 of 5 parts resumed, 1 damaged and embedded again): "
    )
    fresh = CliRunner().invoke(cli, [*args[:-1], str(tmp_path / "ref.npy"), "--chunk-size", str(CHUNK)])
    assert fresh.exit_code == 0 and out.read_bytes() == (tmp_path / "ref.npy").read_bytes()


@pytest.mark.slow
def test_a_bar_on_a_terminal_and_plain_lines_elsewhere(tiny_checkpoint, tmp_path):
    """The same command, its stderr a pseudo-terminal (a redrawn tqdm bar) and then a pipe (plain
    lines, ``embed: N/M sentences``)."""
    import fcntl
    import pty
    import struct
    import termios

    src = tmp_path / "in.txt"
    _write(src, N)
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_PROGRESS"}
    args = [sys.executable, "-m", "attnlab", "embed", "--model", str(tiny_checkpoint), "--input", str(src)]
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen([*args, "--output", str(tmp_path / "a.npy")], stderr=follower, env=env)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the follower side closed: the process ended
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait() == 0
    text = seen.decode(errors="replace")
    assert "\r" in text and "250/250" in text and "sentences/s" in text, text
    piped = subprocess.run(
        [*args, "--output", str(tmp_path / "b.npy")], capture_output=True, text=True, env=env
    )
    assert piped.returncode == 0 and "\r" not in piped.stderr
    assert re.search(r"^embed: 250/250 sentences \(100%\) ", piped.stderr, re.M), piped.stderr
