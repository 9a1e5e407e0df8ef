"""`attnlab heads` on inputs a user trial broke: a small BERT folder (a vocabulary of 300 ids and 32
positions: the repeat probe draws from the ids that exist, and its default length fits), and a text
longer than the model reads (no false unknown-character warning; one line saying it was cut), for
MiniLM, a BERT folder and a GPT-2 folder (transformers' ``save_pretrained``, the test-only oracle)."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.interp.scan import FIRST_WORDPIECE, _probe_ids, scan_repeat, scan_text
from attnlab.models import load
from attnlab.tasks.tokenize import UnknownCharacterWarning

CORPUS = ["the cat sat on a mat.", "hello world, attention is all you need.", "a dog ran after the cat."] * 20
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LONG = "hello world " * 1200  # 2,400 word pieces


def _wordpiece(vocab=None):
    """A BERT tokenizer: trained on :data:`CORPUS`, or with exactly ``vocab`` (piece -> id)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(
        models.WordPiece(vocab, unk_token="[UNK]") if vocab else models.WordPiece(unk_token="[UNK]")
    )
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    if vocab is None:
        tok.train_from_iterator(
            CORPUS, trainers.WordPieceTrainer(special_tokens=SPECIALS, show_progress=False)
        )
    else:
        tok.add_special_tokens(SPECIALS)
    ids = [(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")]
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=ids)
    return tok


def _bert(directory, tokenizer, vocab_size=300):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    transformers.BertModel(config).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A BERT of 300 ids and 32 positions with a WordPiece tokenizer of about 80 pieces."""
    return _bert(tmp_path_factory.mktemp("bert"), _wordpiece())


@pytest.fixture(scope="module")
def gpt_dir(tmp_path_factory):
    """A GPT-2 of 301 ids and 64 positions with a byte-level BPE tokenizer."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    directory = tmp_path_factory.mktemp("gpt")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=301, n_embd=32, n_layer=2, n_head=2, n_positions=64, bos_token_id=None, eos_token_id=None
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(directory)
    tok.save(str(directory / "tokenizer.json"))
    return directory


def _heads(*args):
    result = CliRunner().invoke(cli, ["heads", *map(str, args)])
    return result


# ------------------------------------------------------------------ the repeat probe of a small BERT
def test_small_bert_repeat_probe_draws_ids_it_has(bert_dir):
    result = _heads(bert_dir, "--length", "10", "--batch", "2", "--json")
    assert result.exit_code == 0, result.output
    (data,) = json.loads(result.output)
    assert len(data["tokens"]) == 21 and data["tokens"][0] == "[CLS]"
    tok = load(bert_dir).tokenizer.backend
    ids = [tok.token_to_id(t) for t in data["tokens"][1:]]
    assert None not in ids and min(ids) >= len(SPECIALS)  # ordinary pieces, never a special token
    assert ids[:10] == ids[10:] and len(set(ids[:10])) == 10


def test_small_bert_default_length_fits_its_positions(bert_dir):
    (scan,) = scan_repeat(str(bert_dir), batch=2)
    assert len(scan.tokens) == 31  # L = (32 - 1) // 2 = 15
    result = _heads(bert_dir, "--quiet")
    assert result.exit_code == 0 and "encoder self-attention, 31 tokens" in result.output, result.output


def test_small_bert_explicit_length_that_does_not_fit(bert_dir):
    result = _heads(bert_dir, "--length", "16")
    assert result.exit_code == 2, result.output
    assert re.search(r"\blength 16\b.*\b33 positions\b.*\b32\b", result.output), result.output


def test_vocabulary_too_small_to_draw_from_is_one_clear_error(tmp_path):
    pieces = {**{t: i for i, t in enumerate(SPECIALS)}, "a": 5, "b": 6, "c": 7, "d": 8}
    directory = _bert(tmp_path, _wordpiece(pieces), vocab_size=9)
    result = _heads(directory, "--length", "5")
    assert result.exit_code == 2, result.output
    assert re.search(r"\blength 5\b.*\b9 ids\b.*\bhas 3\b", result.output), result.output
    (scan,) = scan_repeat(str(directory), batch=1)  # the default length fits the vocabulary too
    assert len(scan.tokens) == 1 + 2 * 3


def test_minilm_probe_ids_are_the_ones_it_always_drew():
    loaded = load("minilm")
    bos, table = _probe_ids(loaded, loaded.model.config.vocab_size)
    assert bos == 101 and table[1] == FIRST_WORDPIECE and table == list(range(999, 30522))


# ------------------------------------------------------------------ a text longer than the model reads
def test_unknown_check_reads_only_what_a_truncating_tokenizer_read():
    tok = load("minilm").tokenizer  # its tokenizer.json cuts at 256 (the sentence-embedding length)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownCharacterWarning)
        assert len(tok.encode(LONG)) == 256
    assert tok.unknown(LONG) == [] and tok.unknown("the cat sat on a mat. " * 60) == []
    assert tok.unknown("☃ " + LONG) == ["☃"]  # in the part read: still named
    assert tok.unknown(LONG + " ☃") == []  # cut off, not read


def test_unknown_check_after_truncation_from_the_left(bert_dir):
    tok = load(bert_dir).tokenizer
    tok.backend.enable_truncation(max_length=8, direction="left")
    assert tok.unknown("☃ " + "the cat " * 20) == []
    assert tok.unknown("the cat " * 20 + " ☃") == ["☃"]


def test_minilm_long_text_warns_it_is_cut(tmp_path):
    (tmp_path / "long.txt").write_text(LONG)
    result = _heads("minilm", "--tokens", tmp_path / "long.txt", "--json")
    assert result.exit_code == 0, result.output
    assert "cannot represent" not in result.stderr
    assert re.search(r"^Warning: .*\b2402 tokens\b.*\bminilm\b.*\b512\b", result.stderr, re.M), result.stderr
    (data,) = json.loads(result.stdout)
    assert len(data["tokens"]) == 512 and data["tokens"][0] == "[CLS]" and data["tokens"][-1] == "[SEP]"


def test_text_cut_puts_the_tokenizers_truncation_back():
    loaded = load("minilm")
    with pytest.warns(UserWarning, match=r"\b2402 tokens\b.*\bminilm\b.*\b512\b"):
        (scan,) = scan_text(LONG, loaded)
    assert len(scan.tokens) == 512 and loaded.tokenizer.backend.truncation["max_length"] == 256


def test_text_that_fits_is_not_cut(bert_dir):
    text = "the cat " * 15  # [CLS] + 30 + [SEP] = 32 tokens: exactly the positions
    result = _heads(bert_dir, "--tokens", text, "--json")
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.output
    assert len(json.loads(result.stdout)[0]["tokens"]) == 32


@pytest.mark.parametrize("name, total, limit", [("bert", 2402, 32), ("gpt", None, 64)])
def test_folders_cut_a_long_text_with_the_same_warning(name, total, limit, bert_dir, gpt_dir, tmp_path):
    directory = {"bert": bert_dir, "gpt": gpt_dir}[name]
    (tmp_path / "long.txt").write_text(LONG)
    result = _heads(directory, "--tokens", tmp_path / "long.txt", "--json")
    assert result.exit_code == 0, result.output
    total = total or len(load(directory).tokenizer.encode(LONG.strip()))
    want = f"Warning: the text has {total} tokens; {directory} reads only the first {limit} (its positions)"
    assert want in result.stderr and "cannot represent" not in result.stderr
    assert len(json.loads(result.stdout)[0]["tokens"]) == limit


# ------------------------------------- Python speaks Python, the command its flags (trial B, #26)
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A GPT and a Transformer as ``save()`` writes them: no tokenizer beside either."""
    import torch

    from attnlab.models import GPT, GPTConfig
    from attnlab.models.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("saved")
    GPT(GPTConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32)).save(
        root / "gpt"
    )
    cfg = TransformerConfig(src_vocab=20, tgt_vocab=20, d_model=16, num_heads=2, d_ff=32)
    Transformer(cfg).save(root / "tr")
    return root


def test_scan_refusals_name_no_command_line_flag(saved):
    gpt, tr = saved / "gpt", saved / "tr"
    cases = [  # each refusal names the model and what is wrong with it: the file, the kind, the length
        (lambda: scan_text("the cat", str(gpt)), [str(gpt), "tokenizer.json"]),
        (lambda: scan_repeat(str(tr)), [str(tr), "'transformer'"]),
        (lambda: scan_repeat(str(gpt), length=16), ["length 16", "33 positions", "of 32"]),
    ]
    for call, named in cases:
        with pytest.raises(ValueError) as err:
            call()
        text = str(err.value)
        assert all(value in text for value in named) and "\n" not in text and "--" not in text, text


def test_the_command_adds_its_flags_to_the_way_out(saved):
    gpt, tr = saved / "gpt", saved / "tr"
    result = _heads(gpt, "--tokens", "the cat")
    assert result.exit_code == 2, result.output
    assert "tokenizer.json" in result.output and "(--tokens repeat, the default)" in result.output
    result = _heads(tr)
    assert result.exit_code == 2, result.output
    assert "'transformer'" in result.output and "(--tokens TEXT)" in result.output
    result = _heads(gpt, "--length", "16")
    assert result.exit_code == 2 and re.search(r"\blength 16\b.*\b33 positions\b", result.output)
