"""The documents' conceptual questions in the quiz (``--topic concepts``): every quoted question is
in the document it names, the options are drawn in order and graded by letter or number, and the
explanation is shown once the question is answered."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.lessons.quiz import grade, make_quiz, read_answer
from attnlab.lessons.quiz_concepts import BANK, PAGE, PLAIN
from tests.docs.test_citations import FILES, SEEDS, normalise


def test_each_quoted_question_is_in_the_document_it_names():
    docs = {name: normalise((SEEDS / f).read_text(encoding="utf-8")) for name, f in FILES.items()}
    for c in BANK:
        assert normalise(c.quote) in docs[c.document], (c.key, c.document)
        for line in c.explanation:  # what an explanation quotes from a document ('...') is there too
            for quoted in re.findall(r"(?:^|[\s:(])'([^']{25,}?)'(?=[\s.,;)]|$)", line):
                assert normalise(quoted) in docs[PAGE] or normalise(quoted) in docs[PLAIN], (c.key, quoted)


def test_the_bank_covers_both_documents_lists():
    where = [(c.document, c.where) for c in BANK]
    assert [w for d, w in where if d == PAGE and w.startswith("Check yourself")] == [
        f"Check yourself, {i}" for i in range(1, 6)
    ]
    assert sum(w == "Interview prep" for d, w in where if d == PAGE) == 3
    assert sum(d == PLAIN for d, _ in where) >= 6 and len({c.key for c in BANK}) == len(BANK)
    assert all(len(c.wrong) == 3 and c.right not in c.wrong and c.explanation for c in BANK)


def test_a_drawn_question_names_its_document_and_grades_by_letter_or_number():
    seen = set()
    for seed in range(40):
        (q,) = make_quiz("concepts", seed=seed, count=1)
        seen.add((q.variant, int(q.answer)))
        assert q.text.startswith(("The Week 19 course page (", "The plain-language notes ("))
        assert f'"{q.data["quote"]}"' in q.text and q.text.endswith("?") and len(q.choices) == 4
        right = chr(ord("A") + int(q.answer) - 1)
        for text in (right, right.lower(), str(int(q.answer)), f"{right}) whatever", q.format_answer()):
            assert grade(q, read_answer(q, text)), text
        other = "A" if right != "A" else "B"
        assert not grade(q, read_answer(q, other))
    assert len({k for k, _ in seen}) >= 10 and len({a for _, a in seen}) == 4  # shuffled: every letter


@pytest.mark.parametrize("text", ["E", "5", "0", "maybe", "", "[1, 2]"])
def test_a_choice_that_is_not_one_is_refused(text):
    (q,) = make_quiz("concepts", seed=0, count=1)
    with pytest.raises(ValueError, match="could not read|no answer"):
        read_answer(q, text)


def test_cli_shows_the_explanation_after_the_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path))  # the score is recorded there
    (q,) = make_quiz("concepts", seed=5, count=1)
    wrong = "A" if int(q.answer) != 1 else "B"
    result = CliRunner().invoke(
        cli, ["quiz", "--topic", "concepts", "--seed", "5", "--count", "1"], input=f"Z\n{wrong}\n"
    )
    out = result.output
    assert result.exit_code == 0, out
    assert "(a letter, A-D)" in out and re.search(r"\bread 'Z'.*\bA-D\b", out)
    assert out.index("Not quite") < out.index(f"Answer: {q.format_answer()}") < out.index(q.steps[0])
    assert out.rstrip().endswith("Score: 0/1")
