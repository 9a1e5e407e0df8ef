"""The study database: ticks, quiz scores and practice results; consistent after a process is killed
mid-write; a corrupt or newer database is an error that changes nothing; the HTML page escapes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from attnlab.practice.path import LESSONS, get_lesson, progress
from attnlab.practice.store import SCHEMA_VERSION, Study, StudyError, data_dir
from attnlab.practice.study_page import render_html, render_text


def test_data_dir_order(monkeypatch, tmp_path):
    assert data_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path / "env"))
    assert data_dir() == tmp_path / "env"
    monkeypatch.delenv("ATTNLAB_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "attnlab"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the XDG spec: relative paths are invalid
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "attnlab"


def test_ticks_quiz_and_practice_round_trip(tmp_path):
    with Study(tmp_path) as s:
        assert s.tick(3) and not s.tick(3) and s.tick(1) and s.tick(1, False) and not s.tick(1, False)
        s.record_quiz("softmax", 7, 2, 5, 5)
        s.record_quiz("softmax", 8, 4, 5, 5)
        s.record_practice("attention", "a.py", 20, 23, [{"id": "x", "passed": False}])
        s.record_practice("attention", "a.py", 23, 23, [])
        assert list(s.ticked()) == [3]
        assert s.best_quiz() == {"softmax": (4, 5, 5)}
        s.record_quiz("softmax", 9, 1, 1, 3)  # one right, then stopped: ranks as 1 of the 3 planned
        assert s.best_quiz() == {"softmax": (4, 5, 5)}
        s.record_quiz(None, 9, 1, 1, 3)
        assert s.best_quiz()[None] == (1, 1, 3)
        assert s.latest_practice()["attention"]["score"] == 23 and s.ever_passed() == {"attention"}
        state = progress(s.ticked(), s.latest_practice(), s.ever_passed(), s.best_quiz())
    assert state["lessons"][2]["ticked"] and state["lessons"][2]["quiz"] == {"softmax": "4/5"}
    assert state["next"].startswith("Week 19 lesson 1 ") and not state["milestone"]
    assert "[x] 3. Self-attention" in render_text(state)
    with Study(tmp_path) as s:  # reopened: still there, schema version recorded
        assert list(s.ticked()) == [3]
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_lessons_link_to_pages_myths_and_quiz_topics_that_exist():
    from pathlib import Path

    from attnlab.lessons.myths import get_myth
    from attnlab.lessons.quiz import TOPICS

    docs = Path(__file__).resolve().parents[2] / "docs" / "concepts"
    assert len(LESSONS) == 7
    for lesson in LESSONS:
        assert all((docs / page).is_file() for page in lesson.concepts), lesson.title
        assert all(get_myth(n) for n in lesson.myths) and set(lesson.quiz_topics) <= set(TOPICS)
    with pytest.raises(ValueError, match="choose a number from 1 to 7"):
        get_lesson(8)


@pytest.mark.parametrize(
    "garbage", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000]
)
def test_corrupt_database_is_an_error_and_is_left_alone(tmp_path, garbage):
    path = tmp_path / "study.sqlite3"
    path.write_bytes(garbage)
    with pytest.raises(StudyError, match=r"corrupt.*\breset=True") as info:
        Study(tmp_path)
    assert "\n" not in str(info.value) and "never" not in str(info.value)
    assert path.read_bytes() == garbage


def test_newer_database_is_an_error_and_is_left_alone(tmp_path):
    with Study(tmp_path):
        pass
    conn = sqlite3.connect(tmp_path / "study.sqlite3")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = (tmp_path / "study.sqlite3").read_bytes()
    with pytest.raises(StudyError, match=r"newer attnlab.* directory=$"):
        Study(tmp_path)
    assert (tmp_path / "study.sqlite3").read_bytes() == before


_WRITER = textwrap.dedent(
    """
    import sys, time
    from attnlab.practice.store import Study
    s = Study(sys.argv[1])
    if sys.argv[2] == "hold":  # stop inside one transaction
        with s.transaction() as c:
            c.execute("INSERT INTO practice (exercise, file, score, total, passed, detail, at) "
                      "VALUES ('attention', 'x', 1, 2, 0, '[]', 'now')")
            print("inside", flush=True)
            time.sleep(60)
    while True:  # many small transactions, killed at some point
        s.record_practice("attention", "x.py", 1, 2, [{"id": "c", "message": "m" * 2000}] * 20)
        s.tick(1 + s.conn.execute("SELECT count(*) FROM practice").fetchone()[0] % 7)
        print("done", flush=True)
    """
)


def _consistent(tmp_path) -> int:
    with Study(tmp_path) as s:
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = s.conn.execute("SELECT count(*) FROM practice").fetchone()[0]
        events = s.conn.execute("SELECT count(*) FROM events WHERE kind = 'practice'").fetchone()[0]
        assert rows == events  # the row and its event were written in one transaction
        s.latest_practice()
        return rows


def test_killed_mid_transaction_leaves_the_database_as_before(tmp_path):
    with Study(tmp_path) as s:
        s.record_practice("block", "b.txt", 9, 9, [])
    p = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path), "hold"], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "inside"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stdout.close()
    assert _consistent(tmp_path) == 1
    with Study(tmp_path) as s:  # and the database is writable again
        s.record_practice("block", "b.txt", 9, 9, [])


@pytest.mark.slow
def test_killed_at_random_points_stays_consistent(tmp_path):
    import random

    rng = random.Random(0)
    for _ in range(4):
        p = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), "loop"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(rng.randint(1, 30)):
            assert p.stdout.readline().strip() == "done"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
        _consistent(tmp_path)


def test_html_page_is_self_contained_and_escapes_the_learners_text(tmp_path):
    with Study(tmp_path) as s:
        s.tick(6)
        hostile = "<script>alert(1)</script>"
        s.record_practice(
            "attention", f"{hostile}.py", 1, 2, [{"title": "t", "passed": False, "message": hostile}]
        )
        page = render_html(
            progress(s.ticked(), s.latest_practice(), s.ever_passed(), s.best_quiz()), s.latest_practice()
        )
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    import html

    assert "default-src 'none'" in html.unescape(page) and "http" not in page.replace("http-equiv", "")
    assert page.count("<style>") == 1 and "The transformer block" in page
    # each lesson links its concept pages by title; without a folder they are named as files
    assert '<a href="concepts/05-scaled-dot-product.html">Scaled dot-product attention and why' in page
    with Study(tmp_path) as s:
        text_only = render_html(
            progress(s.ticked(), s.latest_practice(), s.ever_passed(), s.best_quiz()), {}, concepts=None
        )
    assert "<a " not in text_only and "<code>docs/concepts/05-scaled-dot-product.md</code>" in text_only


def test_the_text_names_concept_pages_that_ship_and_the_command_that_writes_them(tmp_path):
    """'read:' named docs/concepts/NN.md, a path of the repository that fails from anywhere else: it
    names the installed pages, and the header the command that writes them as HTML."""
    from attnlab.concepts import page_names

    with Study(tmp_path) as s:
        state = progress(s.ticked(), s.latest_practice(), s.ever_passed(), s.best_quiz())
    text = render_text(state)
    assert "docs/concepts" not in text
    assert "'attnlab study --html study.html' writes them" in text
    read = [line.split("read: concept ", 1)[1] for line in text.splitlines() if "read: concept " in line]
    named = [name for line in read for name in line.split(", ")]
    assert len(read) == 7 and {f"{name}.md" for name in named} <= set(page_names())
    assert state["next"].startswith("Week 19 lesson 1 (Sequence-to-sequence models): read concept 01-")


def test_every_quiz_topic_belongs_to_a_lesson():
    """A quiz on any topic shows up under a Week 19 lesson: the lessons' topics cover the registry
    (lesson 5, positions, included)."""
    from attnlab.lessons.quiz import TOPICS

    assert sorted(t for lesson in LESSONS for t in lesson.quiz_topics) == sorted(TOPICS)
    assert get_lesson(5).quiz_topics == ("positions",)


def test_a_quiz_without_topic_is_shown_under_its_own_heading(tmp_path):
    with Study(tmp_path) as s:
        state = progress(s.ticked(), s.latest_practice(), s.ever_passed(), s.best_quiz())
        assert state["mixed_quiz"] is None
        assert "Quiz on every topic (attnlab quiz without --topic): none taken yet" in render_text(state)
        s.record_quiz(None, 11, 2, 5, 5)
        s.record_quiz(None, 12, 4, 5, 5)
        s.record_quiz("positions", 13, 1, 2, 5)
        state = progress(s.ticked(), s.latest_practice(), s.ever_passed(), s.best_quiz())
    assert state["mixed_quiz"] == "4/5" and state["lessons"][4]["quiz"] == {
        "positions": "1/2 (3 not asked)"
    }  # stopped after 2 of 5: as the quiz printed it
    text = render_text(state).splitlines()
    assert "Quiz on every topic (attnlab quiz without --topic): best 4/5" in text
    assert "        quiz: attnlab quiz --topic positions (positions best 1/2 (3 not asked))" in text
    page = render_html(state, {})
    assert "<code>attnlab quiz</code> without <code>--topic</code>: best 4/5" in page


def test_the_two_numberings_say_which_they_are():
    """Week 19 lessons (attnlab study, 1-7) and Week 1 code blocks (attnlab lesson, 01-05) are named
    apart wherever they meet."""
    state = progress({}, {}, set(), {})
    text = render_text(state).splitlines()
    assert "Week 19 lessons (0/7 ticked; tick one once you could explain it: attnlab study tick N)" in text
    assert (
        "        run: attnlab lesson 05 (Week 1 code block 5); attnlab experiment scoring --quick; "
        "myths: attnlab myths 11, 16, 17"
    ) in text
    assert state["next"].startswith("Week 19 lesson 1 (Sequence-to-sequence models): read ")
    assert "<code>attnlab lesson 05 (Week 1 code block 5)</code>" in render_html(state, {})
