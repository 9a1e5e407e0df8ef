"""A corpus is read in pieces, never whole: the streamed reading equals the whole-text definition
(:func:`split_tail`, :func:`decode_text`) whatever the chunk size, a bad byte past the first chunk is
named at its offset, and the memory a text run's preparation takes does not grow with the corpus."""

import io
import tracemalloc

import numpy as np
import pytest

from attnlab.tasks import text_source
from attnlab.tasks.text_source import decode_text, decoded, open_source, read_corpus, split_tail
from attnlab.training.text_data import stage_corpus


@pytest.fixture
def small_chunks(monkeypatch):
    """Read 7 bytes at a time and hand on pieces of 50 characters: every boundary case is hit."""
    monkeypatch.setattr(text_source, "CHUNK_BYTES", 7)
    monkeypatch.setattr(text_source, "PIECE_CHARS", 50)


def test_streamed_split_equals_the_whole_text_split(tmp_path, small_chunks, play):
    text = "\ufeff" + play(30).replace("\n", "\r\n") + "Ünïcödé — 🙂 ends here.\r\n"
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode("utf-8"))
    whole = decode_text(path.read_bytes(), "t")  # BOM dropped, CRLF -> LF (across chunks too)
    assert "\r" not in whole and not whole.startswith("\ufeff") and whole.endswith("ends here.\n")
    corpus = read_corpus(str(path))
    assert (corpus.train, corpus.val) == split_tail(whole)
    source = open_source(str(path))
    assert source.alphabet == set(whole) and source.train_chars == len(corpus.train)
    pieces = list(source.parts())
    assert max(len(p) for _, p in pieces) <= 50 and [s for s, _ in pieces].count("val") >= 2
    followed = [p for (split, p), (after, _) in zip(pieces, pieces[1:]) if split == after]
    assert followed and all(p.endswith("\n") for p in followed)  # cut after a line break


@pytest.mark.parametrize(
    "tail,message",
    [
        (b"ok \xff more", "is not valid UTF-8: byte b'\\xff' at offset {n}"),
        (b"ok \xe9t\xe9", "is not valid UTF-8: byte b'\\xe9' at offset {n}"),
        (b"ok \x00 more", "is a binary file (a NUL byte at offset {n})"),
        (b"ok \xe2\x80", "is not valid UTF-8: byte b'\\xe2' at offset {n}"),  # cut short at the end
    ],
)
def test_a_bad_byte_past_the_first_chunk_is_named_at_its_offset(tail, message, small_chunks):
    head = "ROMEO: é — ".encode() * 20  # multi-byte characters cut by the 7-byte chunks
    with pytest.raises(ValueError) as err:
        list(decoded(io.BytesIO(head + tail), "f.txt"))
    assert str(err.value).startswith("f.txt " + message.format(n=f"{len(head) + 3:,}"))


def test_empty_and_whitespace_files_are_refused(tmp_path, small_chunks):
    for data in (b"", b" \r\n\t\n" * 5):
        (tmp_path / "e.txt").write_bytes(data)
        with pytest.raises(ValueError, match=r"\be\.txt is empty\b"):
            open_source(str(tmp_path / "e.txt"))


def _peak_staging(tmp_path, name: str, text: str) -> int:
    """Peak bytes Python and NumPy allocate while the corpus is read, tokenized and written."""
    path = tmp_path / f"{name}.txt"
    path.write_text(text, encoding="utf-8")
    (tmp_path / name).mkdir()
    tracemalloc.start()
    try:
        meta = stage_corpus({"source": str(path), "context": 16}, tmp_path / name)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert meta["train_tokens"] + meta["val_tokens"] == len(text)
    ids = np.fromfile(tmp_path / name / "train.bin", dtype=np.uint16)
    assert ids.size == meta["train_tokens"] and ids.max() < meta["vocab_size"]
    return peak


def test_memory_does_not_grow_with_the_corpus(tmp_path, monkeypatch, play):
    monkeypatch.setattr(text_source, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(text_source, "PIECE_CHARS", 1 << 16)
    base = play(400)  # about 20,000 characters
    small = _peak_staging(tmp_path, "small", base * 25)  # 0.5 MB
    large = _peak_staging(tmp_path, "large", base * 400)  # 8 MB: 16 times more
    assert large < 1.5 * small  # pieces of 64K characters, whatever the corpus size
    assert large < 8_000_000 / 2  # (measured: 2.7 MB, most of it the 1 MiB blocks of the sha256)
