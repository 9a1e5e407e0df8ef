"""The five lessons print the Output lines of the Week 1 notes (seed 000, section 5) line for line;
``attnlab lesson`` prints Concept, Code, Output and Interpretation.

The expected lines are copied from the seed documents as literals (facts from the spec). Seed 000
collapses runs of spaces in its outputs; seed 001 quotes the same outputs with their spacing intact,
so lines with aligned columns are taken from seed 001 and also checked against seed 000 up to spacing.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.lessons import LESSONS, Lesson, get_lesson

# Output lines as printed in seed 000 section 5 (spacing as in seed 001 where it quotes them).
NOTES_OUTPUT = {
    "01": [
        "attention shape=(1, 2, 3, 4); row-sum range=1.000000..1.000000",
        "max |NumPy - torch SDPA|=0.00000011",
    ],
    "02": [
        "d_k=  4 Var(q.k)=    4.04 target=  4 scaled_var=1.011",
        "d_k= 16 Var(q.k)=   15.87 target= 16 scaled_var=0.992",
        "d_k= 64 Var(q.k)=   63.83 target= 64 scaled_var=0.997",
        "d_k=256 Var(q.k)=  253.99 target=256 scaled_var=0.992",
    ],
    "03": [
        "input [B,T,d_model]=[2,5,16]",
        "heads [B,h,T,d_k]=[2,4,5,4]; concat=[2, 5, 16]",
        "max |manual - torch.nn.MultiheadAttention|=0.00000009",
    ],
    "04": [
        "MHA formula=1,050,624; FFN formula=2,099,712; two LayerNorms=2,048",
        "encoder-layer formula=3,152,384; torch count=3,152,384; equal=True",
        "Course shorthand: about 3.15M with FFN biases; original paper's base layer count is approximate.",
    ],
    "05": [
        "alignment scores=[ 0.699  0.539 -0.081 -0.522]",
        "alpha=[0.384 0.327 0.176 0.113]; sum=1.000000",
        "context=[ 0.351 -0.993 -0.053]",
    ],
}
# The same lines exactly as seed 000 prints them (whitespace runs collapsed by the document).
SEED000_COLLAPSED = {
    "02": [
        "d_k= 4 Var(q.k)= 4.04 target= 4 scaled_var=1.011",
        "d_k= 16 Var(q.k)= 15.87 target= 16 scaled_var=0.992",
        "d_k= 64 Var(q.k)= 63.83 target= 64 scaled_var=0.997",
        "d_k=256 Var(q.k)= 253.99 target=256 scaled_var=0.992",
    ],
    "05": [
        "alignment scores=[ 0.699 0.539 -0.081 -0.522]",
        "alpha=[0.384 0.327 0.176 0.113]; sum=1.000000",
        "context=[ 0.351 -0.993 -0.053]",
    ],
}
# Lines whose number is a floating-point discrepancy: may differ from the notes, must stay < 1e-6.
DISCREPANCY = re.compile(r"^(max \|.+\|)=(\d+\.\d+)$")
TITLES = {
    "01": "Attention From Scratch",
    "02": "Dot Product Variance",
    "03": "Multihead Shape Check",
    "04": "Encoder Parameter Count",
    "05": "Additive Attention",
}
# a line of the notes' original code that each lesson runs beside attnlab (seed 000 section 5)
NOTES_CODE = {
    "01": "np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)",
    "02": "np.sum(q*k, axis=1)",
    "03": "weights = torch.softmax(qh @ kh.transpose(-2, -1) / dh**0.5, dim=-1)",
    "04": "mha = 4*d*d + 4*d",
    "05": "np.tanh(enc @ W + dec @ U) @ v",
}


@pytest.fixture(scope="module")
def outputs() -> dict[str, list[str]]:
    return {n: lesson.run() for n, lesson in LESSONS.items()}


def _squash(line: str) -> str:
    return re.sub(r"\s+", " ", line)


def test_lessons_are_01_to_05_with_the_notes_titles():
    assert list(LESSONS) == ["01", "02", "03", "04", "05"]
    assert {n: les.title for n, les in LESSONS.items()} == TITLES
    assert all(isinstance(les, Lesson) and les.number == n for n, les in LESSONS.items())


@pytest.mark.parametrize("number", list(NOTES_OUTPUT))
def test_lesson_prints_the_notes_output_line_for_line(number, outputs):
    got, expected = outputs[number], NOTES_OUTPUT[number]
    assert len(got) >= len(expected)
    for line, want in zip(got[: len(expected)], expected):
        m_want = DISCREPANCY.match(want)
        if m_want:  # the same text, a floating-point figure below 1e-6
            m_got = DISCREPANCY.match(line)
            assert m_got is not None and m_got.group(1) == m_want.group(1), line
            assert float(m_got.group(2)) < 1e-6
        else:
            assert line == want
    for line in got[len(expected) :]:  # anything extra is a clearly marked attnlab check
        assert line.startswith("attnlab check: ")


@pytest.mark.parametrize("number", list(SEED000_COLLAPSED))
def test_lesson_output_equals_seed_000_up_to_spacing(number, outputs):
    expected = SEED000_COLLAPSED[number]
    assert [_squash(line) for line in outputs[number][: len(expected)]] == expected


def test_attnlab_check_lines_report_agreement_with_the_original_calls(outputs):
    # every "max |attnlab... - original|=x" check line stays below 1e-6
    checks = [line for lines in outputs.values() for line in lines if "max |attnlab" in line]
    assert len(checks) >= 4
    for line in checks:
        numbers = [float(x) for x in re.findall(r"=(\d+\.\d+(?:e[-+]\d+)?)", line)]
        assert numbers and max(numbers) < 1e-6, line
    assert "equal=True" in outputs["04"][3] and "total=3,152,384" in outputs["04"][3]
    weights = 4 * 512 * 512 + 2 * 512 * 2048  # the notes' "weights only", one layer
    assert f"4d^2+2df={weights:,} (six layers {6 * weights:,})" in outputs["04"][4]
    assert f"with biases and norms, six layers={6 * 3_152_384:,}" in outputs["04"][4]


@pytest.mark.parametrize("number", list(NOTES_CODE))
def test_code_shown_is_the_code_run_and_holds_both_versions(number):
    code = LESSONS[number].code
    assert NOTES_CODE[number] in code  # the notes' original call ...
    assert "ref." in code  # ... next to attnlab's
    assert code.startswith("def ") and "return" in code


def test_lesson_05_maps_the_blocks_w_and_u_onto_ref_names():
    lesson = LESSONS["05"]
    assert "W_a=U, U_a=W" in lesson.code
    assert "opposite" in lesson.interpretation and "W_a" in lesson.interpretation


@pytest.mark.parametrize("given,expected", [("1", "01"), ("01", "01"), (5, "05"), (" 3 ", "03")])
def test_get_lesson_accepts_numbers(given, expected):
    assert get_lesson(given).number == expected


@pytest.mark.parametrize("bad", ["6", "00", "x", ""])
def test_get_lesson_rejects_unknown(bad):
    with pytest.raises(ValueError, match=rf"\bcode block {re.escape(repr(bad))};"):
        get_lesson(bad)


# --- the CLI -------------------------------------------------------------------------------------------


def test_cli_lesson_prints_concept_code_output_interpretation_in_order():
    result = CliRunner().invoke(cli, ["lesson", "05"])
    assert result.exit_code == 0, result.output
    text = result.output
    positions = [
        text.index(h)
        for h in (
            "Week 1 code block 5: Additive Attention",
            "\nConcept\n",
            "\nCode\n",
            "\nOutput\n",
            "\nInterpretation\n",
        )
    ]
    assert positions == sorted(positions)
    output_block = text[text.index("\nOutput\n") : text.index("\nInterpretation\n")]
    assert [line.strip() for line in output_block.splitlines()[2:5]] == NOTES_OUTPUT["05"]
    assert "A decoder query scores encoder states and forms a normalized context." in text


def test_cli_lesson_all_runs_every_lesson_and_json_carries_the_output():
    result = CliRunner().invoke(cli, ["lesson", "--all", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [d["number"] for d in data] == ["01", "02", "03", "04", "05", "w19-1", "w19-2"]
    for d in data[:5]:
        expected = NOTES_OUTPUT[d["number"]]
        plain = [w for w in expected if not DISCREPANCY.match(w)]
        assert [line for line in d["output"][: len(expected)] if not DISCREPANCY.match(line)] == plain
        assert d["code"] == LESSONS[d["number"]].code and d["interpretation"]


def test_cli_lesson_list():
    result = CliRunner().invoke(cli, ["lesson", "--list"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert [line[:2] for line in lines[:5]] == ["01", "02", "03", "04", "05"]  # then w19-1, w19-2
    assert all(TITLES[line[:2]] in line for line in lines[:5]) and len(lines) == 7


@pytest.mark.parametrize(
    "args,needle",
    [
        (["lesson", "09"], "unknown Week 1 code block '09'; choose one of 01, 02, 03, 04, 05"),
        (["lesson"], "give exactly one of"),
        (["lesson", "01", "--all"], "give exactly one of"),
    ],
)
def test_cli_bad_lesson_exits_2_with_one_line(args, needle):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    message = result.output.strip()
    assert needle in message and len(message.splitlines()) == 1
    assert "Traceback" not in result.output


def test_code_blocks_are_named_as_the_week_1_notes_blocks():
    assert [les.name for les in LESSONS.values()] == [f"Week 1 code block {i}" for i in range(1, 6)]
    result = CliRunner().invoke(cli, ["lesson", "3"])  # the old spellings 3 and 03 both still work
    assert result.output.splitlines()[0] == "Week 1 code block 3: " + LESSONS["03"].title
    assert CliRunner().invoke(cli, ["lesson", "03"]).output == result.output
    help_text = " ".join(CliRunner().invoke(cli, ["lesson", "--help"]).output.split())
    assert "Run code block NUMBER (01-05) of the Week 1 notes on attention" in help_text
    assert "The seven Week 19 lessons are 'attnlab study'" in help_text
