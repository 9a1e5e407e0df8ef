"""The math view: one query of one head, its weights equal to the attention view's row, its steps
recomputing exactly, its formulas MathML; hostile layer, head and position fields are a 400 naming
the field."""

from __future__ import annotations

import math
import re

import pytest
import torch

from attnlab import ref
from attnlab.serve import views

SENTENCE = "The animal didn't cross the street because it was too tired."
PROMPT = "the cat sat on the mat . the cat"


@pytest.mark.parametrize(
    ("which", "text", "layer", "head"), [("minilm", SENTENCE, 4, 2), ("gpt", PROMPT, 1, 3)]
)
def test_the_weights_are_the_attention_views_row_and_recompute(which, text, layer, head, request):
    loaded = request.getfixturevalue(which)
    row = views.attention(loaded, text)
    out = views.answer("math", loaded, {"text": text, "layer": layer, "head": head, "position": 5})
    w = views.unpack(row["weights"])[layer, head, 5]  # [T]
    assert torch.equal(torch.tensor(out["weights"], dtype=torch.float32), w)  # bit for bit
    assert out["name"] == f"{layer}.{head}" and out["tokens"] == row["tokens"]
    # softmax(K q * scale + M) = weights; weights . V = z; with attnlab.ref on the view's own numbers
    k, v = views.unpack(out["k"]).double().numpy(), views.unpack(out["v"]).double().numpy()
    q, mask = torch.tensor(out["q"]).numpy(), torch.tensor(out["mask"]).numpy()
    assert out["scale"] == 1 / math.sqrt(out["d_k"])
    a = ref.masked_softmax(k @ q * out["scale"], mask)
    assert abs(a - w.double().numpy()).max() < 1e-6
    assert abs(a @ v - torch.tensor(out["z"]).numpy()).max() < 1e-6
    assert max(out["checks"].values()) < 1e-6
    assert mask.tolist() == ([j <= 5 for j in range(len(mask))] if which == "gpt" else [True] * len(mask))
    # the keys listed are the largest weights, with q.k and the scaled score beside each
    top = out["top"][0]
    assert top["weight"] == float(w.max()) and top["score"] == pytest.approx(top["raw"] * out["scale"])
    assert top["text"] == out["tokens"][top["key"]]["text"]


def test_position_defaults_to_the_last_token_and_toggles_fit_the_model(minilm, gpt):
    out = views.answer("math", gpt, {"text": PROMPT})
    assert (out["position"], out["layer"], out["head"]) == (len(out["tokens"]) - 1, 0, 0)
    assert out["unmasked"]["future_share"] == 0.0  # the last token has no future
    mid = views.answer("math", gpt, {"text": PROMPT, "position": 2})
    assert mid["unmasked"]["future_share"] > 0 and all(f["key"] > 2 for f in mid["unmasked"]["future"])
    assert [t["top"][0]["text"] for t in mid["temperature"]][:1] == [
        gpt.tokenizer.token(int(gpt.model(torch.tensor([gpt.tokenizer.encode(PROMPT)]))[0, 2].argmax()))
    ]
    enc = views.answer("math", minilm, {"text": SENTENCE, "position": 3})
    assert enc["unmasked"] is None and enc["temperature"] is None and enc["norm_place"] == "post"
    assert enc["unscaled"]["max"][1] >= enc["unscaled"]["max"][0]  # no 1/sqrt(d_k): sharper
    assert set(enc["vectors"]) == set(enc["norms"]) and len(enc["vectors"]) == 8


def test_the_steps_are_mathml_with_concept_pages():
    steps = views.guide()["math"]["steps"]
    assert {s["id"] for s in steps} >= {"qkv", "rope", "scores", "weights", "z", "concat", "unscaled", "next"}
    for s in steps:
        assert s["mathml"].startswith("<math") and s["mathml"].count("<mi>") >= 1
        assert s["concepts"] and all(c["href"].endswith(".html") for c in s["concepts"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("layer", 6),
        ("layer", -1),
        ("head", 12),
        ("head", "1"),
        ("position", 16),
        ("position", float("nan")),
        ("position", 10**30),
        ("layer", 1.5),
        ("head", None),
        ("position", [1]),
    ],
)
def test_hostile_fields_are_a_400_naming_the_field(live, field, value):
    body = {"model": 0, "text": SENTENCE, "layer": 0, "head": 0, "position": 0, field: value}
    status, _, data = live.client.post("math", body)
    assert status == 400 and data["error"].startswith(f"{field} must be an integer from 0 to")


def test_the_served_view_equals_the_library(live, gpt):
    status, headers, data = live.client.post("math", {"model": 1, "text": PROMPT, "layer": 1, "head": 2})
    assert status == 200 and "compute;dur=" in headers["server-timing"]
    want = views.answer("math", gpt, {"text": PROMPT, "layer": 1, "head": 2})
    assert data["weights"] == want["weights"] and data["z"] == want["z"] and data["top"] == want["top"]
    assert data["k"] == want["k"] and data["vectors"] == want["vectors"]


@pytest.mark.parametrize("text", ["word " * 200, "a\n" * 300, "the cat " * 90])
def test_a_text_too_long_says_how_much_of_it_fits(minilm, gpt, text):
    for loaded in (minilm, gpt):
        limit = views.max_tokens(loaded)
        with pytest.raises(ValueError, match=f"more than {limit} tokens") as info:
            views.encode(loaded, text)
        cut = int(re.search(r"its first (\d+) characters fit", str(info.value))[1])
        ids = views.encode(loaded, text[:cut])
        assert len(ids) == limit  # as many as fit, and no more
