"""The Week 19 course page's two code blocks as lessons (``attnlab lesson w19-1``, ``w19-2``): the
code shown holds the page's lines as the page writes them, and the output is what running them
gives (the page prints none), checked here against attnlab's own block and attention."""

from __future__ import annotations

import re

from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.lessons import ALL_LESSONS, LESSONS, WEEK19_LESSONS, get_lesson
from attnlab.lessons.week19_block import BLOCK_CODE
from tests.docs.test_citations import FILES, SEEDS

PAGE_EINSUM = (
    "scores = einsum('bhqd,bhkd->bhqk', Q, K)",
    "out = einsum('bhqk,bhkd->bhqd', weights, V)",
)


def _page() -> str:
    return (SEEDS / FILES["the Week 19 course page"]).read_text(encoding="utf-8")


def test_registered_beside_the_week_1_code_blocks():
    assert list(WEEK19_LESSONS) == ["w19-1", "w19-2"] and list(LESSONS) == ["01", "02", "03", "04", "05"]
    assert list(ALL_LESSONS) == [*LESSONS, *WEEK19_LESSONS]
    assert [les.name for les in WEEK19_LESSONS.values()] == ["Week 19 code block 1", "Week 19 code block 2"]
    assert get_lesson("W19-2") is WEEK19_LESSONS["w19-2"]


def test_the_code_shown_is_the_pages():
    page, code = _page(), WEEK19_LESSONS["w19-1"].code
    for line in BLOCK_CODE.splitlines():  # every line of the page's class Block, as written, runs
        assert line in page and line in code
    einsum = WEEK19_LESSONS["w19-2"].code
    for line in PAGE_EINSUM:
        assert line in page and line.replace("einsum", "torch.einsum") in einsum


def test_block_lesson_output():
    out = get_lesson("w19-1").run()
    assert out[1] == "Block(d=32, n_heads=4): x [2, 7, 32] -> [2, 7, 32]"
    d = 32
    assert out[2] == (
        f"parameters: attention={4 * d * d + 4 * d:,} (4d^2+4d); MLP={8 * d * d + 5 * d:,} (8d^2+5d); "
        f"two LayerNorms={4 * d} (4d); total={12 * d * d + 13 * d:,}; MLP share=0.66"
    )
    diff = float(re.search(r"\|=(\d+\.\d+)", out[3]).group(1))
    assert diff < 1e-12 and out[3].endswith("parameters equal=True")
    assert out[4].endswith(": True") and all(line.startswith("attnlab check: ") for line in out[3:])


def test_einsum_lesson_output():
    out = get_lesson("w19-2").run()
    assert out[1] == "scores=[2, 4, 5, 5]; weights=[2, 4, 5, 5]; out=[2, 4, 5, 8]"
    assert out[2] == "row-sum range=1.000000..1.000000; weight above the diagonal=0.0"
    figures = [float(x) for line in out[3:] for x in re.findall(r"=(\d+\.\d+)", line)]
    assert len(figures) == 3 and max(figures) < 1e-6


def test_cli_runs_and_lists_them():
    result = CliRunner().invoke(cli, ["lesson", "w19-2"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Week 19 code block 2: Attention in einsum\nConcept\n")
    assert "sqrt(d_k)" in result.output and "is_causal" in result.output
    listed = CliRunner().invoke(cli, ["lesson", "--list"]).output.splitlines()
    assert [line.split()[0] for line in listed] == list(ALL_LESSONS)
    bad = CliRunner().invoke(cli, ["lesson", "w19-9"])
    assert bad.exit_code == 2 and "'w19-9'" in bad.output and "w19-1, w19-2" in bad.output
