"""The demo report's building blocks: tables that align numbers and text, links to concept pages."""

from __future__ import annotations

import re

from attnlab.report import page as report


def _cells(page: str, tag: str) -> list[tuple[str, str]]:
    return re.findall(rf"<{tag}( class=\"num\")?>(.*?)</{tag}>", page)


def test_number_columns_are_right_aligned_and_text_columns_left():
    page = report.table(
        ["model", "params", "best induction", "phase change at step", "note"],
        [
            ["gpt-2l", "12,345", "0.91 (1.2)", "400", "ok"],
            ["gpt-1l", "6,000", "0.05 (0.0)", "none", "-0.5"],
        ],
    )
    head = [bool(k) for k, _ in _cells(page, "th")]
    # "none" makes the phase column text; "ok" makes the note column text
    assert head == [False, True, True, False, False]
    body = [bool(k) for k, _ in _cells(page, "td")]
    assert body == head * 2
    assert page.startswith('<div class="table-wrap">')  # a wide table scrolls in its box
    assert "text-align: right" in report.CSS and "td.num" in report.CSS


def test_cells_are_escaped_unless_built_as_html():
    assert "&lt;b&gt;" in report.table(["a"], [["<b>"]])
    linked = report.table(["where"], [[report.link("concepts/index.html", "<all>")]], html_cells=True)
    assert '<a href="concepts/index.html">&lt;all&gt;</a>' in linked


def test_a_section_links_its_concept_pages_by_title():
    pages = ("07-multi-head-attention.md",)
    section = report.Section("s", "S", "c", "x = 1", "<p>out</p>", "i", concepts=pages)
    html = section.to_html()
    assert '<a href="concepts/07-multi-head-attention.html">Multi-head attention and' in html
    assert report.Section("s", "S", "c").to_html().count("Concept pages") == 0
