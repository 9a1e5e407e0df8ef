"""``attnlab demo`` on a tiny budget: one self-contained page with every section, in the notes' order."""

import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.report.tour import check_demo_folder

SECTIONS = [
    "lesson-01",
    "lesson-02",
    "lesson-03",
    "lesson-04",
    "lesson-05",
    "audit",
    "practice",
    "bottleneck",
    "heatmaps",
    "heads",
    "language-model",
    "explorer",
    "next",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``attnlab demo --quick`` as a user runs it into a log: a real process, stdout a pipe (not a
    TTY), so progress is plain lines, never redrawn bars."""
    out = tmp_path_factory.mktemp("demo") / "report"
    done = subprocess.run(
        [sys.executable, "-m", "attnlab", "demo", "--quick", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stdout
    return out, done.stdout, (out / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_every_section_is_built_in_order(demo):
    _, _, page = demo
    assert re.findall(r'<section id="([\w-]+)">', page) == SECTIONS
    assert "could not be built" not in page


@pytest.mark.slow
def test_the_log_of_a_run_into_a_pipe_is_short_and_counts_what_it_wrote(demo):
    out, log, page = demo
    lines = log.splitlines()
    assert "\r" not in log and len(lines) <= 15, log  # a redrawn bar would write hundreds of lines
    assert "warning" not in log
    printed = re.fullmatch(r"report: (.+)  \((\d+) sections, built in \d+ s\)", lines[-1])
    assert printed, lines[-1]
    assert printed.group(1) == str(out / "index.html")
    assert int(printed.group(2)) == page.count("<section id=") == len(SECTIONS)


@pytest.mark.slow
def test_sections_read_concept_code_output_interpretation(demo):
    _, _, page = demo
    for key in SECTIONS[:8]:
        body = page.split(f'<section id="{key}">')[1].split("</section>")[0]
        heads = re.findall(r"<h3>(\w+)</h3>", body)
        assert heads == ["Concept", "Code", "Output", "Interpretation"], (key, heads)


@pytest.mark.slow
def test_page_is_self_contained(demo):
    out, _, page = demo
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page)
    assert refs, "the page links nothing"
    for ref in refs:
        assert ref.startswith(("data:image/png;base64,", "#", "explorer", "concepts/")), ref
        if ref.startswith(("explorer", "concepts/")):
            assert (out / ref.split("#")[0]).is_file(), ref
    assert not re.search(r"https?://", page)
    assert "<script" not in page
    # the plot, three heatmaps, induction, and the language model's decoding and faithfulness plots
    assert page.count('<img src="data:image/png;base64,') == 1 + 3 + 1 + 2
    # the report shows real numbers: the encoder layer's 3,152,384 parameters (4d^2 + 2df + f + 9d)
    assert "3,152,384" in page
    assert (out / "explorer.html").is_file() and (out / "explorer-trained.html").is_file()
    for name in ("explorer.html", "explorer-trained.html"):
        assert not re.search(r'(?:src|href)\s*=\s*"https?://', (out / name).read_text(encoding="utf-8"))


@pytest.mark.slow
def test_tables_are_html_and_concept_pages_are_linked(demo):
    """The induction results are an HTML table (no Markdown pipes); every section that draws on a
    concept links its rendered page, and the rendered pages sit beside the report."""
    from attnlab import concepts

    out, _, page = demo
    assert "| ---" not in page and "---:" not in page
    heads = page.split('<section id="heads">')[1].split("</section>")[0]
    assert heads.count("<table>") == 3 and "<th>model</th>" in heads
    assert '<th class="num">loss repeat</th>' in heads
    for key in ("lesson-01", "audit", "bottleneck", "heads", "language-model", "explorer"):
        body = page.split(f'<section id="{key}">')[1].split("</section>")[0]
        assert re.search(r'Concept pages: <a href="concepts/\d\d-[a-z0-9-]+\.html">', body), key
    assert sorted(p.name for p in (out / "concepts").iterdir()) == sorted(
        ["index.html"] + [concepts.html_name(n) for n in concepts.page_names()]
    )
    explorer = (out / "explorer.html").read_text(encoding="utf-8")
    assert '"href":"concepts/07-multi-head-attention.html"' in explorer
    assert "docs/concepts/README.md" not in page  # a link to the rendered index instead
    assert '<a href="concepts/index.html">concepts/index.html</a>' in page


@pytest.mark.slow
@pytest.mark.browser
def test_report_in_chromium_aligns_numbers_and_fits_the_window(demo, browser):
    out, _, _ = demo
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "index.html").resolve().as_uri())
    align = page.evaluate(
        "[...document.querySelectorAll('#heads td, #next td')].map(c => "
        "[c.className, getComputedStyle(c).textAlign])"
    )
    assert align and all((k == "num") == (a == "right") for k, a in align), align
    assert {a for _, a in align} == {"left", "right"}
    # wide tables scroll inside their box: the page itself never scrolls sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    with page.expect_navigation():
        page.click("#next a[href='concepts/index.html']")
    assert page.evaluate("document.querySelectorAll('a[href$=\".html\"]').length") >= 16
    page.close()


def test_bad_demo_arguments_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "d"), "--steps", "0", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == ["Error: --steps must be a positive integer, got 0"]
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "file"), "--quiet"])
    assert result.exit_code == 2 and "is not a folder" in result.output


def test_a_folder_of_other_files_is_not_overwritten(demo, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "index.html").write_text("my precious notes")
    result = CliRunner().invoke(cli, ["demo", "--out", str(mine), "--quick", "--quiet"])
    assert result.exit_code == 2 and (mine / "index.html").read_text() == "my precious notes"
    assert result.output.strip() == (
        f"Error: --out {mine} holds files that are not a demo's (index.html); the demo would overwrite "
        "them: choose an empty or new folder, or pass --overwrite"
    )
    out = demo[0]
    assert (out / ".attnlab-demo").is_file()  # a demo's own folder (also one interrupted) is written again
    (out / ".attnlab-demo").unlink()  # an older demo's folder is known by its index.html
    check_demo_folder(out)


def test_every_next_step_of_the_report_exists():
    """The report's "Where to go next" names commands and pages: each command runs, each page exists."""
    import shlex
    from pathlib import Path

    from click.testing import CliRunner

    from attnlab.cli import cli
    from attnlab.report.tour import NEXT_STEPS

    root = Path(__file__).resolve().parents[1]
    for what, where, _ in NEXT_STEPS:
        if where.startswith("attnlab "):
            args = shlex.split(where)[1:]
            if args[0] in ("train", "explore", "quiz", "serve"):
                args = args[:1] + ["--help"]  # real work or a prompt: the command and its options exist
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, (what, result.output)
        else:
            assert (root / where).exists(), (what, where)


# the report's layout in Chromium at a wide and a narrow window, built from its cheap parts: the real
# contents titles and the real practice section (no experiment is trained)
WIDTHS = {1280: 2, 800: 1}  # window width -> columns of the contents list


@pytest.fixture(scope="module")
def contents_page(tmp_path_factory):
    from attnlab.lessons import LESSONS
    from attnlab.report import page as report
    from attnlab.report.language_model import TITLE
    from attnlab.report.tour import TITLES, _practice_section

    parts = [report.Section(f"lesson-{n}", f"{x.name}: {x.title}") for n, x in sorted(LESSONS.items())]
    for key in SECTIONS[len(parts) :]:
        parts.append(
            _practice_section() if key == "practice" else report.Section(key, TITLES.get(key, TITLE))
        )
    path = tmp_path_factory.mktemp("report") / "index.html"
    path.write_text(report.render("attnlab demo", "parts", parts), encoding="utf-8")
    return path


def _overlaps(a: list[float], b: list[float]) -> bool:
    """Whether two boxes ``[left, top, right, bottom]`` share an area (touching edges do not count)."""
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


@pytest.mark.browser
@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_contents_entries_do_not_overlap_and_practice_lines_wrap(contents_page, browser, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(contents_page.as_uri())
    # every line box of every entry: its number and its (possibly wrapped) title
    entries = page.evaluate(
        "[...document.querySelectorAll('nav li')].map(li => [...li.querySelectorAll('span, a')]"
        ".flatMap(e => [...e.getClientRects()].map(r => [r.left, r.top, r.right, r.bottom])))"
    )
    assert len(entries) == len(SECTIONS) and all(entries)
    for i, boxes in enumerate(entries):
        for j in range(i + 1, len(entries)):
            hits = [(a, b) for a in boxes for b in entries[j] if _overlaps(a, b)]
            assert not hits, (width, i + 1, j + 1, hits)
    nav = page.evaluate("(r => [r.left, r.right])(document.querySelector('nav').getBoundingClientRect())")
    assert all(nav[0] <= box[0] and box[2] <= nav[1] + 0.5 for boxes in entries for box in boxes)
    columns = {round(boxes[0][0]) for boxes in entries}  # each entry's number starts a column
    assert len(columns) == WIDTHS[width], (width, columns)
    # the practice output's long line wraps inside its box: nothing hidden past the edge
    box = page.evaluate(
        "(e => [e.scrollWidth, e.clientWidth])(document.querySelector('#practice pre.output'))"
    )
    assert box[0] <= box[1], (width, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.close()


def test_the_lanes_keep_the_explorer_beside_the_experiment_it_reads(tmp_path):
    """The explorer reads the bottleneck's trained models from memory: both run in this process's lane,
    every other part in the second lane, each part in exactly one."""
    from attnlab.report.tour import MAIN_LANE, _steps

    keys = [key for _, key, _, _ in _steps(tmp_path, None, False, {}, None, None, True)]
    assert MAIN_LANE == {"bottleneck", "explorer"} and MAIN_LANE <= set(keys)
    assert (
        len(keys) == len(set(keys)) == 12
    )  # five lessons, audit, practice, 5 more (heatmaps with bottleneck)


def test_one_core_builds_in_one_lane_two_cores_in_two():
    code = (
        "import os, sys; os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: int(sys.argv[1])])); "
        "from attnlab.report.tour import _lanes; print(*_lanes())"
    )
    lanes = {
        n: subprocess.run([sys.executable, "-c", code, str(n)], capture_output=True, text=True)
        for n in (1, 2)
    }
    assert lanes[1].stdout.split() == ["1", "1"]
    if len(os.sched_getaffinity(0)) >= 2:
        assert lanes[2].stdout.split() == ["2", "1"]
