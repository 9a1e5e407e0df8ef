"""Hostile or broken learner code is contained: an infinite loop, os._exit, sys.exit, a segfault, a
huge allocation, prints on stdout or an exception fail only the checks that run it, and the other
checks still report (the worker is restarted after each)."""

from __future__ import annotations

import pytest

from attnlab.practice.cases import attention_checks
from attnlab.practice.grade import grade_attention
from attnlab.practice.sandbox import Sandbox

# each hostile body replaces one function of the correct solution; its checks must fail this way
HOSTILE = {
    "softmax": ("while True:\n        pass", "did not finish within"),
    "causal_mask": ("import os\n    os._exit(3)", "exited with status 3"),
    "split_heads": ("return np.ones((10**6, 10**6))", "MemoryError"),
    "merge_heads": ("import sys\n    sys.exit(0)", "called sys.exit(0)"),
    "multi_head_attention": ("import ctypes\n    return ctypes.string_at(0)", "segmentation fault"),
}


def _with_bodies(correct: str, bodies: dict[str, str]) -> str:
    """The correct solution with the named functions' bodies replaced (helpers kept for the others)."""
    text = correct.replace(
        "softmax(scores, axis=-1)", "_softmax(scores)"
    )  # attention keeps a working softmax
    text += "\n\ndef _softmax(x):\n    e = np.exp(x - x.max(-1, keepdims=True))\n"
    text += "    return e / e.sum(-1, keepdims=True)\n"
    text = text.replace("merge_heads(heads) @ W_o", "_merge(heads) @ W_o")
    text += "\n\ndef _merge(x):\n    b, h, t, dk = x.shape\n"
    text += "    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dk)\n"
    for name, body in bodies.items():
        head = f"def {name}("
        start = text.index(head)
        end = text.index("\n\n\n", start) if "\n\n\n" in text[start:] else len(text)
        signature = text[start : text.index(":\n", start) + 2]
        text = text[:start] + signature + "    " + body + "\n" + text[end:]
    return text


@pytest.mark.slow
def test_hostile_functions_fail_only_their_own_checks(learner_file):
    path = learner_file(_with_bodies(learner_file.CORRECT, {k: v[0] for k, v in HOSTILE.items()}))
    report = grade_attention(str(path), timeout_s=1.0, memory_mb=512)
    by_function: dict[str, list] = {}
    for r in report.results:
        by_function.setdefault(r.function, []).append(r)
    for name, (_, reason) in HOSTILE.items():
        assert by_function[name] and all(not r.passed for r in by_function[name]), name
        assert all(reason in r.message for r in by_function[name]), (
            name,
            [r.message for r in by_function[name]],
        )
    sdpa = by_function["scaled_dot_product_attention"]
    assert sdpa and all(r.passed for r in sdpa), [r.message for r in sdpa if not r.passed]
    assert report.total == len(attention_checks())


def test_prints_and_exceptions_do_not_break_the_protocol(learner_file):
    text = learner_file.CORRECT.replace(
        "def softmax(x, axis=-1):\n", "def softmax(x, axis=-1):\n    print('x' * 100000)\n"
    ).replace("def merge_heads(x):\n", "def merge_heads(x):\n    raise KeyError('oops')\n")
    with Sandbox(str(learner_file(text))) as box:
        out = box.call("softmax", __import__("numpy").array([2.0, 0.0]))
        assert out.error is None and abs(out.value[0] - 0.8808) < 1e-4
        err = box.call("merge_heads", __import__("numpy").zeros((1, 2, 1, 2)))
        assert err.error.startswith("KeyError: 'oops'") and "line" in err.error
        bad = box.call("causal_mask", 2, 2)
        assert bad.error is None and bad.value.dtype == bool
        assert box.restarts == 0


def test_returning_objects_and_import_time_loops_are_reported(learner_file, tmp_path):
    text = learner_file.CORRECT + "\n\ndef causal_mask(t_q, t_k):\n    return 'lower right'\n"
    with Sandbox(str(learner_file(text))) as box:
        assert "not an array of numbers" in box.call("causal_mask", 2, 2).error
    looping = learner_file(
        "import time\nwhile True:\n    time.sleep(0.01)\n" + learner_file.CORRECT, name="loop.py"
    )
    with Sandbox(str(looping), timeout_s=1.0, import_timeout_s=2.0) as box:
        box_error = box.call("causal_mask", 2, 2).error
        assert box.call("softmax", 1.0).error == box_error and box.starts == 1  # not retried per check
    assert box_error.startswith("your file did not finish importing in 2 s (the limit;")


def test_a_hang_restarts_the_worker_for_the_next_call(learner_file):
    text = learner_file.CORRECT.replace(
        "def merge_heads(x):\n", "def merge_heads(x):\n    while True:\n        pass\n"
    )
    with Sandbox(str(learner_file(text)), timeout_s=1.0) as box:
        assert (
            "did not finish within 1 s"
            in box.call("merge_heads", __import__("numpy").zeros((1, 2, 1, 2))).error
        )
        assert box.call("causal_mask", 2, 2).value.tolist() == [[True, False], [True, True]]
        assert box.restarts == 1
