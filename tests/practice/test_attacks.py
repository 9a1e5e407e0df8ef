"""A learner's file that attacks the grader: it cannot kill it, outlive it, write outside its folder,
crash it through the reply channel, or pass without implementing anything. Each attack is a real
file graded by the real grader (``grade_attention`` or the ``attnlab`` command in a process of its
own); each test asserts the verdict and the invariant (the grader's exit status, no process left,
no file written)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from attnlab.practice import wire
from attnlab.practice.cases import attention_checks
from attnlab.practice.grade import grade_attention

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the confinement is Linux's")

N_CHECKS = {
    name: sum(c.function == name for c in attention_checks())
    for name in ("softmax", "causal_mask", "split_heads", "merge_heads")
}


def _failed(report, function: str, needle: str) -> None:
    rows = [r for r in report.results if r.function == function]
    assert rows and all(not r.passed and needle in r.message for r in rows), [r.message for r in rows]


def _worker_folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "attnlab-practice-*")))


@pytest.mark.slow
def test_signalling_the_grader_fails_the_check_and_the_grader_answers(learner_file, tmp_path):
    """Before: os.kill(os.getppid(), SIGTERM) ended `attnlab practice check` with -15 and no verdict."""
    path = learner_file(
        learner_file.overriding(
            {
                "softmax": "def softmax(x, axis=-1):\n    import os, signal\n"
                "    os.kill(os.getppid(), signal.SIGTERM)\n    return _softmax(x)"
            },
        )
    )
    r = subprocess.run(
        [sys.executable, "-m", "attnlab", "practice", "check", "attention", str(path), "--json"]
        + ["--timeout", "5", "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])
    report = json.loads(r.stdout)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert [c["function"] for c in failed] == ["softmax"] * N_CHECKS["softmax"]
    assert all(c["message"].startswith("PermissionError: [Errno 1]") for c in failed), failed
    assert report["score"] == report["total"] - N_CHECKS["softmax"]


def test_a_forked_child_does_not_outlive_the_verdict(learner_file):
    """Before: os.fork() + os.setsid() left a child running after the verdict."""
    path = learner_file(
        learner_file.overriding(
            {
                "causal_mask": "def causal_mask(t_q, t_k):\n    import os, time\n    if os.fork() == 0:\n"
                "        os.setsid()\n        time.sleep(120)\n        os._exit(0)\n"
                "    return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q)",
                "split_heads": "def split_heads(x, num_heads):\n    import subprocess\n"
                "    subprocess.Popen(['sleep', '120'], start_new_session=True)\n"
                "    b, t, d = x.shape\n"
                "    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)",
            },
        )
    )
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "causal_mask", "PermissionError: [Errno 1] Operation not permitted")
    _failed(report, "split_heads", "PermissionError: [Errno 1] Operation not permitted")
    assert report.score == report.total - N_CHECKS["causal_mask"] - N_CHECKS["split_heads"]
    assert learner_file.workers_of(path) == []  # the worker's group was killed; nothing else was ever started


def test_writes_outside_the_working_folder_are_refused(learner_file, tmp_path):
    """Before: the learner's code could write anywhere the user can; now only in its own folder,
    at most 64 MiB a file, and that folder is deleted with the worker."""
    outside = tmp_path / "escaped.txt"
    path = learner_file(
        learner_file.overriding(
            {
                "softmax": f"def softmax(x, axis=-1):\n    open({str(outside)!r}, 'w').write('x')\n"
                "    return _softmax(x)",
                "split_heads": "def split_heads(x, num_heads):\n    np.save('scratch.npy', x)\n"
                "    x = np.load('scratch.npy')\n    b, t, d = x.shape\n"
                "    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)",
                "merge_heads": "def merge_heads(x):\n    with open('big.bin', 'wb') as f:\n"
                "        f.write(bytes(65 << 20))\n    return x",
            },
        )
    )
    before = _worker_folders()
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "softmax", f"PermissionError: [Errno 13] Permission denied: '{outside}'")
    _failed(report, "merge_heads", "OSError: [Errno 27] File too large")
    assert all(r.passed for r in report.results if r.function == "split_heads")  # its own folder works
    assert not outside.exists()
    assert _worker_folders() <= before  # each worker's folder went with it
    assert sorted(os.listdir(tmp_path)) == ["attention.py"]


# each forgery is written straight to the worker's reply pipe, reached from the caller's frame
FORGERIES = {
    "softmax": "struct.pack('<Q', 2**62)",  # announces 4 EiB
    "causal_mask": "struct.pack('<Q', 14) + b'PK\\x03\\x04not a zip'",  # a corrupt archive
    "split_heads": "_message({'status': 'ok'})",  # the count and the results missing
    "merge_heads": "_message({'status': 'ok', 'n': -1, 'r0': {'dtype': '<f8', 'shape': [2**40]}})",
}
FORGING = """
import json
import struct
import sys


def _message(header):
    head = json.dumps(header).encode()
    body = struct.pack('<I', len(head)) + head
    return struct.pack('<Q', len(body)) + body


def _forge(data):
    out = sys._getframe(2).f_locals['out']  # the worker's duplicate of its stdout
    out.write(data)
    out.flush()
