"""The token-pair split of a mean-pooled cosine: the terms sum to the cosine of the real MiniLM
sentence embeddings (attnlab.models.sentence.embed, itself proven against sentence-transformers)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.interp.similarity import explain_similarity, pair_terms
from attnlab.models import load
from attnlab.models.pretrained import load_pretrained
from attnlab.models.sentence import embed

PAIRS = [
    ("A man is playing a guitar.", "Someone plays the guitar."),
    ("The stock market fell sharply today.", "A cat sleeps on the warm windowsill."),
]


def test_pair_terms_sum_to_the_cosine_of_the_means():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 16, generator=g), torch.randn(3, 16, generator=g)
    terms = pair_terms(a, b)  # [5, 3]
    want = F.cosine_similarity(a.double().mean(0), b.double().mean(0), dim=0)
    assert terms.shape == (5, 3)
    assert float(terms.sum()) == pytest.approx(float(want), abs=1e-14)


@pytest.fixture(scope="module")
def minilm():
    return load_pretrained("minilm")


@pytest.mark.parametrize("text_a, text_b", PAIRS)
def test_minilm_terms_sum_to_the_embedding_cosine(minilm, text_a, text_b):
    model, tokenizer = minilm
    pairs = explain_similarity(model, tokenizer, text_a, text_b)
    v = embed(model, tokenizer, [text_a, text_b])  # [2, 384], L2-normalised
    assert abs(pairs.cosine - float(v[0] @ v[1])) < 1e-6
    assert pairs.terms.shape == (len(tokenizer.encode(text_a).ids), len(tokenizer.encode(text_b).ids))
    assert pairs.tokens_a[0] == "[CLS]" and pairs.tokens_b[-1] == "[SEP]"
    top = pairs.top(3)
    assert [t for *_, t, _ in top] == sorted(pairs.terms.flatten().tolist(), reverse=True)[:3]


def test_cli_explain_json_and_table(minilm):
    a, b = PAIRS[0]
    result = CliRunner().invoke(cli, ["embed", "--explain", a, b, "--top", "4", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    model, tokenizer = minilm
    v = embed(model, tokenizer, [a, b])
    assert abs(sum(map(sum, data["terms"])) - float(v[0] @ v[1])) < 1e-6
    assert abs(data["cosine"] - float(v[0] @ v[1])) < 1e-6
    assert [r["a"] for r in data["top"]][0] == "guitar" and len(data["top"]) == 4
    text = CliRunner().invoke(cli, ["embed", "--explain", a, b, "--top", "2"]).output.splitlines()
    assert text[0].startswith(f"cosine {data['cosine']:.6f} = the sum of 9 x 7 token-pair terms")
    assert text[5].split() == [
        "guitar",
        "guitar",
        f"{data['top'][0]['term']:.5f}",
        f"{data['top'][0]['share']:.1%}",
    ]


def test_cli_explain_draws_the_pair_matrix(minilm, tmp_path):
    a, b = PAIRS[0]
    out = tmp_path / "pairs.png"
    result = CliRunner().invoke(cli, ["embed", "--explain", a, b, "--top", "1", "--heatmap", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 5_000
    assert f"as a heatmap to {out}" in result.output  # the file is named
    result = CliRunner().invoke(cli, ["embed", a, "--heatmap", str(out)])
    assert result.exit_code == 2 and "--heatmap goes with --explain" in result.output


def test_cli_explain_needs_two_texts():
    result = CliRunner().invoke(cli, ["embed", "--explain", "one", "two", "three"])
    assert result.exit_code == 2 and "--explain takes exactly two TEXTs, got 3" in result.output


def test_the_pair_heatmap_colours_span_the_terms(minilm, tmp_path, monkeypatch):
    """The terms are small and of either sign: the colour scale is centred on 0 and reaches exactly
    the largest |term| (a [0, 1] scale drew the whole matrix near white)."""
    import matplotlib.pyplot as plt

    from attnlab.commands import embed as embed_command
    from attnlab.interp.similarity import explain_similarity

    model, tokenizer = minilm
    pairs = explain_similarity(model, tokenizer, *PAIRS[0])
    seen = []
    monkeypatch.setattr(plt, "close", lambda fig: seen.append(fig))
    embed_command._draw(pairs, str(tmp_path / "p.png"))
    image = seen[0].axes[0].images[0]
    reach = float(pairs.terms.abs().max())
    assert image.norm.vmax == pytest.approx(reach) and image.norm.vmin == pytest.approx(-reach)
    assert reach < 0.5  # the terms are far from the old scale's top of 1


def test_the_tokenizer_load_returns_gives_the_same_terms(minilm):
    """``attnlab.models.load``'s tokenizer (an HFTokenizer) reads the sentences as the raw one does."""
    model, tokenizer = minilm
    want = explain_similarity(model, tokenizer, *PAIRS[0])
    got = explain_similarity(model, load("minilm").tokenizer, *PAIRS[0])
    assert got.tokens_a == want.tokens_a and got.tokens_b == want.tokens_b
    torch.testing.assert_close(got.terms, want.terms, rtol=0, atol=1e-12)


def test_a_decoder_is_refused_by_name():
    """explain_similarity splits a sentence encoder's cosine: a GPT is a ValueError, not an
    AttributeError about pooling (trial B, #11)."""
    from attnlab.models import GPT, GPTConfig

    gpt = GPT(GPTConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32))
    with pytest.raises(ValueError) as err:
        explain_similarity(gpt, None, "a cat", "a dog")
    assert str(err.value) == (
        "explain_similarity needs a sentence encoder (a mean-pooling BERT such as MiniLM), got GPT: it "
        "splits the cosine of two sentence embeddings"
    )
