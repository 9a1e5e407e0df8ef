"""`attnlab heads`: MiniLM's head scores against the same detectors on transformers' BertModel
attention weights (the test-only oracle), the repeat probe's layout, and bad input."""

from __future__ import annotations

import json
import re

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.interp import head_score
from attnlab.interp.scan import FIRST_WORDPIECE, scan_repeat
from attnlab.models.pretrained import pretrained_path


@pytest.fixture(scope="module")
def oracle():
    import transformers  # the test-only oracle

    path = str(pretrained_path("minilm"))
    return (
        transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval(),
        transformers.AutoTokenizer.from_pretrained(path),
    )


def _oracle_scores(model, ids, **excl):
    with torch.no_grad():
        attentions = model(input_ids=ids, output_attentions=True).attentions  # L x [B, h, T, T]
    return {
        name: torch.stack([head_score(a, ids, name, **excl) for a in attentions])
        for name in ("previous", "duplicate", "induction", "first", "current")
        if not (name == "first" and excl.get("exclude_first"))
    }


def test_repeat_probe_scores_match_transformers(oracle):
    result = CliRunner().invoke(cli, ["heads", "minilm", "--length", "6", "--batch", "3", "--json"])
    assert result.exit_code == 0, result.output
    (data,) = json.loads(result.output)
    assert data["kind"] == "self" and len(data["tokens"]) == 13 and data["tokens"][0] == "[CLS]"
    model, tokenizer = oracle
    ids = torch.tensor([tokenizer.convert_tokens_to_ids(data["tokens"])])  # the first probe, [1, 13]
    assert bool((ids[0, 1:] >= FIRST_WORDPIECE).all()) and torch.equal(ids[0, 1:7], ids[0, 7:])
    scan = scan_repeat("minilm", length=6, batch=3)[0]
    assert scan.scores == data["scores"]
    # the oracle on the same three probes (ids rebuilt the way scan_repeat draws them)
    from attnlab.interp import repeated_tokens

    raw = repeated_tokens(3, 6, model.config.vocab_size - FIRST_WORDPIECE + 1, seed=0)
    probes = torch.where(raw == 0, torch.full_like(raw, tokenizer.cls_token_id), raw + FIRST_WORDPIECE - 1)
    assert torch.equal(probes[:1], ids)
    want = _oracle_scores(model, probes)
    for name, scores in data["scores"].items():
        torch.testing.assert_close(torch.tensor(scores), want[name].float(), rtol=0, atol=2e-4)
    assert data["above"]["previous"][0][:2] == [0, 2]  # MiniLM's layer-0 head 2 attends to the previous token


def test_text_scores_match_transformers(oracle):
    text = "the cat saw the dog and the cat ran"
    result = CliRunner().invoke(cli, ["heads", "minilm", "--tokens", text, "--exclude-first", "--json"])
    assert result.exit_code == 0, result.output
    (data,) = json.loads(result.output)
    model, tokenizer = oracle
    ids = torch.tensor([tokenizer(text)["input_ids"]])  # [1, T]
    assert data["tokens"] == tokenizer.convert_ids_to_tokens(ids[0].tolist())
    want = _oracle_scores(model, ids, exclude_first=True)
    for name in ("previous", "duplicate", "induction"):
        torch.testing.assert_close(torch.tensor(data["scores"][name]), want[name].float(), rtol=0, atol=2e-4)
    assert "first" not in data["scores"]  # 0/0 with --exclude-first: not scored


def test_human_output_names_the_heads():
    result = CliRunner().invoke(
        cli, ["heads", "minilm", "--length", "5", "--batch", "2", "--threshold", "0.9"]
    )
    assert result.exit_code == 0, result.output
    assert "previous score (layer x head; * above 0.9)" in result.output
    assert "previous heads:   0.2 (prev 0.9" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--length", "300"], "needs 1 + 2*300 = 601 positions, more than the model's context of 512"),
        (["--batch", "0"], "--batch must be a positive integer"),
        (["--tokens", "a b", "--length", "3"], "--length applies to --tokens repeat only"),
    ],
)
def test_bad_input_exits_2(args, message):
    result = CliRunner().invoke(cli, ["heads", "minilm", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_bad_folder_exits_2(tmp_path):
    result = CliRunner().invoke(cli, ["heads", str(tmp_path / "nope")])
    assert result.exit_code == 2 and re.search(
        rf"^Error: .*'{re.escape(str(tmp_path / 'nope'))}'", result.output
    )
