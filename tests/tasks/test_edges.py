"""Task parameters that cannot be satisfied are refused; large --n streams."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.tasks import EOS, get_task
from attnlab.tasks.dates import FORMATS, source_lengths


@pytest.mark.parametrize("kw", [{"min_len": 100}, {"max_len": 1}, {"min_len": 29, "max_len": 40}])
def test_dates_refuses_lengths_no_format_can_produce(kw):
    with pytest.raises(
        ValueError, match=rf"^task dates\b.*\blength {kw.get('min_len', 0)}\.\.{kw.get('max_len', '[0-9]+')}:"
    ):
        get_task("dates", **kw)
    result = CliRunner().invoke(
        cli, ["tasks", "show", "dates", *[f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]]
    )
    assert result.exit_code == 2 and result.output.count("\n") == 1


def test_source_lengths_are_the_lengths_drawn():
    lengths = source_lengths(tuple(FORMATS))
    drawn = {len(e.src) for e in get_task("dates").sample("train", 3000, seed=1)}
    assert drawn <= lengths and min(lengths) == 8 and max(lengths) == 28
    task = get_task("dates", min_len=27)  # a rare tail is still reachable
    assert all(len(e.src) >= 27 for e in task.sample("train", 5))


def test_iter_sample_yields_exactly_sample_and_show_json_is_the_same_document():
    task = get_task("reverse")
    assert list(task.iter_sample("validation", 40, seed=3)) == task.sample("validation", 40, seed=3)
    result = CliRunner().invoke(cli, ["tasks", "show", "reverse", "--n", "7", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    tok = task.tokenizer
    want = {
        "task": task.spec(),
        "vocab_size": tok.vocab_size,
        "split": "train",
        "examples": [
            {
                "src": e.src,
                "tgt": e.tgt,
                "src_ids": tok.encode(e.src) + [EOS],
                "tgt_ids": tok.encode(e.tgt) + [EOS],
            }
            for e in task.sample("train", 7, seed=3)
        ],
    }
    assert doc == want


def test_show_streams_a_billion_examples_lazily():
    # CliRunner collects output in memory, so read only the first lines of a streamed generator
    task = get_task("copy")
    it = task.iter_sample("train", 10**9)
    first = [next(it) for _ in range(3)]
    assert first == task.sample("train", 3)
