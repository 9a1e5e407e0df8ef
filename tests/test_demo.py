"""``attnlab demo`` on a tiny budget: one self-contained page with every section, in the notes' order."""

import dataclasses
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.bottleneck import Settings
from attnlab.experiments.demo import build_demo
from attnlab.experiments.induction import DEMO

TINY = Settings(
    min_len=3,
    max_len=6,
    bucket_width=2,
    target_params=4000,
    steps=10,
    batch_size=16,
    train_size=200,
    eval_per_bucket=4,
    warmup=3,
)
TINY_INDUCTION = dataclasses.replace(DEMO, steps=20, eval_every=10, eval_size=16)
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
    "explorer",
    "next",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    result = build_demo(out, settings=TINY, progress=False, induction=TINY_INDUCTION)
    return out, result, (out / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_every_section_is_built_in_order(demo):
    _, result, page = demo
    assert list(result["sections"]) == SECTIONS
    assert all(isinstance(v, float) for v in result["sections"].values()), result["sections"]
    assert "could not be built" not in page
    positions = [page.index(f'<section id="{key}">') for key in SECTIONS]
    assert positions == sorted(positions)


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
        assert ref.startswith(("data:image/png;base64,", "#", "explorer")), ref
    assert not re.search(r"https?://", page)
    assert "<script" not in page
    assert page.count('<img src="data:image/png;base64,') == 1 + 3 + 1  # the plot, three heatmaps, induction
    # the report shows real numbers: the encoder layer's 3,152,384 parameters (4d^2 + 2df + f + 9d)
    assert "3,152,384" in page
    assert (out / "explorer.html").is_file() and (out / "explorer-trained.html").is_file()
    for name in ("explorer.html", "explorer-trained.html"):
        assert not re.search(r'(?:src|href)\s*=\s*"https?://', (out / name).read_text(encoding="utf-8"))


def test_bad_demo_arguments_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "d"), "--steps", "0", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == ["Error: --steps must be a positive integer, got 0"]
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "file"), "--quiet"])
    assert result.exit_code == 2 and "is not a folder" in result.output


def test_every_next_step_of_the_report_exists():
    """The report's "Where to go next" names commands and pages: each command runs, each page exists."""
    import shlex
    from pathlib import Path

    from click.testing import CliRunner

    from attnlab.cli import cli
    from attnlab.experiments.demo import NEXT_STEPS

    root = Path(__file__).resolve().parents[1]
    for what, where, _ in NEXT_STEPS:
        if where.startswith("attnlab "):
            args = shlex.split(where)[1:]
            if args[0] in ("train", "explore", "quiz"):
                args = args[:1] + ["--help"]  # real work or a prompt: the command and its options exist
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, (what, result.output)
        else:
            assert (root / where).exists(), (what, where)
