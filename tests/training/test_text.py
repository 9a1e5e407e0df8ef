"""A GPT on text: the corpus checks, the tokenizers, the token files, bits per character, seeded
windows and exact resumption (library level; the command line is in test_text_cli.py)."""

import json
import math

import numpy as np
import pytest
import torch

from attnlab.decoding import GenerationRequest, stream
from attnlab.decoding.text import decode_engine_for
from attnlab.tasks.text_source import decode_text, read_corpus, split_tail
from attnlab.tasks.text_tokenizer import (
    bpe_tokenizer,
    char_tokenizer,
    char_vocabulary,
    encode_chars,
    unknown_characters,
)
from attnlab.tasks.tokenize import from_file
from attnlab.training import train
from attnlab.training.text_data import TextData, read_meta, window_starts
from attnlab.training.text_export import load_text_run

TINY_GPT = {"d_model": 32, "layers": 1, "heads": 2, "max_len": 32}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, play):
    path = tmp_path_factory.mktemp("text") / "play.txt"
    path.write_text(play() + "Ünïcödé — ends here.\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "is empty"),
        (b" \n\n ", "is empty"),
        (b"abc\x00def", "is a binary file (a NUL byte at offset 3)"),
        (b"caf\xc3\xa9 \xff more", "is not valid UTF-8: byte b'\\xff' at offset 6"),
    ],
)
def test_bad_text_is_refused_by_name(data, message):
    with pytest.raises(ValueError) as err:
        decode_text(data, "notes.txt")
    assert str(err.value).startswith("notes.txt " + message)


def test_holdout_is_the_last_tenth_from_a_line_start():
    text = "".join(f"line {i:03d}\n" for i in range(100))  # 900 characters
    train_text, val = split_tail(text)
    assert train_text + val == text
    assert val.startswith("line 090")  # 10% = 90 characters = the last 10 lines
    assert decode_text(b"\xef\xbb\xbfa\r\nb", "f") == "a\nb"  # BOM dropped, CRLF -> LF


def test_char_tokenizer_reads_back_and_refuses_unknown_characters(tmp_path, play):
    text = play(20)
    tok = char_tokenizer(text)
    tok.save(str(tmp_path / "tokenizer.json"))
    back = from_file(tmp_path / "tokenizer.json")
    vocab = char_vocabulary(back.backend)
    assert vocab is not None and len(vocab) == len(set(text))
    assert back.encode(text) == encode_chars(text, vocab).tolist()  # the fast path = the tokenizer
    assert back.decode(back.encode(text)) == text
    assert unknown_characters("ROMEO: é ž é", vocab) == ["é", "ž"]
    with pytest.raises(ValueError, match=r"'é' \(U\+00E9\)"):
        encode_chars("Romeo é", vocab)


def test_bpe_learns_its_vocabulary_and_round_trips_any_text(play):
    tok = bpe_tokenizer([play(200)], 300)
    assert tok.get_vocab_size() == 300
    assert char_vocabulary(tok) is None  # byte-level: nothing is unknown
    odd = "Ünïcödé 🙂 never seen"
    assert tok.decode(tok.encode(odd).ids) == odd
    assert len(tok.encode("ROMEO:\nlove night")) < len("ROMEO:\nlove night")  # merges were learnt
    with pytest.raises(ValueError, match="at least 257"):
        bpe_tokenizer(["abc"], 100)


def test_window_starts_are_even_and_do_not_overlap():
    starts = window_starts(1001, 100, 50)  # room for 10 windows of 100 + 1 tokens
    assert starts.tolist() == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900]
    assert window_starts(40, 32, 8).tolist() == [0]


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_text_run_files_and_bits_per_character(tmp_path, corpus, tokenizer, text_config):
    params = {"tokenizer": tokenizer} | ({"vocab_size": 300} if tokenizer == "bpe" else {})
    result = train(text_config(corpus, task_params=params), tmp_path / "run", progress=False)
    meta = read_meta(tmp_path / "run")
    text = corpus.read_text(encoding="utf-8")
    _, val = split_tail(text)
    assert meta["val_chars"] == len(val) and meta["train_chars"] == len(text) - len(val)
    val_chars = np.fromfile(tmp_path / "run" / "val-chars.bin", dtype=np.uint16)
    assert int(val_chars.sum()) == len(val)  # every held-out character is counted exactly once
    assert len(val_chars) == meta["val_tokens"]
    evals = [r for r in result.history if "val_loss" in r]
    assert [r["step"] for r in evals] == [10, 20, 30]
    last = evals[-1]
    assert last["val_bpc"] == pytest.approx(
        last["val_loss"] * last["val_tokens"] / math.log(2) / last["val_chars"]
    )
    if tokenizer == "char":
        assert last["val_chars"] == last["val_tokens"] and meta["vocab_size"] == len(set(text))
    else:
        assert last["val_chars"] > last["val_tokens"] and meta["vocab_size"] == 300
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]  # it learns
    state = json.loads(next((tmp_path / "run").glob("ckpt-*/state.json")).read_text())
    assert state["task"]["name"] == "text" and state["task"]["params"]["tokenizer"] == tokenizer


def test_windows_are_a_function_of_seed_and_step(tmp_path, corpus, text_config):
    train(text_config(corpus, steps=1, eval_every=0), tmp_path / "run", progress=False)
    meta = read_meta(tmp_path / "run")
    a = TextData(tmp_path / "run", meta, batch_size=6, seed=3, eval_windows=4)
    b = TextData(tmp_path / "run", meta, batch_size=6, seed=3, eval_windows=4)
    assert all(torch.equal(x, y) for x, y in zip(a.batch(7), b.batch(7)))
    assert not torch.equal(a.batch(7)[0], a.batch(8)[0])
    x, y = a.batch(7)
    assert x.shape == (6, 32) and torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one token
    assert torch.equal(a.batch(7, rank=1, world=2)[0], x[1::2])


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, corpus, text_config):
    config = text_config(corpus, steps=40, ckpt_every=10, model_params={**TINY_GPT, "dropout": 0.1})
    reference = train(config, tmp_path / "whole", progress=False)
    train(config, tmp_path / "cut", progress=False, until=20)
    resumed = train(config, tmp_path / "cut", progress=False, resume=True)
    assert resumed.resumed_from == 20
    ref, got = reference.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(ref[k], got[k]) for k in ref)  # bit for bit
    assert resumed.history == [
        {**r, "elapsed_s": g["elapsed_s"], "tokens_per_s": g["tokens_per_s"]}
        for r, g in zip(reference.history, resumed.history)
    ]


def test_resume_refuses_a_changed_token_file(tmp_path, corpus, text_config):
    config = text_config(corpus, steps=4, eval_every=0)
    train(config, tmp_path / "run", progress=False, until=2)
    ids = tmp_path / "run" / "train.bin"
    data = bytearray(ids.read_bytes())
    data[10] ^= 1
    ids.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"\btrain\.bin\b.*\bsha256\b"):
        train(config, tmp_path / "run", progress=False, resume=True)


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def slide(model, prompt: list[int], request: GenerationRequest) -> list[int]:
    """The new ids of ``request`` (greedy or sampled, its cache and dtype) after ``prompt``."""
    engine = decode_engine_for(model, request)
    rule = {"temperature": request.temperature, "seed": request.seed, "engine": engine}
    return [int(t[0]) for t, _ in stream(model, prompt, request.max_new, request.use_cache, **rule)]


def test_sliding_generation_passes_the_positions(tmp_path, corpus, threads, text_config):
    train(text_config(corpus, steps=30, eval_every=0), tmp_path / "run", progress=False)
    model, tok, _ = load_text_run(tmp_path / "run")
    prompt = tok.encode("ROMEO:\n")
    torch.set_num_threads(1)  # restored by the fixture below
    cached = slide(model, prompt, GenerationRequest(prompt="", max_new=80))
    uncached = slide(model, prompt, GenerationRequest(prompt="", max_new=80, use_cache=False))
    assert len(cached) == 80 > model.config.max_len  # 7 + 80 tokens through 32 positions
    assert cached == uncached  # the cache changes the cost, not the tokens
    draws = [
        (slide(model, prompt, GenerationRequest(prompt="", max_new=40, temperature=1.0, seed=s)))
        for s in (5, 5, 6)
    ]
    assert draws[0] == draws[1] != draws[2]


def test_shakespeare_corpus_holds_out_whole_plays():
    corpus = read_corpus("shakespeare")
    assert corpus.val.count("HAMLET:") > 300 and "HAMLET:" not in corpus.train
    assert "4 whole plays held out" in corpus.holdout


def _worst_gap(model, prompt: list[int], tokens: list[int]) -> float:
    """The largest float32 log-probability gap (nats) between the best token and the chosen one,
    over the steps of a sliding generation: each context is the last max_len ids before the token."""
    limit, gaps, ids = model.config.max_len, [], list(prompt)
    with torch.no_grad():
        for tok in tokens:
            logp = model(torch.tensor([ids[-limit:]]))[0, -1].log_softmax(-1)  # [V], float32
            gaps.append(float(logp.max() - logp[tok]))
            ids.append(tok)
    return max(gaps)


def test_bfloat16_sliding_generation_picks_what_float32_would(tmp_path, corpus, threads, text_config):
    """--dtype bfloat16 on a text run: the decode engine's GEMMs in bfloat16, also once the context
    slides; each greedy token is within 0.05 nats of float32's best given the same context."""
    train(text_config(corpus, steps=30, eval_every=0), tmp_path / "run", progress=False)
    model, tok, _ = load_text_run(tmp_path / "run")
    prompt = tok.encode("ROMEO:\n")
    torch.set_num_threads(1)
    engines, start = [], model.start

    def spy(ids, *args, engine="auto", **kwargs):  # which engine each (re)start of the cache gets
        engines.append(getattr(engine, "dtype", engine))
        return start(ids, *args, engine=engine, **kwargs)

    model.start = spy
    fast = slide(model, prompt, GenerationRequest(prompt="", max_new=80, dtype="bfloat16"))
    del model.start
    assert len(fast) == 80 > model.config.max_len
    assert len(engines) > 1 and set(engines) == {"bfloat16"}  # the first start and every slide
    assert _worst_gap(model, prompt, fast) <= 0.05
    with pytest.raises(ValueError, match=r"^bfloat16\b.*\buse_cache=False$"):
        (
            slide(
                model,
                prompt,
                GenerationRequest(prompt="", max_new=4, dtype="bfloat16", use_cache=False),
            )
        )
