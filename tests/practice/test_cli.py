"""`attnlab practice` and `attnlab study` from the command line: bad inputs give one line and exit 2,
a failing check exits 1, --reset asks first, and quiz and practice results reach the study page."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from attnlab.practice.path import LESSONS


def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """``attnlab ARGS`` in-process (click's runner: no interpreter and torch start-up per call)."""
    from click.testing import CliRunner

    from attnlab.cli import cli

    r = CliRunner().invoke(cli, list(args), input=input)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def test_the_real_entry_point_exits_2_with_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "attnlab", "practice", "check", "attention", str(tmp_path / "nope.py")],
        capture_output=True,
        text=True,
    )
    _one_error_line(r, "does not exist")


def _one_error_line(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_practice_bad_inputs(tmp_path, learner_file):
    _one_error_line(run("practice", "check", "attention", str(tmp_path / "nope.py")), "does not exist")
    bad = learner_file("def softmax(x, axis=-1):\n    return x +\n", name="broken.py")
    _one_error_line(run("practice", "check", "attention", str(bad)), "is not Python: line 2")
    lacking = learner_file(
        learner_file.CORRECT.replace("def merge_heads(x):", "def merge(x):"), name="lack.py"
    )
    _one_error_line(run("practice", "check", "attention", str(lacking)), "lacks the function merge_heads")
    wrong = learner_file(
        learner_file.CORRECT.replace("def causal_mask(t_q, t_k):", "def causal_mask(t):"), name="sig.py"
    )
    _one_error_line(run("practice", "check", "attention", str(wrong)), "causal_mask", "wrong signature")
    _one_error_line(run("practice", "check", "summary", str(wrong)), "unknown exercise 'summary'")
    _one_error_line(run("practice", "start", "nonsense"), "unknown exercise 'nonsense'")
    block = tmp_path / "block.txt"
    block.write_text(
        "block: pre-norm\nsizes: B=2 T=5 d=48 h=4 d_ff=192\nx -> [B, T, d]\nLayerNorm => [B, T, d]\n"
    )
    _one_error_line(run("practice", "check", "block", str(block)), "line 4")
    _one_error_line(run("practice", "check", "attention", str(wrong), "--timeout", "abc"), "--timeout")
    _one_error_line(run("practice", "check", "attention", str(tmp_path)), "is a folder, not a file")
    _one_error_line(run("practice", "check", "block", str(tmp_path)), "is a folder, not a file")
    _one_error_line(run("practice", "start", "block", "--seed", "-5"), "from 0 to 4,294,967,295, got '-5'")
    (tmp_path / "attention.py").write_text("mine\n")
    _one_error_line(run("practice", "start", "attention", "--dir", str(tmp_path)), "pass another --dir")
    assert (tmp_path / "attention.py").read_text() == "mine\n"


def test_oversized_or_deeply_nested_files_exit_2(tmp_path, learner_file):
    """Before: a 200000-deep expression raised MemoryError out of ast.parse, and a block file or
    stdin of any size was read whole into memory."""
    deep = learner_file("x = " + "-" * 200000 + "1\n" + learner_file.CORRECT, name="deep.py")
    _one_error_line(run("practice", "check", "attention", str(deep)), "nested too deeply")
    big = learner_file(learner_file.CORRECT + "#" * (1 << 20), name="big.py")
    _one_error_line(run("practice", "check", "attention", str(big)), f"has {big.stat().st_size} bytes")
    drawing = "block: pre-norm\n" + "x -> [B, T, d]\n" * 70000  # 1.05 MiB
    _one_error_line(run("practice", "check", "block", "-", input=drawing), "longer than 1048576 characters")
    (tmp_path / "block.txt").write_text(drawing)
    _one_error_line(run("practice", "check", "block", str(tmp_path / "block.txt")), "not a drawing")


def test_study_bad_inputs(tmp_path):
    _one_error_line(run("study", "tick", "8"), "unknown Week 19 lesson '8': choose a number from 1 to 7")
    _one_error_line(run("study", "untick", "two"), "unknown Week 19 lesson 'two'")
    _one_error_line(run("study", "--html", str(tmp_path)), "--html")  # a folder, not a file
    (tmp_path / "study.sqlite3").write_bytes(b"garbage" * 500)
    r = run("study", "--data-dir", str(tmp_path))
    _one_error_line(r, "corrupt", "delete it with 'attnlab study --reset'")
    assert (tmp_path / "study.sqlite3").read_bytes() == b"garbage" * 500


@pytest.mark.slow
def test_session_records_practice_and_quiz_and_reset_asks(tmp_path, learner_file):
    data = os.environ["ATTNLAB_DATA_DIR"]
    r = run("practice", "start", "attention", "--dir", str(tmp_path / "work"))
    assert r.returncode == 0 and (tmp_path / "work" / "attention.py").is_file()
    r = run("practice", "check", "attention", str(tmp_path / "work" / "attention.py"), "--json")
    report = json.loads(r.stdout)
    assert (
        r.returncode == 1
        and report["score"] == 0
        and all("NotImplementedError" in c["message"] for c in report["checks"])
    )
    good = learner_file()
    r = run("practice", "check", "attention", str(good))
    assert (
        r.returncode == 0
        and r.stdout.splitlines()[-1] == f"score: {report['total']}/{report['total']} checks passed"
    )

    answers = json.loads(
        run("quiz", "--topic", "softmax", "--seed", "3", "--count", "2", "--answers", "--json").stdout
    )
    typed = "".join(f"{q['answer']}\n" for q in answers["questions"])
    r = run("quiz", "--topic", "softmax", "--seed", "3", "--count", "2", input=typed)
    assert "Score: 2/2" in r.stdout
    state = json.loads(run("study", "--json").stdout)
    assert state["database"] == os.path.join(data, "study.sqlite3")
    assert state["lessons"][2]["quiz"] == {"softmax": "2/2"}
    assert [p["passed"] for p in state["practice"]] == [False, True, False]
    assert (
        run("practice", "list")
        .stdout.splitlines()[1]
        .endswith(f"latest {report['total']}/{report['total']}, passed")
    )

    r = run(
        "practice",
        "check",
        "block",
        "-",
        "--quiet",
        input="block: post-norm\nsizes: B=2 T=3 d=8 h=2 d_ff=32\n"
        "x -> [B, T, d]\nattention -> [B, T, d]\nresidual -> [B, T, d]\nLayerNorm -> [B, T, d]\n"
        "MLP -> [B, T, d]\nresidual -> [B, T, d]\n",
    )
    assert r.returncode == 1 and r.stdout.splitlines() == [
        "  FAIL  LayerNorm after the residual around the MLP",
        "        missing: LayerNorm after the residual around the MLP [2, 3, 8]",
        "score: 6/7 checks passed; fix the first FAIL and run it again",
    ]
    page = tmp_path / "week.html"
    assert run("study", "--html", str(page)).returncode == 0
    assert "latest 6/7" in page.read_text() and "<script" not in page.read_text()
    # every lesson's concept pages are linked, and written beside the page as HTML
    hrefs = re.findall(r'href="([^"]+)"', page.read_text())
    assert len(hrefs) == sum(len(lesson.concepts) for lesson in LESSONS) and hrefs
    for href in hrefs:
        assert href.startswith("concepts/") and (tmp_path / href).is_file(), href
    assert 'href="../week.html"' in (tmp_path / "concepts" / "index.html").read_text()

    r = run("study", "--reset", input="n\n")
    assert r.returncode == 1 and "not deleted" in r.stdout and os.path.exists(state["database"])
    assert "--yes" not in r.stdout
    r = run("study", "--reset", input="")  # no terminal to answer from
    assert (
        r.returncode == 1 and "not deleted (no answer: to delete without a question, add --yes)" in r.stdout
    )
    r = run("study", "--reset", input="yes\n")
    assert r.returncode == 0 and not os.path.exists(state["database"])


def test_a_stopped_quiz_reaches_study_as_quiz_printed_it():
    r = run("quiz", "--topic", "flops", "--seed", "7", "--count", "4", input="1\nq\n")
    assert r.stdout.splitlines()[-1] == "Score: 0/1 (3 not asked)"
    assert "flops best 0/1 (3 not asked)" in run("study").stdout  # it said 'flops best 0/4'


def test_quiz_without_topic_reaches_study_and_tick_names_the_week():
    answers = json.loads(run("quiz", "--seed", "5", "--count", "3", "--answers", "--json").stdout)
    typed = "".join(f"{q['answer']}\n" for q in answers["questions"])
    assert run("quiz", "--seed", "5", "--count", "3", input=typed).stdout.splitlines()[-1] == "Score: 3/3"
    assert json.loads(run("study", "--json").stdout)["mixed_quiz"] == "3/3"
    assert "Quiz on every topic (attnlab quiz without --topic): best 3/3" in run("study").stdout.splitlines()
    assert run("study", "tick", "5").stdout == "Week 19 lesson 5 (Positional information) ticked\n"
    assert run("study", "tick", "5").stdout == "Week 19 lesson 5 (Positional information) ticked already\n"


@pytest.mark.slow
def test_check_states_each_likely_mistake_once_with_the_checks_it_explains(learner_file):
    """No 1/sqrt(d_k) fails 10 checks: each FAIL says what is off and points to mistake 1; the
    mistake's sentence is printed once, after the checks, listing the 10 it explains."""
    from attnlab.practice.mistakes import get_mistake

    path = str(learner_file(mistake="no-scale"))
    report = json.loads(run("practice", "check", "attention", path, "--json").stdout)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert len(failed) == 10 and {c["mistake"] for c in failed} == {"no-scale"}
    explanation = get_mistake("no-scale").explanation
    assert report["likely_mistakes"] == [
        {"number": 1, "key": "no-scale", "explanation": explanation, "checks": [c["id"] for c in failed]}
    ]
    out = run("practice", "check", "attention", path, "--quiet").stdout
    assert out.count(explanation) == 1 and out.count("  FAIL  ") == 10
    lines = out.splitlines()
    prefix = f"likely mistake: {explanation} ("
    assert [line for line in lines if line.startswith("        ")] == [
        f"        {c['message'].removeprefix(prefix)[:-1]} (likely mistake 1, below)" for c in failed
    ]
    start = lines.index(f"likely mistake 1 (no-scale): {explanation}")
    assert lines[start + 1 : start + 12] == ["  explains 10 failed checks:"] + [
        f"    - {c['title']}" for c in failed
    ]
    assert lines[start + 12 :] == ["score: 13/23 checks passed; fix the first FAIL and run it again"]


def test_practice_list_suggests_what_is_left(learner_file):
    r = run("practice", "list")
    assert r.stdout.splitlines()[3:] == [
        "next: attnlab practice start block",
        "next: attnlab practice start attention",
    ]
    block = (
        "block: pre-norm\nsizes: B=2 T=3 d=8 h=2 d_ff=32\nx -> [B, T, d]\nLayerNorm -> [B, T, d]\n"
        "attention -> [B, T, d]\nresidual -> [B, T, d]\nLayerNorm -> [B, T, d]\nMLP -> [B, T, d]\n"
        "residual -> [B, T, d]\n"
    )
    assert run("practice", "check", "block", "-", input=block).returncode == 0
    assert run("practice", "list").stdout.splitlines()[3:] == ["next: attnlab practice start attention"]


def test_practice_next_after_every_pass():
    from attnlab.practice.path import practice_next

    latest = {"attention": {"file": "a.py", "score": 20, "total": 23}}
    assert practice_next(latest, {"block"}) == ["next: attnlab practice check attention a.py (latest 20/23)"]
    assert practice_next({}, {"block", "attention"}) == [
        "every graded exercise has passed; the stretch goal (summary) is not graded"
    ]


def test_study_json_with_html_prints_json_and_where_the_page_went(tmp_path):
    import json

    page = tmp_path / "week.html"
    r = run("study", "--data-dir", str(tmp_path), "--html", str(page), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (
        data["html"] == str(page) and page.is_file() and data["concept_pages"] == str(tmp_path / "concepts")
    )
    assert "lessons" in data


def test_a_database_missing_a_table_is_repaired_and_says_so():
    """`practice list` on a database whose practice table was dropped (a partial copy) was
    'sqlite3.OperationalError: no such table: practice'; it is created, the ticks kept."""
    import sqlite3

    from attnlab.practice.store import DB_NAME, Study

    assert run("study", "tick", "3").returncode == 0
    path = os.path.join(os.environ["ATTNLAB_DATA_DIR"], DB_NAME)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE practice")
    r = run("practice", "list")
    assert r.returncode == 0 and "attention" in r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: ") and "no table practice" in lines[0]
    assert "kept ticks, quiz, events" in lines[0]
    with Study() as s:  # repaired once: the tick is still there, and no second warning
        assert list(s.ticked()) == [3]
    assert run("practice", "list").stderr == ""
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE quiz DROP COLUMN seed")
    r = run("study")
    assert r.returncode == 2 and "table quiz without the column(s) seed" in r.stderr
