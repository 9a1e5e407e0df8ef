"""Built-in tasks: correct targets, seeded sampling, length ranges, splits that never overlap."""

import datetime as dt

import pytest

from attnlab.tasks import SPLITS, get_task, split_of
from attnlab.tasks.dates import FIRST, FORMATS, LAST, ordinal


@pytest.mark.parametrize("name", ["reverse", "copy", "sort", "dates"])
def test_splits_never_overlap(name):
    # short sources (few distinct strings) make collisions likely if the split rule were wrong
    kw = {"min_len": 1, "max_len": 3, "num_symbols": 4} if name != "dates" else {}
    task = get_task(name, **kw)
    drawn = {s: {e.src for e in task.sample(s, 300, seed=7)} for s in SPLITS}
    assert drawn["train"].isdisjoint(drawn["validation"])
    assert drawn["train"].isdisjoint(drawn["test"])
    assert drawn["validation"].isdisjoint(drawn["test"])
    for s, sources in drawn.items():
        assert all(split_of(src) == s for src in sources)
    if name != "dates":  # 4 + 16 + 64 = 84 distinct sources, roughly 80/10/10 among them
        assert 40 <= len(drawn["train"]) <= 84 and len(drawn["validation"]) >= 2


def test_split_proportions_are_80_10_10():
    counts = {s: 0 for s in SPLITS}
    for i in range(20000):
        counts[split_of(f"src{i}")] += 1
    assert abs(counts["train"] / 20000 - 0.8) < 0.01
    assert abs(counts["validation"] / 20000 - 0.1) < 0.01


def test_symbol_targets_and_lengths():
    cases = [("reverse", lambda s: s[::-1]), ("copy", lambda s: s), ("sort", lambda s: "".join(sorted(s)))]
    for name, f in cases:
        task = get_task(name, min_len=4, max_len=9, num_symbols=6)
        ex = task.sample("train", 500, seed=1)
        assert all(e.tgt == f(e.src) for e in ex)
        lengths = {len(e.src) for e in ex}
        assert lengths == set(range(4, 10))
        assert set("".join(e.src for e in ex)) == set("abcdef")


def test_sampling_is_seeded():
    task = get_task("reverse")
    assert task.sample("test", 50, seed=3) == task.sample("test", 50, seed=3)
    assert task.sample("test", 50, seed=3) != task.sample("test", 50, seed=4)
    assert get_task("dates").sample("train", 20, seed=0) == get_task("dates").sample("train", 20, seed=0)


def test_dates_formats_of_one_day():
    d = dt.date(2026, 1, 25)  # a Sunday
    expected = {
        "long-weekday": "Sunday, 25 January 2026",
        "dd/mm/yy": "25/01/26",
        "mon-ordinal": "jan 25th 2026",
        "month-d-yyyy": "January 25, 2026",
        "d-mon-yyyy": "25 Jan 2026",
        "dd.mm.yyyy": "25.01.2026",
        "dd-MON-yyyy": "25-JAN-2026",
        "ordinal-of": "the 25th of January, 2026",
        "wd-d-mon-yy": "Sun 25 Jan 26",
        "d-month-yyyy-lower": "25 january 2026",
        "yyyy/mm/dd": "2026/01/25",
        "d/m/yyyy": "25/1/2026",
    }
    assert {k: f(d) for k, f in FORMATS.items()} == expected


def test_every_date_format_is_unambiguous_over_the_range():
    days = [dt.date.fromordinal(o) for o in range(FIRST.toordinal(), LAST.toordinal() + 1)]
    assert len(days) == 36525
    for name, f in FORMATS.items():
        assert len({f(d) for d in days}) == len(days), name


def test_dates_targets_are_iso_of_the_source_date():
    ex = get_task("dates").sample("validation", 300, seed=5)
    for e in ex:
        d = dt.date.fromisoformat(e.tgt)
        assert FIRST <= d <= LAST
        assert e.src in {f(d) for f in FORMATS.values()}
    assert len({e.src for e in ex}) > 250  # varied formats and days


def test_dates_length_range_and_format_choice():
    task = get_task("dates", min_len=8, max_len=10, formats=("dd/mm/yy", "d/m/yyyy"))
    ex = task.sample("train", 200, seed=0)
    assert all(8 <= len(e.src) <= 10 for e in ex)
    assert all("/" in e.src for e in ex)


@pytest.mark.parametrize(
    "n,text",
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (31, "31st"),
    ],
)
def test_ordinal(n, text):
    assert ordinal(n) == text


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"name": "nope"}, "unknown task 'nope'"),
        ({"name": "reverse", "min_len": 5, "max_len": 2}, "min_len=5 is larger than max_len=2"),
        ({"name": "reverse", "min_len": 0}, "min_len must be a positive integer"),
        ({"name": "reverse", "num_symbols": 99}, "num_symbols must be at most 36"),
        ({"name": "reverse", "bogus": 1}, "unexpected keyword"),
        ({"name": "dates", "formats": ("xx",)}, "unknown format"),
    ],
)
def test_bad_task_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        get_task(**kw)


def test_too_small_space_for_a_split_is_an_error():
    task = get_task("reverse", min_len=1, max_len=1, num_symbols=1)  # one source string in total
    owner = split_of("a")
    other = next(s for s in SPLITS if s != owner)
    assert task.sample(owner, 3, seed=0)[0].src == "a"
    with pytest.raises(ValueError, match="too few distinct sources"):
        task.sample(other, 1, seed=0, max_tries_per_example=50)
