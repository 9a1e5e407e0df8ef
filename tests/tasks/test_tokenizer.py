"""The character tokenizer: fixed special ids, round trips, UNK, EOS handling."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.tasks import BOS, EOS, PAD, SEP, UNK, CharTokenizer, get_task


def test_special_ids():
    tok = CharTokenizer("abc")
    assert (PAD, BOS, EOS, UNK, SEP) == (0, 1, 2, 3, 4)
    assert tok.encode("abc") == [5, 6, 7]
    assert tok.vocab_size == 8
    assert [tok.token(i) for i in range(5)] == ["<pad>", "<bos>", "<eos>", "<unk>", "<sep>"]


@given(st.text(alphabet="abcdefghij", max_size=40))
def test_round_trip(text):
    tok = get_task("reverse").tokenizer
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode([BOS] + tok.encode(text) + [EOS] + tok.encode("abc") + [PAD]) == text


def test_unknown_characters_become_unk():
    tok = CharTokenizer("ab")
    assert tok.encode("axb") == [5, UNK, 6]
    assert tok.decode([5, UNK, 6]) == "a?b"


def test_dates_vocabulary_covers_every_source():
    task = get_task("dates")
    for e in task.sample("train", 500, seed=2):
        assert UNK not in task.tokenizer.encode(e.src + e.tgt)


@pytest.mark.parametrize("symbols,match", [("aa", "repeated"), (["ab"], "single characters")])
def test_bad_alphabet(symbols, match):
    with pytest.raises(ValueError, match=match):
        CharTokenizer(symbols)
