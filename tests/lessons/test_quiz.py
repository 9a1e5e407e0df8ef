"""The quiz: every generated question answered from an independent computation (plain NumPy and
arithmetic here), the grader checked both ways, tolerant parsing, and the CLI driven with input."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.cli import cli
from attnlab.lessons.quiz import TOPICS, Question, grade, make_quiz, parse_answer, read_answer


def _softmax(x):
    e = np.exp(np.asarray(x, dtype=float) - np.max(x))
    return e / e.sum()


def expected(q: Question):
    """The answer recomputed from the question's drawn numbers, without attnlab."""
    d = q.data
    v = (q.topic, q.variant)
    if v == ("shapes", "heads"):
        return (d["B"], d["h"], d["T"], d["d_model"] // d["h"])
    if v == ("shapes", "concat"):
        return (d["B"], d["T"], d["d_model"])
    if v == ("shapes", "weights"):
        return (d["B"], d["h"], d["T"], d["T"])
    if v == ("shapes", "layers"):
        return (d["T"], d["d_model"])
    if v == ("shapes", "volume"):
        return d["B"] * d["T"] * d["d_model"]
    if v == ("params", "head_wq"):
        return d["d_model"] * (d["d_model"] // d["h"])
    if v == ("params", "wo"):
        return d["d_model"] ** 2
    if v == ("params", "mha"):
        return 4 * d["d_model"] ** 2 + (4 * d["d_model"] if d["bias"] else 0)
    if v == ("params", "encoder"):
        m, f = d["d_model"], d["d_ff"]
        return 4 * m * m + 2 * m * f + (f + 9 * m if d["bias"] else 0)
    if v == ("scores", "count"):
        return d["B"] * d["h"] * d["T"] ** 2
    if v == ("scores", "entry"):
        return sum(a * b for a, b in zip(d["Q"][d["i"]], d["K"][d["j"]])) / math.sqrt(d["d_k"])
    if q.topic == "additive":
        pre = np.array(d["s"]) @ np.array(d["W_a"]) + np.array(d["h"][d["i"]]) @ np.array(d["U_a"])
        return float(np.dot(d["v_a"], np.tanh(pre)))
    if v == ("softmax", "plain"):
        return tuple(_softmax(d["e"]))
    if v == ("softmax", "scaled"):
        return tuple(_softmax(np.array(d["raw"]) / math.sqrt(d["d_k"])))
    if v == ("context", "scores"):
        return tuple(_softmax(d["e"]) @ np.array(d["h"]))
    if v == ("context", "weights"):
        return tuple(np.array(d["alpha"]) @ np.array(d["v"]))
    if v == ("context", "self"):
        x = np.array(d["X"])
        return tuple(_softmax(x @ x[d["token"]] / math.sqrt(2)) @ x)
    if q.topic == "wo":
        return tuple(np.concatenate(d["heads"]) @ np.array(d["W_o"]))
    if v == ("flops", "qk"):
        return 2 * d["B"] * d["h"] * d["T"] ** 2 * d["d_k"]
    if v == ("flops", "approx_attn"):
        return 4 * d["n"] ** 2 * d["d"]
    if v == ("flops", "approx_mlp"):
        return 16 * d["n"] * d["d"] ** 2
    if v == ("flops", "projections"):
        return 8 * d["n"] * d["d"] ** 2
    if q.topic == "kvcache":
        return 2 * d["layers"] * d["kv_heads"] * d["d_head"] * d["bytes"] * d["tokens"] * d["batch"]
    if v in (("positions", "angle"), ("positions", "pi_angle")):
        return d["p"] * d["base"] ** (-2 * d["i"] / d["d"]) / d["s"]
    if q.topic == "positions" and q.variant.startswith("alibi"):
        n = 2 ** int(math.log2(d["H"]))  # Press et al.: a power of two, plus every other slope of 2n
        slopes = [2 ** (-8 * k / n) for k in range(1, n + 1)]
        slopes += [2 ** (-8 * k / (2 * n)) for k in range(1, 2 * n + 1, 2)][: d["H"] - n]
        return slopes[d["h"] - 1] * (-d["dist"] if q.variant == "alibi_bias" else 1)
    if v == ("positions", "yarn"):
        return 0.1 * math.log(d["s"]) + 1
    if q.topic == "concepts":  # the document's answer, wherever the shuffle put it (1-based)
        return d["options"].index(d["right"]) + 1
    raise AssertionError(f"no independent formula for {v}")


def wrong(q: Question, value):
    """A clearly wrong answer near the right one."""
    if isinstance(value, tuple):
        bump = 1 if q.integer else 0.05 + 0.1 * abs(value[0])
        return (value[0] + bump, *value[1:])
    if q.rel_tol:  # just outside the stated tolerance
        return value * (1 + 2 * q.rel_tol)
    return value + 1 if q.integer else value + 0.05 + 0.1 * abs(value)


def as_text(q: Question, value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(f"{int(x)}" if q.integer else f"{x:.4f}" for x in value) + "]"
    return f"{int(value):,}" if q.integer else f"{value:.4f}"


QUESTIONS = [q for topic in TOPICS for seed in range(3) for q in make_quiz(topic, seed=seed, count=4)]


def test_every_topic_and_variant_is_drawn():
    seen = {(q.topic, q.variant) for q in QUESTIONS}
    assert {t for t, _ in seen} == set(TOPICS)
    assert len(seen) >= 22


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: f"{q.topic}-{q.variant}")
def test_answer_matches_independent_computation_and_grader_both_ways(q):
    want = expected(q)
    if isinstance(want, tuple):
        assert q.is_vector and len(q.answer) == len(want)
        assert np.allclose(q.answer, want, atol=1e-9)
    else:
        assert not q.is_vector and math.isclose(q.answer, want, abs_tol=1e-9)
    assert grade(q, parse_answer(as_text(q, want), q.is_vector))
    assert not grade(q, wrong(q, tuple(float(x) for x in want) if isinstance(want, tuple) else float(want)))
    if q.is_vector:
        assert not grade(q, tuple(want)[:-1])  # a missing entry is wrong
    assert q.steps and q.text.endswith("?")


def test_notes_values_graded():
    """Numbers from the notes, fed through the same grader on matching questions."""
    q = Question("scores", "count", "?", 1152.0, ["x"], {}, True)  # 4 * 2 * 12^2 (seed 000 §6)
    for text in ("1,152", "1152", "1.152e3", " 1152 ", "1_152"):
        assert grade(q, parse_answer(text, False)), text
    assert not grade(q, parse_answer("1151", False)) and not grade(q, parse_answer("1.15e3", False))
    z = Question("context", "scores", "?", (0.5, 1.0), ["x"], {})  # z = [0.5, 1] (seed 000 §2)
    for text in ("[0.5, 1]", "0.5 1", "(0.5,1)", "[1/2, 1]", "0.5;1"):
        assert grade(z, parse_answer(text, True)), text
    assert not grade(z, parse_answer("[1, 0.5]", True))
    c = Question("context", "scores", "?", (0.881, 0.119), ["x"], {})  # seed 001 §2
    assert grade(c, parse_answer("[0.88, 0.12]", True)) and not grade(c, parse_answer("[0.85, 0.15]", True))


@pytest.mark.parametrize(
    "text,vector,value",
    [
        ("50x512", True, (50.0, 512.0)),
        ("[4, 12, 512]", True, (4.0, 12.0, 512.0)),
        ("-0.062", False, -0.062),
        ("3,221,225,472", False, 3221225472.0),
        ("2e-3", False, 0.002),
        ("\u22121", False, -1.0),
    ],
)
def test_parse_accepts(text, vector, value):
    assert parse_answer(text, vector) == value


@pytest.mark.parametrize(
    "text,vector",
    [
        ("abc", False),
        ("1,15", False),
        ("", False),
        ("[a, 1]", True),
        ("1/0", False),
        ("inf", False),
        ("[]", True),
        ("nan", False),
    ],
)
def test_parse_rejects_with_a_clear_message(text, vector):
    with pytest.raises(ValueError, match="could not read|no answer"):
        parse_answer(text, vector)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(TOPICS)))
