"""One way to read a command's text: '-' for standard input, a file's name for its text, else the text
(attnlab.commands._text.text_or_file, behind generate, explore, heads, patch, attribute and prune)."""

import io
import re
import sys

import pytest

from attnlab.commands._errors import BadInput
from attnlab.commands._text import text_or_file


def test_a_file_is_read_and_a_text_is_itself(tmp_path):
    f = tmp_path / "prompt.txt"
    f.write_bytes("\ufeffOnce upon\r\na time\n".encode())
    assert text_or_file(str(f), "PROMPT") == "Once upon\na time"  # BOM and CRLF as training reads them
    assert text_or_file("just words", "PROMPT") == "just words"
    assert text_or_file("   ", "PROMPT") == "   "  # whitespace is text (a GPT continues it), as in a file
    (tmp_path / "spaces.txt").write_text("   \n")
    assert text_or_file(str(tmp_path / "spaces.txt"), "PROMPT") == "   "


def test_whitespace_alone_is_refused_where_blank_is_not_text(tmp_path, monkeypatch):
    """``explore`` (blank=False): whitespace alone is empty, in the words an empty text gets."""
    (tmp_path / "ws.txt").write_text(" \t\n\n")
    with pytest.raises(BadInput, match=r"^SENTENCE\b.*\bempty\b.*\bwhitespace\)$"):
        text_or_file("  ", "SENTENCE", blank=False)
    with pytest.raises(BadInput, match=r"^SENTENCE is empty \(.*ws.txt holds only whitespace\)$"):
        text_or_file(str(tmp_path / "ws.txt"), "SENTENCE", blank=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    with pytest.raises(BadInput, match=r"^SENTENCE\b.*\bempty\b.*\bstandard input\b.*\bwhitespace\)$"):
        text_or_file("-", "SENTENCE", blank=False)
    assert text_or_file(" a ", "SENTENCE", blank=False) == " a "


def test_standard_input(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("from a pipe\n"))
    assert text_or_file("-", "TEXT") == "from a pipe"
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with pytest.raises(BadInput, match=r"^TEXT\b.*\bempty\b.*\bstandard input\b.*\bno text\)$"):
        text_or_file("-", "TEXT")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"PROMPT is empty \(.*empty.txt holds no text\)"),
        (b"\n", r"PROMPT is empty"),
        (b"ab\x00cd", r"PROMPT: .* is a binary file \(a NUL byte at offset 2\)"),
        (b"caf\xe9", r"PROMPT: .* is not valid UTF-8: byte b'\\xe9' at offset 3"),
    ],
)
def test_bad_files_are_one_line(tmp_path, content, message):
    f = tmp_path / "empty.txt"
    f.write_bytes(content)
    with pytest.raises(BadInput, match=message):
        text_or_file(str(f), "PROMPT")


def test_a_folder_is_refused_not_taken_as_the_text(tmp_path):
    with pytest.raises(BadInput, match=rf"^--tokens\b.*\bfolder\b.*{re.escape(str(tmp_path))}"):
        text_or_file(str(tmp_path), "--tokens")


def test_attribute_reads_its_text_from_standard_input(text_run):
    from click.testing import CliRunner

    from attnlab.cli import cli

    args = ["attribute", str(text_run), "--target", "a", "--json"]
    piped = CliRunner().invoke(cli, [*args[:2], "-", *args[2:]], input="ROMEO:\nqo zeb, qo\n")
    typed = CliRunner().invoke(cli, [*args[:2], "ROMEO:\nqo zeb, qo", *args[2:]])
    # before, "-" became a tuple of lines here and the command ended in a TypeError
    assert piped.exit_code == 0 and typed.exit_code == 0, piped.output
    assert piped.output == typed.output


@pytest.mark.parametrize(
    "content, message",
    [
        (b"caf\xe9 au lait", r"^PROMPT: standard input is not valid UTF-8: byte b'\\xe9' at offset 3"),
        (
            b"\x7fELF\x02\x01\x01\x00\x00",
            r"^PROMPT: standard input is a binary file \(a NUL byte at offset 7\)",
        ),
    ],
)
def test_bad_bytes_on_standard_input_are_refused_as_a_files_are(monkeypatch, content, message):
    """Standard input is read as bytes and checked like a file (it reached the tokenizer as lone
    surrogates: TypeError: TextInputSequence must be str)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(content), errors="surrogateescape"))
    with pytest.raises(BadInput, match=message):
        text_or_file("-", "PROMPT")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\ufeffna\u00efve\r\nline\n".encode())))
    assert text_or_file("-", "PROMPT") == "na\u00efve\nline"  # BOM and CRLF as a file's


def test_generate_refuses_binary_standard_input_in_one_line(text_run):
    from click.testing import CliRunner

    from attnlab.cli import cli

    for data in (b"\xff\xfe\x00\x01binary", b"ROMEO: caf\xe9"):
        result = CliRunner().invoke(cli, ["generate", str(text_run), "-", "--max-new", "2"], input=data)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert (
            result.output.startswith("Error: PROMPT: standard input is")
            and len(result.output.splitlines()) == 1
        )
