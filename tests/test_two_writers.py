"""Two writers, one folder, as two real processes: a second ``attnlab experiment ... --out D`` is
refused at the start naming the first's pid, and a lock left by a killed process is taken over;
``attnlab embed --output`` keeps a second writer out the same way (its lock is the kernel's, so a
killed holder releases it)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from attnlab.training.rundir import LOCK

pytestmark = pytest.mark.slow


def _attnlab(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "attnlab", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


def _wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    """Poll ``condition()`` while ``proc`` runs (no time bound: a process that ends first fails)."""
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the first writer ended before {what}: {proc.communicate()}")
        time.sleep(0.05)


def _lock_pid(folder) -> int | None:
    try:
        return json.loads((folder / LOCK).read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def test_a_second_experiment_is_refused_and_a_killed_ones_lock_is_taken_over(tmp_path):
    out = tmp_path / "recall"
    args = ["experiment", "recall", "--quick", "--quiet", "--out", str(out)]
    first = _attnlab(*args, "--steps", "100000")  # runs until killed
    try:
        _wait_for(lambda: _lock_pid(out) == first.pid, first, "taking its lock")
        second = _attnlab(*args, "--steps", "1")
        stdout, stderr = second.communicate()
        assert second.returncode == 2, stderr
        assert stderr.strip().splitlines() == [
            f"Error: another attnlab process (pid {first.pid}) is writing the experiment in {out}; "
            "wait for it or stop it (a lock left by a killed process is taken over)"
        ]
        assert first.poll() is None  # the first writer was not disturbed
    finally:
        first.kill()
        first.communicate()
    assert _lock_pid(out) == first.pid  # SIGKILL: the lock is left behind, its holder gone
    third = _attnlab(*args, "--steps", "100000")
    try:
        _wait_for(lambda: _lock_pid(out) == third.pid, third, "taking over the stale lock")
    finally:
        third.send_signal(signal.SIGKILL)
        third.communicate()


def test_a_second_embed_writer_is_refused_while_the_first_runs(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("".join(f"sentence number {i} of a long file\n" for i in range(50_000)))
    output = tmp_path / "out.npy"
    args = ["embed", "--input", str(source), "--output", str(output), "--quiet"]
    first = _attnlab(*args)
    parts = tmp_path / "out.npy.parts"
    try:
        _wait_for(lambda: (parts / "manifest.json").is_file(), first, "writing its manifest (under its lock)")
        assert (parts / "lock").read_text() == f"{first.pid}\n"
        for extra in ((), ("--resume",), ("--overwrite",)):  # the same command, or one that continues
            second = _attnlab(*args, *extra)
            _, stderr = second.communicate()
            assert second.returncode == 2, stderr
            assert stderr.strip().splitlines() == [
                f"Error: another attnlab embed (pid {first.pid}) is writing --output {output}; wait for it "
                "or stop it (a lock left by a killed run is released with it)"
            ]
        assert first.poll() is None
    finally:
        first.kill()
        first.communicate()
    fd = os.open(parts / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again: the kernel released the killed holder's
    finally:
        os.close(fd)
    assert (parts / "lock").read_text() == f"{first.pid}\n"  # a dead pid left behind: not in the way
    assert not output.exists()
    refused = _attnlab(*args)  # no live writer: now it is an interrupted run
    _, stderr = refused.communicate()
    assert refused.returncode == 2 and "holds an interrupted run; pass --resume" in stderr, stderr
