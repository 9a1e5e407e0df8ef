"""``attnlab.models.load``: one resolver for MiniLM, Hugging Face folders, runs and saved models."""

import hashlib
import re
import warnings

import pytest
import torch

from attnlab.models import GPT, GPTConfig, load
from attnlab.models.load import origin_of
from attnlab.tasks.tokenize import Tokenizer, UnknownCharacterWarning


def _digest(folder):
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_minilm_loads_with_its_tokenizer():
    loaded = load("minilm")
    model, tok = loaded
    assert loaded.origin == "pretrained" and loaded.kind == "bert" and not model.training
    batch = tok(["The cat sat.", "A dog"])
    assert batch["input_ids"].shape == batch["attention_mask"].shape
    assert batch["attention_mask"].sum(1).tolist() == [
        len(tok.encode("The cat sat.")),
        len(tok.encode("A dog")),
    ]
    assert tok.decode(tok.encode("the cat")) == "[CLS] the cat [SEP]"


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hf_folders_load_and_equal_load_hf(hf_dirs, name):
    from attnlab.models.hf import load_hf

    before = _digest(hf_dirs[name])
    loaded = load(hf_dirs[name])
    assert loaded.origin == "hf" and loaded.kind == "gpt" and isinstance(loaded.tokenizer, Tokenizer)
    ids = torch.tensor([loaded.tokenizer.encode("the cat sat on the mat")])
    torch.testing.assert_close(loaded.model(ids), load_hf(hf_dirs[name])(ids), rtol=0, atol=0)
    assert _digest(hf_dirs[name]) == before  # loading never writes


def test_a_saved_model_loads_and_reading_does_not_write(tmp_path):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=8)).eval()
    model.save(tmp_path)
    before = _digest(tmp_path)
    loaded = load(tmp_path)
    ids = torch.tensor([[1, 2, 3]])
    assert loaded.origin == "saved" and loaded.tokenizer is None
    torch.testing.assert_close(loaded.model(ids), model(ids), rtol=0, atol=0)
    assert _digest(tmp_path) == before


def test_bad_sources_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match=rf"^'{re.escape(str(tmp_path / 'nowhere'))}' .*'minilm'"):
        origin_of(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="holds no model"):
        origin_of(tmp_path)
    (tmp_path / "config.json").write_text('{"hidden_size": 3}')
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path / 'config.json'))} .*\bmodel_type\b"):
        origin_of(tmp_path)


def test_unknown_characters_warn_once_naming_each_or_are_refused(hf_dirs):
    tok = load(hf_dirs["gpt2"]).tokenizer  # byte-level BPE: nothing is unknown
    assert tok.unknown("日本 ü") == []
    from attnlab.tasks import CharTokenizer

    chars = CharTokenizer("abc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = chars.encode("abxcy")
    assert ids == [5, 6, 3, 7, 3]
    assert len(caught) == 1 and caught[0].category is UnknownCharacterWarning
    assert "'x' (U+0078), 'y' (U+0079)" in str(caught[0].message)
    with pytest.raises(ValueError, match="'x' \\(U\\+0078\\)"):
        chars.encode("ax", strict=True)
    assert chars.offsets("ab") == [(0, 1), (1, 2)] and chars.tokens([5, 3]) == ["a", "<unk>"]


def test_a_character_vocabulary_names_the_characters_it_drops():
    from attnlab.tasks.text_tokenizer import char_tokenizer
    from attnlab.tasks.tokenize import HFTokenizer

    tok = HFTokenizer(char_tokenizer("hello world"))
    assert tok.unknown("hello 日本 world") == ["日", "本"]
    assert tok.offsets("hé w") == [(0, 1), (2, 3), (3, 4)]  # 'é' dropped, the offsets still true


def test_a_word_piece_vocabulary_names_the_word_it_could_not_spell():
    from tokenizers import Tokenizer as Backend
    from tokenizers import models, pre_tokenizers

    from attnlab.tasks.tokenize import HFTokenizer

    vocab = {"[UNK]": 0, "[PAD]": 1, "bird": 2, "##s": 3, "the": 4}
    backend = Backend(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok = HFTokenizer(backend)
    assert tok.unknown("the birds") == []
    assert tok.unknown("the 🦜 birdsx") == ["🦜", "birdsx"]  # 'b', 'i', ... of birdsx are not unknown
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tok.encode("the 🦜 birdsx") == [4, 0, 0]
    assert [str(w.message) for w in caught] == [
        "characters the tokenizer cannot represent: '🦜' (U+1F99C); words the tokenizer cannot spell from "
        "its pieces: 'birdsx'; encoded as [UNK]"
    ]


def test_characters_a_normaliser_drops_are_said_dropped_not_unk():
    tok = load("minilm").tokenizer  # uncased BERT: accents stripped, zero-width characters removed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = tok.encode("e\u0301 a\u200b \U0001f99c")
    assert tok.tokens(ids) == ["[CLS]", "e", "a", "[UNK]", "[SEP]"]
    assert [str(w.message) for w in caught] == [
        "characters the tokenizer cannot represent: '🦜' (U+1F99C); encoded as [UNK]; characters the "
        "tokenizer cannot represent: '\u0301' (U+0301), '\\u200b' (U+200B); encoded as nothing (dropped)"
    ]
    assert tok.unknown("e\u0301 a\u200b \U0001f99c") == ["🦜", "\u0301", "\u200b"]


def test_a_text_of_characters_the_tokenizer_drops_is_refused_not_read_as_nothing():
    from attnlab.interp.scan import scan_text
    from attnlab.tasks.tokenize import check_reads_something
    from attnlab.viz.explorer import attention_views

    tok = load("minilm").tokenizer
    check_reads_something(tok, "e\u0301")  # an 'e' is read: no error
    check_reads_something(tok, "")  # empty text is the caller's to refuse (it says so in its words)
    gone = "\u0301\u200b"  # the tokenizer keeps [CLS] [SEP] only
    assert tok.tokens(tok.encode(gone, strict=False)) == ["[CLS]", "[SEP]"]
    for run in (lambda: attention_views(gone, "minilm"), lambda: scan_text(gone, "minilm")):
        with pytest.raises(ValueError, match=r"\bdrops every character\b.*\bU\+0301\b"):
            run()