def test_printed_answer_is_graded_right(seed, topic):
    (q,) = make_quiz(topic, seed=seed, count=1)
    assert grade(q, read_answer(q, q.format_answer()))


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_no_question_twice_in_one_quiz(topic):
    for seed in range(10):
        texts = [q.text for q in make_quiz(topic, seed=seed, count=6)]
        assert len(set(texts)) == len(texts), (topic, seed)
    assert len({q.text for q in make_quiz("flops", seed=7, count=4)}) == 4  # Q1 and Q2 were one question


def test_large_counts_count_in_any_notation_within_the_stated_tolerance():
    q = Question("flops", "approx_attn", "~ 4 n^2 d?", 8589934592.0, ["x"], {}, True, 0.005)
    for text in ("8.59e9", "8.59 billion", "8,589,934,592", "8.59 x 10^9", "8.59*10**9", "8590 million"):
        assert grade(q, parse_answer(text, False)), text
    assert not grade(q, parse_answer("8.5e9", False))  # 1.05% off: outside 0.5%
    assert "within 0.5%" in q.tolerance()
    assert all(q.rel_tol == 0.005 for q in make_quiz("flops", seed=7, count=4))
    assert all(q.rel_tol == 0 for q in make_quiz("params", seed=7, count=4))  # counts stay exact
    r = run(["quiz", "--topic", "flops", "--seed", "7", "--count", "4"], "q\n")
    assert "(within 0.5%" in r.output


