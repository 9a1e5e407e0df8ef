"""Streaming a file through `attnlab embed --input ... --output ...`: order kept, both output
formats, resume after a real SIGKILL giving the identical file, bounded memory, and bad input."""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.embedding.stream import assemble, embed_file, read_sentences
from attnlab.models import embed
from attnlab.progress import progress


def _lines(n: int, seed: int = 0, lo: int = 3, hi: int = 20) -> list[str]:
    rng = random.Random(seed)
    words = ["attention", "query", "key", "value", "head", "the", "a", "model", "layer", "token", "é", "日本"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def test_rows_follow_the_input_in_both_formats(tiny, tmp_path):
    model, tokenizer = tiny
    texts = _lines(250) + ["", "x " * 400]  # an empty line and one past 256 tokens
    src = tmp_path / "in.txt"
    src.write_text("\n".join(texts) + "\n", encoding="utf-8")
    expected = embed(model, tokenizer, texts).numpy()  # [N, 16], all at once in memory
    summary = embed_file(
        model, tokenizer, str(src), str(tmp_path / "out.npy"), chunk_size=64, progress=_silent
    )
    got = np.load(tmp_path / "out.npy")
    assert got.shape == (252, 16) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert (summary["sentences"], summary["chunks"], summary["empty"], summary["truncated"]) == (252, 4, 1, 1)
    assert not (tmp_path / "out.npy.parts").exists()
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(texts)))
    embed_file(
        model,
        tokenizer,
        str(jsonl),
        str(tmp_path / "o.safetensors"),
        fmt="jsonl",
        field="body",
        chunk_size=100,
        progress=_silent,
    )
    from safetensors.numpy import load_file

    np.testing.assert_allclose(load_file(tmp_path / "o.safetensors")["embeddings"], got, rtol=0, atol=1e-6)


def _silent(total):
    return progress(total=total, quiet=True)


@pytest.mark.slow
def test_memory_does_not_grow_with_the_file(tiny, tmp_path):
    """Python-side peak (tracemalloc: lists, strings, NumPy buffers) for 8,000 lines stays within
    1.2x of 1,000 lines: only one chunk is ever held (benchmarks/ measures real RSS at 100k vs 10k)."""
    model, tokenizer = tiny
    peaks, threads = {}, torch.get_num_threads()
    torch.set_num_threads(1)  # a 16-wide model: threads only add scheduling latency
    for n in (1000, 8000):
        src = tmp_path / f"in{n}.txt"
        src.write_text("\n".join(_lines(n, seed=n)) + "\n")
        tracemalloc.start()
        embed_file(model, tokenizer, str(src), str(tmp_path / f"o{n}.npy"), chunk_size=250, progress=_silent)
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert np.load(tmp_path / f"o{n}.npy", mmap_mode="r").shape == (n, 16)
    torch.set_num_threads(threads)
    assert peaks[8000] <= 1.2 * peaks[1000], peaks


