"""The bottleneck experiment end to end on a tiny budget: sizes, buckets, files, alignments."""

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.bottleneck import CONTESTANTS, QUICK, Settings, _alignment, buckets, match_size, run
from attnlab.models.base import count_parameters
from attnlab.models.registry import build_model
from attnlab.tasks import split_of

TINY = Settings(
    min_len=3,
    max_len=6,
    bucket_width=2,
    target_params=4000,
    steps=15,
    batch_size=16,
    train_size=200,
    eval_per_bucket=6,
    warmup=3,
)


def test_buckets():
    assert buckets(QUICK) == [(3, 5), (6, 8), (9, 11), (12, 14), (15, 17)]
    assert buckets(Settings(min_len=3, max_len=24, bucket_width=4))[-1] == (23, 24)


@pytest.mark.parametrize("spec", CONTESTANTS, ids=lambda s: s.name)
def test_match_size_is_the_closest_choice(spec):
    params, n = match_size(spec, vocab=15, target=40_000, max_len=40)
    assert n == count_parameters(build_model(spec.kind, 15, params))
    value = params[spec.knob]
    for other in (value - 8, value + 8):
        if other < 16 or (spec.kind == "transformer" and other % 4):
            continue
        p = {**params, spec.knob: other}
        if spec.kind == "transformer":
            p["d_ff"] = 2 * other
        assert abs(count_parameters(build_model(spec.kind, 15, p)) - 40_000) >= abs(n - 40_000)
    assert abs(n - 40_000) / 40_000 < 0.15  # comparable sizes


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bottleneck")
    return out, run(TINY, out, progress=False, log=lambda *a: None)


def test_tiny_run_writes_every_file(tiny_run):
    out, result = tiny_run
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 4 * 2
    assert {r["bucket"] for r in rows} == {"3-4", "5-6"}
    assert all(
        int(r["n"]) == 6 and 0.0 <= float(r["exact"]) <= float(r["token_acc"]) + 1e-9 <= 1.0 + 1e-9
        for r in rows
    )
    data = json.loads((out / "results.json").read_text())
    assert [m["name"] for m in data["models"]] == [c.name for c in CONTESTANTS]
    assert data["settings"]["steps"] == 15
    assert (out / "accuracy_vs_length.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result.heatmaps) == 3  # the fixed-context model has no alignment
    for p in result.heatmaps:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "fixed (Seq2SeqRNN)" in result.table() and result.summary.count("exact") == 4
    for m, line in zip(result.models, result.table().splitlines()[2:]):  # counts with separators
        assert line[:33].split()[-1] == f"{m.params:,}"


def test_alignments_are_distributions_over_the_source(tiny_run):
    _, result = tiny_run
    tok = _task_tok()
    from attnlab.tasks import Example

    ex = Example("abcde", "edcba")
    for model in result.trained.values():
        if model.kind == "seq2seq-rnn":
            continue
        weights, xs, ys = _alignment(model, tok, ex)
        assert weights.shape == (6, 6) and len(xs) == 6 and len(ys) == 6  # 5 symbols + <eos>
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def _task_tok():
    from attnlab.tasks import get_task

    return get_task("reverse").tokenizer


def test_held_out_sources_come_from_the_test_split():
    from attnlab.experiments.bottleneck import _task

    for lo, hi in buckets(TINY):
        for e in _task(TINY, lo, hi).sample("test", 20, seed=0):
            assert split_of(e.src) == "test" and lo <= len(e.src) <= hi


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"steps": 0}, "steps must be a positive integer"),
        ({"min_len": 9, "max_len": 3}, "min_len=9 is larger"),
        ({"models": ("nope",)}, "models must be a non-empty subset"),
    ],
)
def test_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        Settings(**kw)


def test_cli_bad_steps_is_one_line_exit_2(tmp_path):
    result = CliRunner().invoke(
        cli, ["experiment", "bottleneck", "--quick", "--steps", "0", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == ["Error: --steps must be a positive integer, got 0"]
    assert not (tmp_path / "x").exists()