def test_same_seed_same_questions_and_bad_arguments():
    a, b = make_quiz(None, seed=7, count=len(TOPICS)), make_quiz(None, seed=7, count=len(TOPICS))
    assert [q.text for q in a] == [q.text for q in b]
    assert {q.topic for q in a} == set(TOPICS)  # one full round over the topics
    with pytest.raises(ValueError, match="unknown topic"):
        make_quiz("nope")
    with pytest.raises(ValueError, match="count"):
        make_quiz(None, count=0)


# --------------------------------------------------------------------------- the CLI


def run(args, input=None):
    return CliRunner().invoke(cli, args, input=input)


def test_cli_all_right_answers_score_full():
    qs = make_quiz("params", seed=11, count=3)
    answers = "".join(as_text(q, expected(q)) + "\n" for q in qs)
    r = run(["quiz", "--topic", "params", "--seed", "11", "--count", "3"], answers)
    assert r.exit_code == 0, r.output
    assert r.output.count("Right.") == 3 and "Score: 3/3" in r.output


def test_cli_wrong_then_bad_then_quit():
    qs = make_quiz("context", seed=2, count=3)
    w = wrong(qs[0], expected(qs[0]))
    r = run(["quiz", "--topic", "context", "--seed", "2", "--count", "3"], f"{as_text(qs[0], w)}\nhello\nq\n")
    assert r.exit_code == 0 and r.exception is None, r.output
    assert "Not quite" in r.output and "could not read 'hello'" in r.output
    assert "Score: 0/1 (2 not asked)" in r.output
    assert f"Answer: {qs[0].format_answer()}" in r.output  # the worked solution follows


def test_cli_vector_answer_with_wrong_length_is_asked_again():
    q = make_quiz("softmax", seed=1, count=1)[0]
    assert q.is_vector
    typed = "0.5\n" + as_text(q, expected(q)) + "\n"
    r = run(["quiz", "--topic", "softmax", "--seed", "1", "--count", "1"], typed)
    assert r.exit_code == 0 and f"the answer has {len(q.answer)} numbers, you gave 1" in r.output
    assert "Score: 1/1" in r.output


