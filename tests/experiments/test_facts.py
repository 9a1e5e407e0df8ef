"""The facts experiment: facts made from sentences, a GPT that learns them, mean ablation of attention
or MLP outputs, recall per fact with a bootstrap interval, and the shared verdict rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments import facts as F
from attnlab.experiments.verdicts import AGREES, DISAGREES, INCONCLUSIVE, TOO_WEAK

TINY = F.Settings(subjects=24, cities=4, d_model=32, layers=2, heads=2, steps=300, resamples=200)


def test_facts_are_sentences_with_one_city_each():
    f = F.make_facts(50, 6, seed=3)
    assert len(f.sentences) == 50 and f.ids.shape == (50, 4)
    assert all(s.split()[1:3] == ["lives", "in"] for s in f.sentences)
    assert len({s.split()[0] for s in f.sentences}) == 50  # distinct subjects
    assert [f.words[i] for i in f.ids[0]] == f.sentences[0].split()
    assert torch.equal(f.city, f.ids[:, 3]) and len(set(f.city.tolist())) <= 6
    assert f.sentences == F.make_facts(50, 6, seed=3).sentences != F.make_facts(50, 6, seed=4).sentences


def test_a_trained_model_is_judged_and_cached(tmp_path):
    lines = []
    r = F.run(TINY, tmp_path, log=lines.append, progress=False)
    d = r.data
    assert d["chance"] == 0.25 and d["recall"] >= d["chance"] + F.MARGIN and d["competent"]
    lo, hi = d["interval"]
    assert lo <= d["difference"] <= hi and d["answer"] in (AGREES, DISAGREES, INCONCLUSIVE)
    assert d["answer"] == (AGREES if lo > 0 else DISAGREES if hi < 0 else INCONCLUSIVE)
    mlp_all = [
        c
        for c in d["ablations"]
        if c["ablated"] == "MLP" and c["position"] == "all" and len(c["layers"]) == 2
    ]
    assert d["difference"] == pytest.approx(d["recall"] - mlp_all[0]["recall"], abs=1e-3)
    assert len(d["ablations"]) == 6 and 0 <= d["frame_with_mlps_ablated"] <= 1
    assert lines[0].startswith("facts: model trained in")
    assert {p.name for p in tmp_path.iterdir()} >= {"results.json", "table.txt", "facts.png", "models"}
    again = []
    r2 = F.run(TINY, tmp_path, log=again.append, progress=False)
    assert again[0].startswith("facts: model reused") and r2.data["ablations"] == d["ablations"]
    other = []
    F.run(dataclasses.replace(TINY, steps=301), tmp_path, log=other.append, progress=False)
    assert other[0].startswith("facts: model trained")  # other settings: not the cached model


def test_mean_ablation_replaces_only_the_asked_position():
    f = F.make_facts(12, 3, seed=0)
    model, _ = F.trained(f, dataclasses.replace(TINY, subjects=12, cities=3, steps=5), None)
    point = "blocks.0.ffn.out"
    for where, changed in (("subject", [0]), ("all", [0, 1, 2])):
        replace = F._mean_ablation(model, f, [point], where)
        t = torch.randn(12, 3, 32)
        out = replace[point](t)
        same = [i for i in range(3) if torch.equal(out[:, i], t[:, i])]
        assert same == [i for i in range(3) if i not in changed]
        assert torch.allclose(out[0, changed], out[5, changed])  # one mean for every fact
    assert np.array_equal(F.recall(model, f), F.recall(model, f, {}))


def test_an_untrained_model_is_too_weak():
    r = F.run(dataclasses.replace(TINY, steps=1), None, log=lambda *_: None, progress=False)
    assert r.data["answer"] == TOO_WEAK and "Model too weak" in r.verdict


@pytest.mark.parametrize(
    "field, value, name", [("cities", 1, "cities"), ("subjects", 0, "subjects"), ("heads", 3, "heads")]
)
def test_bad_settings_name_the_field(field, value, name):
    with pytest.raises(ValueError, match=name):
        dataclasses.replace(TINY, **{field: value})


def test_the_command_is_registered():
    result = CliRunner().invoke(cli, ["experiment", "facts", "--help"])
    assert result.exit_code == 0 and "--quick" in result.output and "MLP" in result.output
    bad = CliRunner().invoke(cli, ["experiment", "facts", "--seed", "x"])
    assert bad.exit_code == 2 and "--seed" in bad.output
