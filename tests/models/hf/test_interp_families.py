"""The analyses on every Hugging Face decoder family attnlab reads (GPT-2, Llama, Mistral, Qwen2),
loaded through attnlab.models.load, against transformers itself (eager attention, hidden states):
the accumulated residual stream is transformers' hidden states, the attribution's parts add up to
transformers' logit difference, patching everything restores transformers' clean logits; and every
command (heads, prune, patch, attribute, compose) runs on each folder."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.interp.attribution import accumulated_resid, logit_attribution, run_with_cache
from attnlab.interp.patching import activation_patching, clean_run, logit_metric, restore
from attnlab.models.load import load

CLEAN = "A token looks at the token and the"
CORRUPT = "A the looks at the token and the"  # ' token' -> ' the': one token each, same length
TOL = 5e-5  # float32, two implementations (measured at most 4.4e-6)


@pytest.fixture
def loaded(causal_name, hf_dirs):
    return load(hf_dirs[causal_name])


def test_accumulated_stream_is_transformers_hidden_states(loaded, causal_name, hf_oracles):
    ids = torch.tensor([loaded.tokenizer.encode(CLEAN)])  # [1, T]
    with torch.no_grad():
        out = hf_oracles[causal_name](ids, output_hidden_states=True)
    _, cache = run_with_cache(loaded.model, ids, ["blocks.*.resid_*", "final_norm"])
    acc = accumulated_resid(loaded.model, cache)
    layers = len(loaded.model.blocks)
    pre = [acc.stack[acc.labels.index(f"{l}_pre")] for l in range(layers)]
    for l in range(
        layers
    ):  # transformers' hidden_states[l] is block l's input; the last is after the final norm
        torch.testing.assert_close(pre[l], out.hidden_states[l], rtol=0, atol=TOL)
    torch.testing.assert_close(cache["final_norm"], out.hidden_states[layers], rtol=0, atol=TOL)


def test_attribution_adds_up_to_transformers_logit_difference(loaded, causal_name, hf_oracles):
    ids = torch.tensor([loaded.tokenizer.encode(CLEAN)])
    with torch.no_grad():
        logits = hf_oracles[causal_name](ids).logits[0, -1]  # [V]
    target, wrong = logits.topk(2).indices.tolist()
    attr = logit_attribution(loaded.model, ids, target, wrong)
    want = logits[target] - logits[wrong]
    assert float(attr.values[:, 0].sum()) == pytest.approx(float(want), abs=TOL)
    assert attr.heads().shape[:2] == (len(loaded.model.blocks), loaded.model.config.num_heads)


def test_patching_everything_restores_transformers_clean_logits(loaded, causal_name, hf_oracles):
    tok = loaded.tokenizer
    clean, corrupt = torch.tensor([tok.encode(CLEAN)]), torch.tensor([tok.encode(CORRUPT)])
    assert clean.shape == corrupt.shape
    oracle = hf_oracles[causal_name]
    with torch.no_grad():
        want_clean, want_corrupt = oracle(clean).logits, oracle(corrupt).logits
    cache = clean_run(loaded.model, clean)
    torch.testing.assert_close(
        restore(loaded.model, corrupt, cache, ["blocks.0.resid_pre"]), want_clean, rtol=0, atol=TOL
    )
    torch.testing.assert_close(restore(loaded.model, corrupt, cache, []), want_corrupt, rtol=0, atol=TOL)
    target = tok.encode(" the")[0]
    result = activation_patching(loaded.model, clean, corrupt, logit_metric(target))
    assert result.clean == pytest.approx(float(want_clean[0, -1, target]), abs=TOL)
    same = [p for p in range(clean.shape[1]) if p != 1]  # only position 1 differs: the rest restore nothing
    assert float((result.resid[0, same] - result.corrupt).abs().max()) < 1e-5


def _run(*args) -> dict:
    result = CliRunner().invoke(cli, [*map(str, args)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # (a warning, if any, is on stderr)


def test_every_command_runs_on_the_folder(causal_name, hf_dirs, tmp_path):
    path = hf_dirs[causal_name]
    (probe,) = _run("heads", path, "--length", 5, "--batch", 2, "--json")
    assert probe["kind"] == "causal" and len(probe["tokens"]) == 11
    (text,) = _run("heads", path, "--tokens", CLEAN, "--convention", "tl", "--json")
    assert text["convention"] == "tl" and text["tokens"][1] == " token"
    bare = tmp_path / "bare"  # no tokenizer.json: the probe needs none, a text does
    shutil.copytree(path, bare, ignore=shutil.ignore_patterns("tokenizer.json"))
    (no_tok,) = _run("heads", bare, "--length", 5, "--batch", 2, "--json")
    assert no_tok["scores"] == probe["scores"] or no_tok["tokens"][1].isdigit()
    refused = CliRunner().invoke(cli, ["heads", str(bare), "--tokens", CLEAN])
    assert refused.exit_code == 2 and "has no tokenizer" in refused.output
    attr = _run("attribute", path, CLEAN, "--target", " the", "--wrong", " token", "--json")
    assert attr["sum"] == pytest.approx(attr["logit"], abs=1e-3)
    assert attr["accumulated"]["final_post"] == pytest.approx(attr["logit"], abs=1e-3)
    patch = _run("patch", path, "--clean", CLEAN, "--corrupt", CORRUPT, "--target", " the", "--json")
    assert len(patch["resid"]) == len(patch["heads"]) and len(patch["resid"][0]) == len(patch["tokens"])
    pruned = _run("prune", path, "--length", 4, "--batch", 2, "--json")
    rows = pruned["importance_order"]
    assert [r["fraction"] for r in rows] == pytest.approx([i / 10 for i in range(10)])
    assert rows[0]["params"] > rows[-1]["params"] and rows[0]["loss"] == pruned["random_order"][0]["loss"]
    composed = _run("compose", path, "--length", 4, "--batch", 2, "--json")
    assert composed["receiver_layer"] >= 1 and 0 < composed["baseline"] < 1
