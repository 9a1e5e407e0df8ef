"""Each view of attnlab serve equals the library called directly on the same text, and keeps the
invariants of what it shows (rows sum to 1, a causal mask's zeros, a loss that is -mean log p)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.decoding import beam_search, generate, sample
from attnlab.interp import ablate_heads, explain_similarity, logit_lens, score_heads
from attnlab.models.sentence import embed
from attnlab.nn.hooks import capture
from attnlab.serve import views

SENTENCE = "The animal didn't cross the street because it was too tired."
PROMPT = "the cat sat on the mat . the cat"


def _ids(loaded, text):
    return torch.tensor([loaded.tokenizer.encode(text)])  # [1, T]


def _weights(loaded, text):
    """[L, h, T, T] read through the hook points, independently of the view."""
    ids = _ids(loaded, text)
    prefix = "blocks" if loaded.kind == "gpt" else "layers"
    run = loaded.model if loaded.kind == "gpt" else loaded.model.encode  # logits / last hidden state
    with torch.inference_mode(), capture(loaded.model, [f"{prefix}.*.self_attn.weights"]) as cache:
        run(ids)
    return torch.stack([cache[f"{prefix}.{i}.self_attn.weights"][0] for i in range(len(cache))])


@pytest.mark.parametrize("which", ["minilm", "gpt"])
def test_attention_is_the_captured_weights_and_their_detector_scores(which, request):
    loaded = request.getfixturevalue(which)
    text = SENTENCE if which == "minilm" else PROMPT
    out = views.attention(loaded, text)
    w = views.unpack(out["weights"])  # [L, h, T, T]
    want = _weights(loaded, text)
    assert (
        w.shape
        == want.shape
        == (loaded.model.config.num_layers, loaded.model.config.num_heads, *want.shape[2:])
    )
    assert torch.equal(w, want.float())  # the same float32 numbers, bit for bit
    assert (w.sum(-1) - 1).abs().max() < 1e-5  # every query row sums to 1
    if which == "gpt":
        assert out["causal"] and float(torch.triu(w, diagonal=1).abs().max()) == 0.0  # no later key
    scores = score_heads([x[None] for x in want.float()], _ids(loaded, text))
    for name, s in scores.items():
        assert torch.allclose(torch.tensor(out["heads"]["scores"][name]), s.float(), atol=1e-6)
    named = {(n["head"], n["detector"]) for n in out["heads"]["named"]}
    above = {(f"{l}.{h}", n) for n, s in scores.items() for l, h in (s > views.THRESHOLD).nonzero().tolist()}
    assert named == above


def test_tokens_flag_what_the_tokenizer_cannot_represent(minilm, gpt, char_gpt):
    text = "snow \u2603 man"
    out = views.answer("tokens", minilm, {"text": text})
    flagged = [t for t in out["tokens"] if t["unk"]]
    assert out["unknown"] == ["\u2603"] and len(flagged) == 1 and flagged[0]["id"] == minilm.tokenizer.unk_id
    assert text[flagged[0]["start"] : flagged[0]["end"]] == "\u2603"
    # a character vocabulary drops what it lacks: no token for it, but it is still named
    out = views.answer("tokens", char_gpt, {"text": text})
    assert out["unknown"] == ["\u2603"] and len(out["tokens"]) == len(text) - 1
    assert "".join(t["text"] for t in out["tokens"]) == text.replace("\u2603", "")
    # a word vocabulary: an unknown word is one [UNK] token, flagged, the word named
    out = views.answer("tokens", gpt, {"text": "the snow cat"})
    assert [t["unk"] for t in out["tokens"]] == [False, True, False] and out["unknown"] == ["snow"]


def test_next_token_distribution_and_loss(gpt):
    out = views.next_tokens(gpt, PROMPT)
    ids = _ids(gpt, PROMPT)[0]
    with torch.inference_mode():
        probs = gpt.model(ids[None])[0].softmax(-1)  # [T, V]
    for t, pos in enumerate(out["positions"]):
        top = torch.topk(probs[t], views.TOP_K)
        assert [x["id"] for x in pos["top"]] == top.indices.tolist()
        assert [x["p"] for x in pos["top"]] == pytest.approx(top.values.tolist(), abs=1e-6)
    follows = [p["follows"] for p in out["positions"][:-1]]
    assert out["positions"][-1]["follows"] is None
    assert out["loss"] == pytest.approx(-sum(math.log(p) for p in follows) / len(follows), rel=1e-5)


def test_logit_lens_equals_the_library_and_its_last_row_is_the_output(gpt):
    out = views.lens(gpt, PROMPT)
    ids = _ids(gpt, PROMPT)
    lens = logit_lens(gpt.model, ids)[:, 0].softmax(-1)  # [L+1, T, V]
    assert out["first"] == 0 and len(out["cells"]) == gpt.model.config.num_layers + 1
    for layer, row in enumerate(out["cells"]):
        for t, cell in enumerate(row):
            assert [x["id"] for x in cell] == lens[layer, t].topk(views.LENS_K).indices.tolist()
    final = views.next_tokens(gpt, PROMPT)["positions"]
    assert [c[0]["id"] for c in out["cells"][-1]] == [p["top"][0]["id"] for p in final]
    assert all(r == 0 for r in out["final_rank"][-1])


def test_lens_keeps_the_last_positions_that_fit(gpt, monkeypatch):
    monkeypatch.setattr(views, "LENS_FLOATS", 3 * gpt.model.config.vocab_size * 4)  # 4 positions of 3 rows
    out = views.lens(gpt, PROMPT)
    assert out["first"] == len(out["tokens"]) - 4 and len(out["cells"][0]) == 4
    full = logit_lens(gpt.model, _ids(gpt, PROMPT))[:, 0, -4:]  # [L+1, 4, V]
    assert [c[0]["id"] for c in out["cells"][1]] == full[1].argmax(-1).tolist()


def test_generation_three_ways(gpt):
    out = views.generate(gpt, PROMPT, n=12, beam=3, temperature=0.8, top_k=10, seed=7)
    ids = _ids(gpt, PROMPT)
    cached = generate(gpt.model, ids, 12, temperature=0)[0, ids.shape[1] :]  # the KV-cache stream, greedy
    assert out["greedy"]["ids"] == cached.tolist()
    assert out["beam"]["ids"] == beam_search(gpt.model, ids, 3, 12, eos_id=-1).tokens[0].tolist()
    drawn = sample(gpt.model, ids, 12, temperature=0.8, top_k=10, seed=7, eos_id=-1)[0]
    assert out["sample"]["ids"] == drawn.tolist()
    assert views.generate(gpt, PROMPT, n=12, beam=1)["beam"]["ids"] == out["greedy"]["ids"]  # beam 1 = greedy
    assert out["greedy"]["text"] == gpt.tokenizer.decode(out["greedy"]["ids"])


def test_generation_bounds(gpt):
    long = "a " * 90  # 90 of the model's 96 positions: greedy and sampling slide, beam search cannot
    out = views.generate(gpt, long, n=10)
    assert len(out["greedy"]["ids"]) == len(out["sample"]["ids"]) == 10
    assert out["beam"]["ids"] == [] and "at most 6 new tokens" in out["beam"]["note"]
    for field, value in [("n", 0), ("n", 10_000), ("beam", 99), ("seed", -1), ("n", True), ("top_k", 0)]:
        with pytest.raises(ValueError, match=field):
            views.generate(gpt, PROMPT, **{field: value})
    for bad in (0, -1.0, float("nan"), "hot", 11):
        with pytest.raises(ValueError, match="temperature"):
            views.generate(gpt, PROMPT, temperature=bad)


def test_switching_heads_off_equals_zeroing_their_w_o_rows(gpt):
    heads = [(0, 1), (1, 3)]
    out = views.ablate(gpt, PROMPT, ["1.3", [0, 1]])
    ids = _ids(gpt, PROMPT)
    with torch.inference_mode():
        before = gpt.model(ids)[0].log_softmax(-1)  # [T, V]
        with ablate_heads(gpt.model, heads):
            after = gpt.model(ids)[0].log_softmax(-1)
    kl = (before.exp() * (before - after)).sum(-1)
    assert out["off"] == ["0.1", "1.3"]
    assert [p["kl"] for p in out["positions"]] == pytest.approx(kl.tolist(), abs=1e-6)
    assert min(p["kl"] for p in out["positions"]) >= -1e-7  # KL >= 0
    assert out["loss_after"] == pytest.approx(float(F.nll_loss(after[:-1], ids[0, 1:])), rel=1e-5)
    first = out["positions"][0]["top"][0]
    assert first["p_after"] == pytest.approx(float(after[0, first["id"]].exp()), abs=1e-6)
    none = views.ablate(gpt, PROMPT, [])
    assert none["loss_after"] == none["loss_before"] and all(p["kl"] == 0 for p in none["positions"])


def test_encoder_ablation_and_similarity(minilm):
    other = "A tired dog lay down in the shade."
    sim = views.similarity(minilm, SENTENCE, other)
    lib = explain_similarity(minilm.model, minilm.tokenizer.backend, SENTENCE, other)
    assert torch.equal(torch.tensor(sim["terms"], dtype=torch.float64), lib.terms)
    assert sum(map(sum, sim["terms"])) == pytest.approx(sim["cosine"], abs=1e-12)
    vectors = embed(minilm.model, minilm.tokenizer.backend, [SENTENCE, other])
    assert sim["cosine"] == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-5)  # the embeddings' cosine
    out = views.ablate(minilm, SENTENCE, ["0.1", "3.4"], text_b=other)
    assert out["similarity_before"] == pytest.approx(sim["cosine"], abs=1e-12)
    with ablate_heads(minilm.model, [(0, 1), (3, 4)]):
        lib_after = explain_similarity(minilm.model, minilm.tokenizer.backend, SENTENCE, other).cosine
    assert out["similarity_after"] == pytest.approx(lib_after, abs=1e-5)
    assert 0 < out["vector_cosine"] < 1 and len(out["token_cosine"]) == len(out["tokens"])


def test_audit_counts_the_loaded_model(minilm, gpt):
    for loaded in (minilm, gpt):
        out = views.audit(loaded, "The cat sat.")
        assert out["total"] == sum(out["by_group"].values()) == out["module_total"]
        own = sum(p.numel() for p in {id(p): p for p in loaded.model.parameters()}.values())
        assert out["loaded_total"] == own
        d = loaded.model.config.d_model
        assert out["block"] and all(
            s["shape"][:2] == [1, out["seq"]] for s in out["block"] if len(s["shape"]) == 3
        )
        assert [1, out["seq"], d] in [s["shape"] for s in out["block"]]
    assert views.audit(minilm, "x")["total"] == 22_713_216  # all-MiniLM-L6-v2's parameter count


@pytest.mark.parametrize(
    "view, body, message",
    [
        ("attention", {"text": ""}, "text is empty"),
        ("attention", {"text": 3}, "text must be a string"),
        ("tokens", {"text": "\ud800 lone"}, r"text holds a lone surrogate \(U\+D800\)"),
        ("attention", {"text": "x" * (views.MAX_CHARS + 1)}, "at most 2,000"),
        ("attention", {"text": "a " * 200}, "more than 128 tokens"),
        ("attention", {}, "needs text"),
        ("attention", {"text": "a", "path": "/etc/passwd"}, "takes text; not path"),
        ("ablate", {"text": "a", "heads": ["9.9"]}, "not in this model"),
        ("ablate", {"text": "a", "heads": ["1.x"]}, "not in this model"),
        ("ablate", {"text": "a", "heads": "0.1"}, "heads must be a list"),
        ("ablate", {"text": "a", "heads": [[0]]}, "layer.head"),
        ("next", {"text": "a"}, "does not apply"),
        ("similarity", {"text": "a"}, "needs text_b"),
        ("attentoin", {"text": "a"}, "did you mean 'attention'"),
        ("heads", {"text": "a"}, "the heads tab is filled by the attention view"),
        ("ablate", {"text": "a", "heads": [None]}, r"or \[layer, head\], got null$"),
    ],
)
def test_bad_requests_are_one_line_errors(minilm, view, body, message):
    with pytest.raises(ValueError, match=message) as info:
        views.answer(view, minilm, body)
    assert "\n" not in str(info.value)


def test_guide_names_existing_concept_pages():
    from attnlab import concepts

    names = {concepts.href(md) for md in concepts.page_names()}
    guide = views.guide()
    assert set(guide) == set(views.VIEWS) | {"heads"}  # the detector grid comes with attention
    assert all(c["href"] in names and c["title"] for g in guide.values() for c in g["concepts"])
