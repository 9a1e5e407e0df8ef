"""Markdown with ``$...$`` and ``$$...$$`` LaTeX -> HTML with MathML, offline.

The concept pages are CommonMark (plus pipe tables) whose mathematics is LaTeX between dollar signs.
:func:`to_html` parses them with ``markdown-it-py`` and turns each formula into a ``<math>`` element
with ``latex2mathml``; browsers draw MathML natively, so the pages need no script, font or network.
A display formula is a ``$$`` line, the LaTeX, and a closing ``$$`` line; an inline formula is
``$...$`` inside a paragraph (never inside code). A formula the converter cannot translate is a
``ValueError`` naming it, so a page never ships raw LaTeX.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from latex2mathml.converter import convert
from markdown_it import MarkdownIt

# symbols latex2mathml leaves as their command name after a size prefix (\Big\lfloor)
_SYMBOLS = {r"\lfloor": "\u230a", r"\rfloor": "\u230b", r"\lceil": "\u2308", r"\rceil": "\u2309",
            r"\langle": "\u27e8", r"\rangle": "\u27e9"}  # fmt: skip
_LEFTOVER = re.compile(r">([^<]*\\[A-Za-z]+[^<]*)<")


def mathml(latex: str, display: bool) -> str:
    """One LaTeX formula as a ``<math>`` element (``display="block"`` for a display formula)."""
    try:
        out = convert(latex.strip(), display="block" if display else "inline")
    except Exception as exc:  # the converter raises its own exception kinds
        raise ValueError(f"cannot convert the formula {latex.strip()!r}: {exc}") from None
    for command, char in _SYMBOLS.items():
        out = out.replace(f">{command}<", f">{char}<")
    left = _LEFTOVER.search(out)
    if left:
        raise ValueError(f"the formula {latex.strip()!r} keeps the LaTeX command {left.group(1)!r}")
    return out


def _display_rule(state, start: int, end: int, silent: bool) -> bool:
    """Block rule: a line that is ``$$``, the formula's lines, a closing ``$$`` line."""
    first = state.src[state.bMarks[start] + state.tShift[start] : state.eMarks[start]]
    if first.strip() != "$$":
        return False
    line = start + 1
    while line < end:
        text = state.src[state.bMarks[line] + state.tShift[line] : state.eMarks[line]]
        if text.strip() == "$$":
            break
        line += 1
    else:
        return False  # no closing line: not a formula
    if not silent:
        token = state.push("math_block", "math", 0)
        token.block = True
        token.content = state.getLines(start + 1, line, state.tShift[start], False)
        token.map = [start, line + 1]
    state.line = line + 1
    return True


def _inline_rule(state, silent: bool) -> bool:
    """Inline rule: ``$formula$`` (a ``$`` followed by a space is left as text)."""
    src, pos = state.src, state.pos
    if src[pos] != "$" or pos + 1 >= state.posMax or src[pos + 1] in " $":
        return False
    close = src.find("$", pos + 1, state.posMax)
    if close < 0 or src[close - 1] == " ":
        return False
    if not silent:
        token = state.push("math_inline", "math", 0)
        token.content = src[pos + 1 : close]
    state.pos = close + 1
    return True


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.block.ruler.before("fence", "math_block", _display_rule)
    md.inline.ruler.before("escape", "math_inline", _inline_rule)
    md.add_render_rule("math_block", lambda self, tokens, i, o, e: mathml(tokens[i].content, True) + "\n")
    md.add_render_rule("math_inline", lambda self, tokens, i, o, e: mathml(tokens[i].content, False))
    return md


def to_html(
    text: str,
    link: Callable[[str], str | None] = lambda href: href,
    image: Callable[[str], str] = lambda src: src,
) -> str:
    """The HTML body of the Markdown ``text``; ``link(href)`` rewrites each link target, and a link
    it maps to ``None`` is shown as its text (in a ``span`` titled with the original target);
    ``image(src)`` rewrites each image's source (e.g. to a ``data:`` URI)."""
    md = _parser()
    tokens = md.parse(text)
    for token in tokens:
        children = token.children or []
        for i, child in enumerate(children):
            if child.type == "image":
                child.attrSet("src", image(str(child.attrGet("src") or "")))
            if child.type != "link_open":
                continue
            href = str(child.attrGet("href") or "")
            target = link(href)
            if target is None:  # e.g. a source file of the repository: not part of the built pages
                child.tag, child.attrs = "span", {"class": "repo-path", "title": f"in the repository: {href}"}
                close = next(c for c in children[i:] if c.type == "link_close")
                close.tag = "span"
            else:
                child.attrSet("href", target)
    return md.renderer.render(tokens, md.options, {})


def title(text: str) -> str:
    """The page's first ``#`` heading as plain text (its formulas' LaTeX reduced to their symbols)."""
    for line in text.splitlines():
        if line.startswith("# "):
            plain = re.sub(r"\$([^$]+)\$", lambda m: _plain_latex(m.group(1)), line[2:])
            return plain.replace("`", "").strip()
    return ""


def _plain_latex(latex: str) -> str:
    return re.sub(r"\\sqrt\{([^}]*)\}", "\u221a\\1", latex).replace("\\", "")


def escape(text: str) -> str:
    """HTML-escaped text (quotes too)."""
    return html.escape(text, quote=True)
