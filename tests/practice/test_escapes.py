"""Learner files that reach past the worker by the kernel's side doors: a file whose I/O signals the
grader (fcntl/ioctl owner), changes to another file's mode, owner, times or extended attributes, a
worker that would outlive a grader ended from outside, and a file that never finishes importing.
Each is a real file graded by the real grader; each test asserts the verdict and the invariant (the
grader's exit status, the outside file unchanged, no process left, the time the verdict took)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from attnlab.practice.cases import attention_checks
from attnlab.practice.grade import grade_attention
from attnlab.practice.sandbox import IMPORT_TIMEOUT_S, Sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the confinement is Linux's")

REPLACED = ("softmax", "causal_mask", "split_heads", "merge_heads")
N_CHECKS = {f: sum(c.function == f for c in attention_checks()) for f in REPLACED}
EPERM = "PermissionError: [Errno 1] Operation not permitted"


def _failed(report, function: str, needle: str) -> None:
    rows = [r for r in report.results if r.function == function]
    assert rows and all(not r.passed and needle in r.message for r in rows), [r.message for r in rows]


def _check(path, tmp_path, *options: str) -> subprocess.Popen:
    """``attnlab practice check attention PATH --json`` in a process of its own (the grader)."""
    return subprocess.Popen(
        [sys.executable, "-m", "attnlab", "practice", "check", "attention", str(path), "--json"]
        + ["--data-dir", str(tmp_path / "data"), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


# each body points a file's I/O signal at the grader (its parent), then makes the file signal
SIGNAL_OWNERS = {
    "softmax": "def softmax(x, axis=-1):\n    import fcntl, os, signal\n    r, w = os.pipe()\n"
    "    fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())\n    fcntl.fcntl(r, 10, signal.SIGTERM)  # F_SETSIG\n"
    "    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)\n"
    "    os.write(w, b'x')\n    return _softmax(x)",
    "causal_mask": "def causal_mask(t_q, t_k):\n    import fcntl, os, struct\n    r, w = os.pipe()\n"
    "    fcntl.fcntl(r, 15, struct.pack('ii', 1, os.getppid()))  # F_SETOWN_EX, F_OWNER_PID\n"
    "    fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)\n    os.write(w, b'x')\n"
    "    return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q)",
    "split_heads": "def split_heads(x, num_heads):\n    import fcntl, os, socket, struct\n"
    "    a, b = socket.socketpair()\n"
    "    fcntl.ioctl(a, 0x8901, struct.pack('i', os.getppid()))  # FIOSETOWN: SIGIO ends the grader\n"
    "    fcntl.ioctl(a, 0x5452, struct.pack('i', 1))  # FIOASYNC\n    b.send(b'x')\n"
    "    return _split(x, num_heads)",
    "merge_heads": "def merge_heads(x):\n    import fcntl, os, signal\n    r, w = os.pipe()\n"
    "    fcntl.fcntl(r, 10, signal.SIGTERM)  # F_SETSIG alone\n    return _merge(x)",
    # fcntl and ioctl otherwise work: this check passes
    "multi_head_attention": "_mha = multi_head_attention\n\n\ndef multi_head_attention(*args, **kwargs):\n"
    "    import fcntl, os, termios\n    r, w = os.pipe()\n"
    "    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
    "    os.write(w, b'xy')\n"
    "    assert fcntl.ioctl(r, termios.FIONREAD, b'    ') == (2).to_bytes(4, 'little')\n"
    "    return _mha(*args, **kwargs)",
}


@pytest.mark.slow
def test_a_file_whose_io_signals_the_grader_is_refused(learner_file, tmp_path):
    """Before: F_SETOWN to the grader + F_SETSIG SIGTERM + O_ASYNC ended `attnlab practice check`
    with 143 and no verdict (FIOSETOWN on a socket would with SIGIO)."""
    path = learner_file(learner_file.overriding(SIGNAL_OWNERS))
    grader = _check(path, tmp_path, "--timeout", "5")
    out, err = grader.communicate(timeout=300)
    assert grader.returncode == 1, (grader.returncode, err[-500:])
    report = json.loads(out)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert {c["function"] for c in failed} == set(N_CHECKS), failed
    assert all(c["message"].startswith(EPERM) for c in failed), failed
    assert report["score"] == report["total"] - sum(N_CHECKS.values())


def _attributes(path) -> tuple:
    st = os.stat(path)
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_atime_ns, sorted(os.listxattr(path))


def test_attributes_of_a_file_outside_the_folder_cannot_be_changed(learner_file, tmp_path):
    """Before: os.chmod(outside, 0o777) changed the file and the file still scored 23/23 (Landlock's
    write rule covers no attribute); chown, utime and setxattr likewise."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    os.chmod(outside, 0o640)
    os.utime(outside, ns=(10**18, 10**18))
    before = _attributes(outside)
    path = learner_file(
        learner_file.overriding(
            {
                "softmax": f"def softmax(x, axis=-1):\n    import os\n    os.chmod({str(outside)!r}, 0o777)\n"
                "    return _softmax(x)",
                "causal_mask": f"def causal_mask(t_q, t_k):\n    import os\n"
                f"    os.chown({str(outside)!r}, os.getuid(), os.getgid())\n"
                "    return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q)",
                "split_heads": "def split_heads(x, num_heads):\n    import os\n"
                f"    os.utime({str(outside)!r}, (0, 0))\n"
                "    return _split(x, num_heads)",
                "merge_heads": f"def merge_heads(x):\n    import os\n"
                f"    os.setxattr({str(outside)!r}, 'user.attnlab', b'1')\n    return _merge(x)",
            }
        )
    )
    report = grade_attention(str(path), timeout_s=5.0)
    for name in N_CHECKS:
        _failed(report, name, EPERM if name == "split_heads" else f"{EPERM}: '{outside}'")  # utime: no name
    assert report.score == report.total - sum(N_CHECKS.values())
    assert _attributes(outside) == before


