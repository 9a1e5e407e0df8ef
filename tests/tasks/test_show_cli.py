"""``attnlab tasks show``: every printed example checked by an independent transform (the dates by
an independent parser of the printed text), a readable params line, JSON ids that round-trip."""

from __future__ import annotations

import calendar
import datetime
import json
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
DAYS = [d.lower() for d in calendar.day_abbr]  # mon .. sun


def show(*args):
    r = CliRunner().invoke(cli, ["tasks", "show", *args])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    pairs = [tuple(part.strip() for part in line.split("  ->  ")) for line in lines[2:]]
    return lines, pairs


def parse_date(text: str) -> tuple[int, int, int, bool]:
    """(year, month, day, two_digit_year) read from a human date without attnlab."""
    words = re.findall(r"[a-z]+", text.lower())
    months = [MONTHS[w[:3]] for w in words if w[:3] in MONTHS]
    numbers = re.findall(r"\d+", text)
    if months:  # a month name: every such format writes the day before the year
        assert len(months) == 1 and len(numbers) == 2, text
        day, year = numbers
        return int(year), months[0], int(day), len(year) == 2
    a, b, c = numbers
    if len(a) == 4:
        return int(a), int(b), int(c), False  # yyyy/mm/dd
    return int(c), int(b), int(a), len(c) == 2  # dd/mm/yy(yy), day first


@pytest.mark.parametrize(
    "name, transform",
    [("reverse", lambda s: s[::-1]), ("copy", lambda s: s), ("sort", lambda s: "".join(sorted(s)))],
)
def test_symbol_examples_are_transformed(name, transform):
    lines, pairs = show(name, "--n", "20", "--seed", "3", "--min-len", "4", "--max-len", "9")
    assert len(pairs) == 20
    for src, tgt in pairs:
        assert 4 <= len(src) <= 9 and tgt == transform(src)


def test_date_examples_are_the_same_day():
    lines, pairs = show("dates", "--n", "60", "--seed", "5", "--split", "validation")
    assert len(pairs) == 60
    for src, tgt in pairs:
        iso = datetime.date.fromisoformat(tgt)
        year, month, day, short = parse_date(src)
        assert (month, day) == (iso.month, iso.day), (src, tgt)
        assert (year == iso.year % 100) if short else (year == iso.year), (src, tgt)
        weekday = [w[:3] for w in re.findall(r"[a-z]+", src.lower()) if w[:3] in DAYS]
        assert weekday in ([], [DAYS[iso.weekday()]]), (src, tgt)  # a weekday, if named, is right


@pytest.mark.parametrize("name", ["reverse", "dates"])
def test_params_line_is_readable(name):
    lines, _ = show(name)
    assert lines[1].startswith("params ") and "vocabulary" in lines[1]
    assert not any(bad in lines[1] for bad in ("{", "}", "None", "'")), lines[1]


def test_json_ids_round_trip():
    r = CliRunner().invoke(cli, ["tasks", "show", "reverse", "--n", "3", "--json"])
    data = json.loads(r.output)
    assert data["task"]["name"] == "reverse" and len(data["examples"]) == 3
    for e in data["examples"]:
        assert e["tgt"] == e["src"][::-1]
        assert len(e["src_ids"]) == len(e["src"]) + 1 and e["src_ids"][-1] == 2  # EOS = 2
        assert e["tgt_ids"][:-1] == e["src_ids"][:-1][::-1]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["nope"], "NAME must be one of reverse, copy, sort, dates; got 'nope'"),
        (["reverse", "--min-len", "5", "--max-len", "2"], "--min-len 5"),
        (["dates", "--n", "0"], "n must be a positive integer"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, fragment):
    r = CliRunner().invoke(cli, ["tasks", "show", *args])
    assert r.exit_code == 2 and fragment in r.output and len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("as_json", [["--json"], []])
def test_a_split_that_cannot_be_filled_prints_nothing(as_json):
    # length 1 has 10 sources, none in validation: before, --json wrote '"examples": [' unterminated
    # (and the table its header lines), then the error
    args = [
        "tasks",
        "show",
        "reverse",
        "--n",
        "3",
        "--split",
        "validation",
        "--min-len",
        "1",
        "--max-len",
        "1",
    ]
    r = CliRunner().invoke(cli, [*args, *as_json])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "Error: task 'reverse' with {'min_len': 1, 'max_len': 1, 'num_symbols': 10} has too few distinct "
        "sources to fill the 'validation' split (found 0 of 3)"
    ]


def test_num_symbols_as_tasks_list_shows_it():
    r = CliRunner().invoke(cli, ["tasks", "show", "copy", "--num-symbols", "3", "--n", "40", "--json"])
    data = json.loads(r.stdout)
    assert data["task"]["params"]["num_symbols"] == 3 and data["vocab_size"] == 5 + 3  # 5 specials
    assert set("".join(e["src"] for e in data["examples"])) == set("abc")
    r = CliRunner().invoke(cli, ["tasks", "show", "dates", "--num-symbols", "3"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        "Error: --num-symbols applies to the symbol tasks (reverse, copy, sort); dates has no alphabet size"
    ]