def _run(*args):
    """`attnlab embed ARGS` in a subprocess, one thread (tiny ops; and the same thread count every run)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "attnlab", "embed", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_resume_after_sigkill_writes_the_identical_file(tiny_checkpoint, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(_lines(3000, seed=3, hi=30)) + "\n")
    common = [
        "--model",
        str(tiny_checkpoint),
        "--input",
        str(src),
        "--chunk-size",
        "10",
        "--batch",
        "8",
        "--quiet",
    ]
    ref = _run(*common, "--output", str(tmp_path / "ref.npy"))
    assert ref.wait() == 0, ref.stderr.read()
    out, parts = tmp_path / "out.npy", tmp_path / "out.npy.parts"
    victim = _run(*common, "--output", str(out))
    while len(list(parts.glob("0*.npy"))) < 3:  # three chunks finished and renamed into place
        assert victim.poll() is None, "the run finished before it could be killed"
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert not out.exists() and parts.is_dir()
    refused = _run(*common, "--output", str(out))
    assert refused.wait() == 2 and "pass --resume" in refused.stderr.read()
    resumed = _run(*common, "--output", str(out), "--resume", "--json")
    assert resumed.wait() == 0, resumed.stderr.read()
    summary = json.loads(resumed.stdout.read())
    assert summary["resumed_chunks"] >= 3 and summary["chunks"] == 300 and summary["sentences"] == 3000
    assert out.read_bytes() == (tmp_path / "ref.npy").read_bytes()
    assert not parts.exists()


def _error(args):
    result = CliRunner().invoke(cli, ["embed", *args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_bad_inputs_exit_2_with_one_line_and_no_output(tmp_path):
    out = str(tmp_path / "o.npy")
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"ok\n\x00\x01\x02\n")
    assert re.search(r"\bb\.bin line 2\b.*\bNUL\b", _error(["--input", str(binary), "--output", out]))
    bad = tmp_path / "bad.txt"
    bad.write_bytes("fine\nstill fine\ncaf\xe9\n".encode("latin-1"))
    assert _error(["--input", str(bad), "--output", out]).endswith(
        "line 3 is not valid UTF-8 (byte 0xe9 at column 4)"
    )
    jl = tmp_path / "in.jsonl"
    jl.write_text('{"text": "a"}\n{"body": "b"}\n')
    as_jsonl = ["--format", "jsonl", "--output", out]
    assert re.search(r"\bin\.jsonl line 2\b.*'text'", _error(["--input", str(jl), *as_jsonl]))
    assert re.search(r"\bbad\.txt line 1\b.*\bJSON\b", _error(["--input", str(bad), *as_jsonl]))
    jl.write_text('{"text": "a"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")  # a RecursionError before
    assert _error(["--input", str(jl), "--format", "jsonl", "--output", out]).endswith(
        "line 2 is JSON nested too deeply to read"
    )
    good = tmp_path / "good.txt"
    good.write_text("hello\n")
    assert "folder" in _error(["--input", str(good), "--output", str(tmp_path / "no" / "o.npy")])
    wrong_suffix = _error(["--input", str(good), "--output", str(tmp_path / "o.txt")])
    assert wrong_suffix.startswith("Error: --output ") and "o.txt'" in wrong_suffix
    assert ".npy" in wrong_suffix and ".safetensors" in wrong_suffix
    assert "does not exist" in _error(["--input", str(tmp_path / "nope.txt"), "--output", out])
    assert "is a directory" in _error(["--input", str(tmp_path), "--output", out])
    assert "--input needs --output" in _error(["--input", str(good)])
    assert not (tmp_path / "o.npy").exists()
    (tmp_path / "o.npy").write_bytes(b"keep")
    assert "already exists; pass --overwrite" in _error(["--input", str(good), "--output", out])
    assert (tmp_path / "o.npy").read_bytes() == b"keep"


def test_a_second_writer_is_refused_while_the_lock_is_held(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("hello\n")
    parts = tmp_path / "o.npy.parts"
    parts.mkdir()
    fd = os.open(parts / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        msg = _error(["--input", str(good), "--output", str(tmp_path / "o.npy"), "--resume"])
    finally:
        os.close(fd)
    assert f"--output {tmp_path / 'o.npy'}" in msg and "attnlab embed" in msg  # who holds it, and what
    assert not (tmp_path / "o.npy").exists()


def test_reader_keeps_empty_lines_and_strips_line_endings(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"\xef\xbb\xbfone\r\n\ntwo")
    assert list(read_sentences(str(src))) == ["one", "", "two"]


def test_assemble_checks_its_chunks(tmp_path):
    a = tmp_path / "a.npy"
    np.save(a, np.zeros((2, 3), dtype=np.float64))
    with pytest.raises(ValueError, match=r"\ba\.npy\b.*\bfloat64 \[2, 3\].*\bfloat32 \[k, 3\]"):
        assemble([a], tmp_path / "o.npy", 3)
    assert not (tmp_path / "o.npy").exists()


def test_a_line_is_bounded_so_an_input_without_line_ends_is_one_line_error(tmp_path):
    """``--input /dev/zero`` (or gigabytes with no line end) was a MemoryError while reading line 1."""
    import io

    from attnlab.tasks.text_source import MAX_LINE_BYTES, read_lines

    lines = list(read_lines(io.BytesIO(b"12345678\r\n1234567\n12345678"), "in", limit=8))
    assert lines == [(1, b"12345678"), (2, b"1234567"), (3, b"12345678")]  # exactly the limit is kept
    with pytest.raises(ValueError, match=r"^in line 2\b.*\b8 bytes\b"):
        list(read_lines(io.BytesIO(b"ok\n123456789\n"), "in", limit=8))
    out = str(tmp_path / "o.npy")
    assert _error(["--input", "/dev/zero", "--output", out]).endswith(
        "/dev/zero line 1 holds a NUL byte: a binary file, not text"
    )
    long = tmp_path / "long.txt"
    long.write_bytes(b"a short line\n" + b"x" * (MAX_LINE_BYTES + 1))
    assert _error(["--input", str(long), "--output", out]).endswith(
        f"line 2 is longer than {MAX_LINE_BYTES:,} bytes, the most one line may hold"
    )
    assert not (tmp_path / "o.npy").exists()
