"""Each likely mistake is stated once, numbered in the order it first explains a failed check."""

from __future__ import annotations

from attnlab.practice.feedback import Ledger
from attnlab.practice.grade import Result
from attnlab.practice.mistakes import get_mistake


def _failed(cid: str, key: str | None, off: str) -> Result:
    """A failed check as the grader reports it (the explanation, then what is off in brackets)."""
    message = off if key is None else f"likely mistake: {get_mistake(key).explanation} ({off})"
    return Result(cid, "scaled_dot_product_attention", f"check {cid}", False, message, key, 0.5)


def test_two_mistakes_over_four_checks_are_stated_once_each():
    ledger = Ledger()
    results = [
        _failed("a", "mask-inverted", "differs by up to 2.5"),
        Result("b", "softmax", "check b", True),
        _failed("c", "no-scale", "differs by up to 0.3"),
        _failed("d", "mask-inverted", "out contains NaN or inf (overflow?)"),
        _failed("e", None, "out has shape [2], expected [3]"),
    ]
    printed = [line for r in results for line in ledger.lines(r)]
    assert printed == [
        "  FAIL  check a",
        "        differs by up to 2.5 (likely mistake 1, below)",
        "  pass  check b",
        "  FAIL  check c",
        "        differs by up to 0.3 (likely mistake 2, below)",
        "  FAIL  check d",
        "        out contains NaN or inf (overflow?) (likely mistake 1, below)",
        "  FAIL  check e",
        "        out has shape [2], expected [3]",
    ]
    inverted, no_scale = get_mistake("mask-inverted").explanation, get_mistake("no-scale").explanation
    assert ledger.summary() == [
        f"likely mistake 1 (mask-inverted): {inverted}",
        "  explains 2 failed checks:",
        "    - check a",
        "    - check d",
        f"likely mistake 2 (no-scale): {no_scale}",
        "  explains 1 failed check:",
        "    - check c",
    ]
    assert [(m["number"], m["key"], m["checks"]) for m in ledger.to_json()] == [
        (1, "mask-inverted", ["a", "d"]),
        (2, "no-scale", ["c"]),
    ]


def test_unknown_mistake_names_the_closest():
    import pytest

    with pytest.raises(ValueError, match=r"; did you mean 'no-scale'\?$"):
        get_mistake("noscale")
