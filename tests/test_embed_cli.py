"""`attnlab embed TEXT... [--json]` with the real MiniLM."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.models import embed, load_pretrained

TEXTS = ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."]


@pytest.mark.isa  # its printed bounds and exact symmetry were once right on AVX-512 only
def test_json_gives_norms_and_the_cosine_matrix():
    result = CliRunner().invoke(cli, ["embed", *TEXTS, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["texts"] == TEXTS and data["dim"] == 384 and data["tokens"] == [9, 7, 9]
    vectors = torch.tensor(data["embeddings"])  # [3, 384]
    model, tokenizer = load_pretrained("minilm")
    torch.testing.assert_close(vectors, embed(model, tokenizer, TEXTS), rtol=0, atol=1e-6)
    torch.testing.assert_close(torch.tensor(data["norms"]), torch.ones(3), rtol=0, atol=1e-6)
    cos = torch.tensor(data["cosine"])
    torch.testing.assert_close(cos, vectors @ vectors.T, rtol=0, atol=1e-6)
    torch.testing.assert_close(cos, cos.T, rtol=0, atol=0)
    assert cos[0, 1] > 0.8 and abs(cos[0, 2]) < 0.1  # paraphrase vs unrelated


def test_human_output_is_a_table():
    result = CliRunner().invoke(cli, ["embed", *TEXTS[:2]])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "model minilm: 6 layers, d_model 384, mean pooling, L2-normalised"
    assert lines[3].split()[:3] == ["1", "1.000000", "9"] and lines[3].endswith(TEXTS[0])
    assert "cosine similarity" in lines
    row1 = lines[lines.index("cosine similarity") + 2].split()
    assert row1[0] == "1" and row1[1] == "1.0000" and 0.8 < float(row1[2]) < 0.9


def test_bad_arguments_exit_2_with_one_line():
    runner = CliRunner()
    bad_model = runner.invoke(cli, ["embed", "hello", "--model", "no-such-model"])
    assert bad_model.exit_code == 2
    lines = bad_model.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: 'no-such-model'") and "'minilm'" in lines[0]
    assert runner.invoke(cli, ["embed"]).exit_code == 2
    bad_batch = runner.invoke(cli, ["embed", "hello", "--batch-size", "0"])
    assert bad_batch.exit_code == 2 and re.fullmatch(r"Error: --batch-size\b.*\b0\n", bad_batch.output)
    bad_chunk = runner.invoke(cli, ["embed", "--input", "x.txt", "--output", "y.npy", "--chunk-size", "0"])
    assert bad_chunk.exit_code == 2 and re.fullmatch(r"Error: --chunk-size\b.*\b0\n", bad_chunk.output)


def test_docs_page_examples_print_what_the_page_says(doc_examples):
    """docs/pretrained.md: its python block prints its output block, its `attnlab embed` console
    block is what the command prints."""
    page = doc_examples(Path(__file__).resolve().parents[1] / "docs" / "pretrained.md")
    decoders = page.text.index("## Decoder checkpoints")  # tests/models/hf/test_docs.py runs those
    page.pairs = [pair for pair in page.pairs if page.text.index(pair[0]) < decoders]
    assert len(page.pairs) == 2
    page.assert_each_prints_its_output()
    console = re.search(r"```console\n\$ attnlab embed (.*?)\n(.*?)```", page.text, re.S)
    result = CliRunner().invoke(cli, ["embed", *shlex.split(console.group(1))])
    assert result.exit_code == 0 and result.output == console.group(2)


def test_text_the_vocabulary_lacks_is_named_on_stderr():
    result = CliRunner().invoke(cli, ["embed", "😀🚀 ✓ a cat", "a dog", "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == (
        "warning: 1 of 2 sentences hold text the vocabulary cannot represent, embedded as [UNK]: '😀🚀', '✓'"
    )
    assert json.loads(result.stdout)["tokens"][0] == 6  # [CLS] [UNK] [UNK] a cat [SEP]
    model, tokenizer = load_pretrained("minilm")
    stats: dict = {}
    embed(model, tokenizer, ["😀 x", "plain", "é ✓"], stats=stats)
    assert stats["unknown"] == 2 and stats["unknown_words"] == ["😀", "✓"]  # é is in the vocabulary


def test_explain_says_when_a_sentence_is_truncated():
    long = "word " * 300  # 300 words -> 302 tokens, cut at MiniLM's 256
    result = CliRunner().invoke(cli, ["embed", "--explain", "a cat", long])
    assert result.exit_code == 0, result.output
    assert re.search(r"\b1 of 2 sentences\b.*\b256 tokens\b", result.stderr), result.stderr
    assert "the sum of 4 x 256 token-pair terms" in result.stdout  # [CLS] a cat [SEP]


def test_input_counts_blank_lines_as_empty_and_warns_on_an_empty_file(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("   \n\t \nhello\n")
    result = CliRunner().invoke(cli, ["embed", "--input", str(blank), "--output", str(tmp_path / "b.npy")])
    assert result.exit_code == 0, result.output
    assert "wrote 3 x 384 float32 embeddings" in result.stdout and "2 empty" in result.stdout
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = CliRunner().invoke(cli, ["embed", "--input", str(empty), "--output", str(tmp_path / "e.npy")])
    assert result.exit_code == 0, result.output
    assert f"warning: {empty} holds no sentences: {tmp_path / 'e.npy'} has 0 rows" in result.stderr


def test_field_on_plain_text_is_refused_and_resume_with_nothing_to_resume_is_said(tmp_path):
    """--field on plain text was ignored; --resume with no interrupted run started afresh silently."""
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\n")
    out = tmp_path / "o.npy"
    for args in (["--input", str(src), "--output", str(out), "--field", "x"], ["one", "--field", "x"]):
        result = CliRunner().invoke(cli, ["embed", *args])
        lines = result.output.splitlines()
        assert (
            result.exit_code == 2 and len(lines) == 1 and "--field" in lines[0] and "plain text" in lines[0]
        )
    assert not out.exists()
    result = CliRunner().invoke(
        cli, ["embed", "--input", str(src), "--output", str(out), "--resume", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert f"({out}.parts " in result.stderr and "afresh" in result.stderr, result.stderr
    assert out.is_file()


def test_standard_input_among_texts_is_read_in_bounded_lines_and_binary_is_refused():
    """``embed -`` reads one text per non-empty line through the shared line reader: a NUL byte
    (``/dev/zero``, a binary file), a line past the limit or bytes that are not UTF-8 are one line
    naming standard input and the line, exit 2, never a MemoryError or a TypeError."""
    from attnlab.tasks.text_source import MAX_LINE_BYTES

    runner = CliRunner()
    cases = {
        b"\0" * 1000: "line 1",
        b"a cat\n" + b"x" * (MAX_LINE_BYTES + 10): "line 2",
        b"hello\n\xff\xfe\n": "line 2",
    }
    for data, line in cases.items():
        done = runner.invoke(cli, ["embed", "-"], input=data)
        assert done.exit_code == 2 and "standard input" in done.output and line in done.output, done.output
    done = runner.invoke(cli, ["embed", "-", "--json"], input=b"a cat\n\n  \nthe dog\n")
    assert done.exit_code == 0 and json.loads(done.stdout)["texts"] == ["a cat", "the dog"]