def test_attribute_changes_by_descriptor_or_newer_calls_are_refused_too(learner_file, tmp_path):
    """The same changes through a descriptor opened for reading (which Landlock allows), through
    fchmodat2 called directly, and inside the worker's own folder: refused (seccomp sees no path)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    os.chmod(outside, 0o640)
    before = _attributes(outside)
    path = learner_file(
        learner_file.overriding(
            {
                "softmax": "def softmax(x, axis=-1):\n    import os\n"
                f"    fd = os.open({str(outside)!r}, os.O_RDONLY)\n"
                "    os.chmod(fd, 0o777)\n    return _softmax(x)",
                "causal_mask": "def causal_mask(t_q, t_k):\n    import ctypes, os\n"
                "    libc = ctypes.CDLL(None, use_errno=True)\n"
                f"    if libc.syscall(452, -100, {str(outside).encode()!r}, 0o777, 0) != 0:  # fchmodat2\n"
                "        raise OSError(ctypes.get_errno(), 'fchmodat2')\n"
                "    return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q)",
                "split_heads": "def split_heads(x, num_heads):\n    import os\n"
                f"    fd = os.open({str(outside)!r}, os.O_RDONLY)\n"
                "    os.setxattr(fd, 'user.attnlab', b'1')\n    return _split(x, num_heads)",
                "merge_heads": "def merge_heads(x):\n    import os\n    open('mine.txt', 'w').close()\n"
                "    os.chmod('mine.txt', 0o600)\n    return _merge(x)",
            }
        )
    )
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "softmax", EPERM)
    _failed(report, "causal_mask", "PermissionError: [Errno 1] fchmodat2")
    _failed(report, "split_heads", EPERM)
    _failed(report, "merge_heads", f"{EPERM}: 'mine.txt'")
    assert report.score == report.total - sum(N_CHECKS.values())
    assert _attributes(outside) == before


def _worker_folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "attnlab-practice-*")))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_worker_does_not_outlive_a_grader_ended_from_outside(learner_file, tmp_path, sig):
    """Before: SIGTERM to `attnlab practice check` left the worker spinning in the learner's
    causal_mask, its parent 1. The file also tries to clear its parent-death signal first. SIGTERM
    exits 143 and removes the worker's folder; SIGKILL cannot be caught, the kernel ends the worker."""
    folders = _worker_folders()
    path = learner_file(
        learner_file.overriding(
            {
                "causal_mask": "def causal_mask(t_q, t_k):\n    import ctypes\n"
                "    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none\n"
                "    while True:\n        pass"
            }
        )
    )
    grader = _check(path, tmp_path, "--timeout", "120")
    try:
        deadline = time.monotonic() + 120
        while len(learner_file.workers_of(path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the grader and its worker both name the file
        workers = [p for p in learner_file.workers_of(path) if p != grader.pid]
        assert len(workers) == 1, workers
        time.sleep(1.0)  # past the import, into causal_mask (the 5th check)
        grader.send_signal(sig)
        assert grader.wait(timeout=30) == (128 + sig if sig == signal.SIGTERM else -sig)
        deadline = time.monotonic() + 5
        while learner_file.workers_of(path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert learner_file.workers_of(path) == []
        if sig == signal.SIGTERM:
            assert _worker_folders() <= folders
    finally:
        grader.kill()
        grader.communicate()
        for pid in learner_file.workers_of(path):
            os.kill(pid, signal.SIGKILL)  # this test's own worker, should the assertion fail


def test_a_file_that_sleeps_at_import_gets_its_verdict_naming_the_limit(learner_file):
    """Before: the import had 20 s (Python, NumPy and the file together) and the verdict said
    'did not finish within 20 s (an infinite loop?)'."""
    path = learner_file("import time\ntime.sleep(600)\n" + learner_file.CORRECT)
    start = time.monotonic()
    report = grade_attention(str(path), timeout_s=1.0)
    took = time.monotonic() - start
    assert took < 15, took  # the import limit (5 s) after Python and NumPy start
    limit = f"your file did not finish importing in {IMPORT_TIMEOUT_S:g} s"
    assert IMPORT_TIMEOUT_S == 5
    assert report.score == 0 and all(r.message.startswith(limit) for r in report.results)


OTHER_DOORS = """import ctypes
import fcntl
import os
import socket
import struct

import numpy as np

libc = ctypes.CDLL(None, use_errno=True)


def io_uring():
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    return np.array([libc.syscall(425, 8, params), ctypes.get_errno()])


def chattr(path):
    fd = os.open(path, os.O_RDONLY)
    return fcntl.ioctl(fd, 0x40086602, struct.pack("l", 0x80))  # FS_IOC_SETFLAGS: noatime


def process_group_owner():
    a, _ = socket.socketpair()
    return fcntl.ioctl(a, 0x8902, struct.pack("i", os.getppid()))  # SIOCSPGRP


def death_signal():
    return np.array([libc.prctl(1, 0, 0, 0, 0), ctypes.get_errno()])  # PR_SET_PDEATHSIG: none
"""


def test_io_uring_chattr_a_socket_owner_and_the_death_signal_are_refused(learner_file, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    with Sandbox(str(learner_file(OTHER_DOORS))) as box:
        assert box.call("io_uring").value.tolist() == [-1, 1]  # EPERM: no ring to bypass the filter
        assert box.call("chattr", str(outside)).error.startswith(EPERM)
        assert box.call("process_group_owner").error.startswith(EPERM)
        assert box.call("death_signal").value.tolist() == [-1, 1]
        assert box.restarts == 0 and "seccomp" in box.confined