"""


def test_forged_replies_fail_their_check_with_one_line(learner_file):
    """Before: MemoryError, BadZipFile and KeyError tracebacks out of the grader."""
    bodies = {
        name: f"def {name}(*args, **kwargs):\n    _forge({forgery})\n    return args[0]"
        for name, forgery in FORGERIES.items()
    }
    path = learner_file(learner_file.overriding(bodies, FORGING))
    report = grade_attention(str(path), timeout_s=5.0)
    reasons = {
        "softmax": "a message of 4611686018427387904 bytes (the limit is 64 MiB)",
        "causal_mask": "a header of",
        "split_heads": "a result count of None",
        "merge_heads": "field 'r0' announces 8796093022208 bytes",
    }
    for name, reason in reasons.items():
        _failed(report, name, f"sent a malformed reply ({reason}")
    assert report.score == report.total - sum(N_CHECKS.values())  # the worker is replaced after each


def test_any_bytes_decode_to_fields_or_one_wire_error():
    """The reply parser on 3000 corruptions of a real reply: a dict or WireError, never another
    exception, and never more memory than the bytes it was given."""
    rng = np.random.default_rng(0)
    good = wire.encode(wire.pack_result((np.ones((2, 3)), np.eye(3, dtype=bool))))[wire.HEADER.size :]
    outcomes = {"fields": 0, "WireError": 0}
    for _ in range(3000):
        data = bytearray(good)
        for i in rng.integers(0, len(data), size=rng.integers(1, 4)):
            data[i] = rng.integers(0, 256)
        data = bytes(data[: rng.integers(len(data) // 2, len(data) + 1)])
        try:
            fields = wire.decode(data)
            wire.unpack_reply(fields)
            outcomes["fields"] += 1
        except wire.WireError:
            outcomes["WireError"] += 1
    assert sum(outcomes.values()) == 3000 and outcomes["WireError"] > 2000, outcomes


def test_delegating_to_attnlab_or_torch_is_reported_not_passed(learner_file):
    """Before: Baseline from attnlab.practice.mistakes, the expected values of attnlab.practice.cases
    or torch's SDPA passed every check."""
    path = learner_file(
        learner_file.overriding(
            {
                "softmax": "def softmax(x, axis=-1):\n    from attnlab.practice.mistakes import Baseline\n"
                "    return Baseline().softmax(x, axis)",
                "causal_mask": "def causal_mask(t_q, t_k):\n"
                "    from attnlab.practice.cases import attention_checks\n"
                "    return next(c.expected for c in attention_checks() if c.args == (t_q, t_k))",
                "split_heads": "def split_heads(x, num_heads):\n    import torch\n"
                "    return torch.from_numpy(x).unflatten(-1, (num_heads, -1)).transpose(1, 2).numpy()",
                "merge_heads": "def merge_heads(x):\n    import sys\n"
                "    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_Refuse']\n"
                "    from attnlab.practice.mistakes import Baseline  # without the hook: the kernel refuses\n"
                "    return Baseline().merge_heads(x)",
            },
        )
    )
    report = grade_attention(str(path), timeout_s=5.0)
    refused = "cannot be imported by your file: the exercise is NumPy only"
    _failed(report, "softmax", f"ImportError: attnlab {refused}")
    _failed(report, "causal_mask", f"ImportError: attnlab {refused}")
    _failed(report, "split_heads", f"ImportError: torch {refused}")
    _failed(report, "merge_heads", "PermissionError: [Errno 13] Permission denied")
    assert report.score == report.total - sum(N_CHECKS.values())


def test_complex_and_integer_answers_fail_with_their_dtype(learner_file):
    """Before: a complex softmax and a 0/1 int mask were compared after a cast and passed."""
    path = learner_file(
        learner_file.overriding(
            {
                "softmax": "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n"
                "    return (e / e.sum(axis, keepdims=True)).astype(complex)",
                "causal_mask": "def causal_mask(t_q, t_k):\n"
                "    return np.tril(np.ones((t_q, t_k), dtype=np.int64), k=t_k - t_q)",
            },
        )
    )
    report = grade_attention(str(path), timeout_s=5.0)
    _failed(report, "softmax", "the result is complex128, expected real floating-point numbers")
    _failed(report, "causal_mask", "the result is int64, expected a bool mask (True = may attend)")
    assert report.score == report.total - N_CHECKS["softmax"] - N_CHECKS["causal_mask"]


def test_the_memory_limit_cannot_be_raised(learner_file):
    """Before: setrlimit(RLIMIT_AS, unlimited) then 2 GiB touched passed under --memory-mb 256."""
    path = learner_file(
        learner_file.overriding(
            {
                "split_heads": "def split_heads(x, num_heads):\n    import resource\n"
                "    inf = resource.RLIM_INFINITY\n    try:\n"
                "        resource.setrlimit(resource.RLIMIT_AS, (inf, inf))\n"
                "    except (ValueError, OSError):\n        pass\n"
                "    big = np.ones(2**28)  # 2 GiB, every page written\n"
                "    b, t, d = x.shape\n"
                "    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3) + big[0] - 1",
            },
        )
    )
    report = grade_attention(str(path), timeout_s=5.0, memory_mb=256)
    _failed(report, "split_heads", "MemoryError: Unable to allocate 2.00 GiB")
    assert report.score == report.total - N_CHECKS["split_heads"]


def test_a_worker_that_closes_its_reply_channel_gets_a_verdict_in_time(learner_file):
    """Before: the grader waited forever on a worker that closed its pipe and kept running."""
    path = learner_file(
        learner_file.overriding(
            {
                "merge_heads": "def merge_heads(x):\n    import os\n"
                "    os.close(sys._getframe(1).f_locals['out'].fileno())\n    while True:\n        pass"
            },
            FORGING,
        )
    )
    report = grade_attention(str(path), timeout_s=1.0)
    _failed(report, "merge_heads", "closed its channel to the grader without ending; stopped")
    assert report.score == report.total - N_CHECKS["merge_heads"]
    assert learner_file.workers_of(path) == []
