"""The study path drawn as text (``attnlab study``) and as one self-contained HTML page (``--html``).

The page follows the explorer page's safety rules (:mod:`attnlab.viz.explorer`): a strict
Content-Security-Policy with no network (``default-src 'none'``), the one style allowed by its
hash, no script at all, and every piece of text, the learner's file names and their code's error
messages included, HTML-escaped. Each lesson links its concept pages, which ``attnlab study --html``
writes as HTML into ``concepts/`` beside the page (:func:`attnlab.concepts.write_pages`).
"""

from __future__ import annotations

import html

from attnlab import concepts as concept_pages
from attnlab.practice.path import CONCEPTS_HOW, COURSE, DONE_WHEN, LESSONS, MILESTONE
from attnlab.viz.explorer import _sha256

_STYLE = (
    "body{font:15px/1.45 system-ui,sans-serif;max-width:56rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.6rem}code{background:#f3f3f3;padding:0 .2rem}"
    ".done{color:#17692b}.todo{color:#9a5b00}.fail{color:#a11}li{margin:.35rem 0}"
    "table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.2rem .5rem;text-align:left}"
)


def _command(text: str) -> str:
    """A lesson's command, a Week 1 code block named as one: ``attnlab lesson 05 (Week 1 code block 5)``."""
    head, _, number = text.rpartition(" ")
    if head != "attnlab lesson":
        return text
    from attnlab.lessons import get_lesson

    return f"{text} ({get_lesson(number).name})"


def _mixed_quiz(state: dict) -> str:
    """The quizzes taken without ``--topic``: their best score, or how to take one."""
    best = state["mixed_quiz"]
    return f"best {best}" if best else "none taken yet"


def render_text(state: dict) -> str:
    """``attnlab study``: progress through the lessons, the practice, the milestone and what next."""
    done = sum(n["ticked"] for n in state["lessons"])
    out = [
        f"attnlab study: {COURSE}",
        f"Done when: {DONE_WHEN}",
        "",
        f"Week 19 lessons ({done}/{len(LESSONS)} ticked; tick one once you could explain it: "
        "attnlab study tick N)",
        f"Concept pages ('read:'): {CONCEPTS_HOW}",
    ]
    for row, lesson in zip(state["lessons"], LESSONS):
        quiz = ", ".join(f"{t} best {s}" for t, s in row["quiz"].items())
        out.append(f"  [{'x' if row['ticked'] else ' '}] {lesson.number}. {lesson.title}: {lesson.summary}")
        out.append(f"        read: concept {', '.join(c.removesuffix('.md') for c in lesson.concepts)}")
        run = f"run: {'; '.join(map(_command, lesson.commands))}; " if lesson.commands else ""
        out.append(f"        {run}myths: attnlab myths {', '.join(map(str, lesson.myths))}")
        if lesson.quiz_topics:
            topics = ", ".join(f"--topic {t}" for t in lesson.quiz_topics)
            out.append(f"        quiz: attnlab quiz {topics}" + (f" ({quiz})" if quiz else ""))
    out += ["", f"Quiz on every topic (attnlab quiz without --topic): {_mixed_quiz(state)}"]
    out += ["", "Practice"]
    for p in state["practice"]:
        status = "not graded" if not p["graded"] else ("passed" if p["passed"] else "not passed yet")
        latest = f", latest {p['latest']}" if p["latest"] else ""
        out.append(f"  {p['level']:<8} {p['name']:<10} {p['title']}: {status}{latest}")
    out += [
        "",
        f"Milestone: {MILESTONE}: {'done' if state['milestone'] else 'not yet'} "
        "(attnlab practice check block FILE)",
        "",
        f"Next: {state['next']}",
    ]
    return "\n".join(out)


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _read(names: tuple[str, ...], folder: str | None) -> str:
    """The lesson's concept pages: links into ``folder`` (beside the page), or their file names."""
    if folder is None:
        return ", ".join(f"<code>docs/concepts/{_e(c)}</code>" for c in names)
    return ", ".join(
        f'<a href="{_e(concept_pages.href(c, folder))}">{_e(concept_pages.page_title(c))}</a>' for c in names
    )


def render_html(state: dict, latest: dict, concepts: str | None = concept_pages.FOLDER) -> str:
    """The week as one self-contained page: progress, links to the concept pages in the folder
    ``concepts`` beside it (``None``: their file names as text), the latest practice results."""
    parts = [
        f"<h1>{_e(COURSE)}</h1>",
        f"<p>Done when: {_e(DONE_WHEN)}</p>",
        "<h2>Week 19 lessons</h2>",
        "<ol>",
    ]
    for row, lesson in zip(state["lessons"], LESSONS):
        mark = '<span class="done">explained</span>' if row["ticked"] else '<span class="todo">to do</span>'
        quiz = ", ".join(f"{t}: best {s}" for t, s in row["quiz"].items())
        parts.append(
            f"<li><b>{_e(lesson.title)}</b> ({mark}): {_e(lesson.summary)}<br>"
            f"read {_read(lesson.concepts, concepts)}; "
            + (
                f"run {', '.join(f'<code>{_e(_command(c))}</code>' for c in lesson.commands)}; "
                if lesson.commands
                else ""
            )
            + "myths "
            f"<code>{_e(', '.join(map(str, lesson.myths)))}</code>"
            + (f"; quiz <code>{_e(', '.join(lesson.quiz_topics))}</code>" if lesson.quiz_topics else "")
            + (f" ({_e(quiz)})" if quiz else "")
            + "</li>"
        )
    parts += [
        "</ol>",
        "<h2>Quiz on every topic</h2>",
        f"<p><code>attnlab quiz</code> without <code>--topic</code>: {_e(_mixed_quiz(state))}</p>",
    ]
    parts += ["<h2>Practice</h2>", "<table><tr><th>level</th><th>exercise</th><th>status</th></tr>"]
    for p in state["practice"]:
        status = "not graded" if not p["graded"] else ("passed" if p["passed"] else "not passed yet")
        parts.append(
            f"<tr><td>{_e(p['level'])}</td><td>{_e(p['title'])} (<code>{_e(p['name'])}</code>)</td>"
            f"<td>{_e(status)}{_e(', latest ' + p['latest']) if p['latest'] else ''}</td></tr>"
        )
    parts.append("</table>")
    for name, last in latest.items():
        parts.append(
            f"<h2>Latest {_e(name)} check: {_e(last['score'])}/{_e(last['total'])} "
            f"(<code>{_e(last['file'])}</code>, {_e(last['at'])})</h2><ul>"
        )
        for r in last["detail"]:
            cls, word = ("done", "pass") if r.get("passed") else ("fail", "FAIL")
            msg = f": {_e(r.get('message'))}" if r.get("message") else ""
            parts.append(f'<li><span class="{cls}">{word}</span> {_e(r.get("title"))}{msg}</li>')
        parts.append("</ul>")
    parts += [
        f"<h2>Milestone</h2><p>{_e(MILESTONE)}: {'done' if state['milestone'] else 'not yet'}</p>",
        f"<h2>Next</h2><p>{_e(state['next'])}</p>",
    ]
    csp = (
        f"default-src 'none'; style-src {_sha256(_STYLE)}; img-src 'none'; base-uri 'none'; "
        "form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        f"<title>attnlab study: Week 19</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )
