"""The one way a command reads a text it is given: ``-`` for standard input, the name of a file for
its text, anything else as the text itself (``attnlab generate``, ``explore``, ``heads --tokens``,
``patch``, ``attribute``, ``prune --text``)."""

from __future__ import annotations

import sys
from pathlib import Path

from attnlab.commands._errors import BadInput


def path_kind(value: str) -> str | None:
    """``"file"`` or ``"folder"`` when ``value`` names one on disk, else None (a text: one with a line
    break, a blank one, or a name too long to be a path)."""
    try:
        path = Path(value) if "\n" not in value and value.strip() else None
        return "file" if path and path.is_file() else "folder" if path and path.is_dir() else None
    except OSError:  # a name too long to be a path: text
        return None


def _decoded(stream, name: str, what: str) -> str:
    """The text of the binary ``stream`` (:func:`~attnlab.tasks.text_source.decoded`: read in
    pieces, a NUL byte or invalid UTF-8 refused at once, naming the offset) or a :class:`BadInput`."""
    from attnlab.tasks.text_source import decoded  # (imports torch: not for --help)

    if stream is None:  # a text stream without bytes beneath (a test's StringIO): already text
        return sys.stdin.read()
    try:
        return "".join(decoded(stream, name))
    except ValueError as exc:
        raise BadInput(f"{what}: {exc}") from None


def text_or_file(value: str, what: str, *, blank: bool = True) -> str:
    """``value``'s text: standard input for ``-`` or a file's text when ``value`` names a file (both
    UTF-8, checked), else ``value`` itself, as typed (a file's or standard input's last newline is dropped).
    Empty text, a folder, a binary or non-UTF-8 file are a one-line :class:`BadInput` naming ``what``
    (``"PROMPT"``, ``"--clean"``). Whitespace is text (a GPT continues it) unless ``blank`` is False
    (``explore``: a page of attention needs a token): then it is refused as empty, in the same words."""
    if value == "-":  # its bytes, checked as a file's are (a text stream would pass bad bytes on)
        text, source = _decoded(getattr(sys.stdin, "buffer", None), "standard input", what), "standard input"
    else:
        kind = path_kind(value)
        if kind == "folder":
            raise BadInput(f"{what} names a folder ({value}); give a text, a file, or - for standard input")
        if kind is None:
            text, source = value, None
        else:
            with open(value, "rb") as f:
                text = _decoded(f, value, what)
            source = value
    if source is not None:  # the newline that ends a file's (or echo's) last line is not the text's
        text = text.removesuffix("\n")
    if not text:
        raise BadInput(f"{what} is empty" + (f" ({source} holds no text)" if source else ""))
    if not blank and not text.strip():
        held = f"{source} holds only whitespace" if source else "only whitespace"
        raise BadInput(f"{what} is empty ({held})")
    return text