def test_cli_end_of_input_prints_score():
    q = make_quiz("wo", seed=5, count=2)[0]
    r = run(["quiz", "--topic", "wo", "--seed", "5", "--count", "2"], as_text(q, expected(q)) + "\n")
    assert r.exit_code == 0 and r.exception is None
    assert "end of input" in r.output and "Score: 1/1 (1 not asked)" in r.output


def test_cli_answers_mode_prints_worked_answers():
    r = run(["quiz", "--seed", "4", "--count", "9", "--answers"])
    assert r.exit_code == 0
    for q in make_quiz(None, seed=4, count=9):
        assert q.text in r.output and f"Answer: {q.format_answer()}" in r.output
        assert all(step in r.output for step in q.steps)


def test_cli_answers_json():
    import json

    r = run(["quiz", "--topic", "kvcache", "--seed", "3", "--count", "2", "--answers", "--json"])
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["seed"] == 3 and len(data["questions"]) == 2
    for item in data["questions"]:
        d = item["data"]
        per_value = 2 * d["layers"] * d["kv_heads"] * d["d_head"]
        assert item["answer"] == per_value * d["bytes"] * d["tokens"] * d["batch"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--json"], "--json prints the answers"),
        (["--topic", "nope"], "--topic must be one of shapes, params, scores"),
        (["--count", "x"], "--count must be an integer"),
        (["--count", "0"], "--count must be >= 1"),
        (["--seed", "-1"], "--seed must be >= 0"),
    ],
)
def test_cli_bad_arguments_exit_2_one_line(args, message):
    r = run(["quiz", *args])
    assert r.exit_code == 2 and message in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_myths_cli():
    from attnlab.lessons.myths import MYTHS

    r = run(["myths"])
    assert r.exit_code == 0 and all(f"{m.number:3d}. {m.claim}" in r.output for m in MYTHS)
    r = run(["myths", "3"])
    assert r.exit_code == 0 and "z = sum_j alpha_j v_j = [0.5, 1.0]" in r.output
    r = run(["myths", "14", "--json"])
    import json

    assert json.loads(r.output)["evidence"]["right"] == [4.0, 6.0]
    for bad in ("0", "99", "two"):
        r = run(["myths", bad])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "unknown myth" in r.output


class _TypedThenCtrlC(io.RawIOBase):
    """Keyboard input: the given bytes, then the user presses Ctrl-C."""

    def __init__(self, data: bytes):
        self.data = data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not buffer:
            return 0
        if not self.data:
            raise KeyboardInterrupt
        n = min(len(buffer), len(self.data))
        buffer[:n], self.data = self.data[:n], self.data[n:]
        return n


def test_cli_ctrl_c_prints_score_so_far():
    q = make_quiz("softmax", seed=8, count=3)[0]
    typed = _TypedThenCtrlC((as_text(q, expected(q)) + "\n").encode())
    r = run(["quiz", "--topic", "softmax", "--seed", "8", "--count", "3"], typed)
    assert r.exit_code == 0 and r.exception is None, r.output
    assert "Right." in r.output and "interrupted" in r.output and "Score: 1/1 (2 not asked)" in r.output


def test_kv_head_counts_agree_in_number():
    texts = [q.text for seed in range(40) for q in make_quiz(topic="kvcache", seed=seed, count=4)]
    assert any(" 1 key/value head " in t for t in texts)  # MQA questions are drawn
    assert not any(" 1 key/value heads" in t for t in texts)


def test_unknown_topic_names_the_closest():
    from attnlab.lessons.quiz import iter_quiz

    with pytest.raises(ValueError, match=r"\btopic 'kv_cache'.*\bconcepts\b.*'kvcache'\?$"):
        iter_quiz("kv_cache")
