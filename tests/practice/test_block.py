"""The block grader: correct pre-norm and post-norm drawings pass; missing, misplaced and mis-shaped
arrows are each named with their line; syntax errors name the line. The expected arrows are the
shapes `attnlab audit shapes` measures on the real module, checked here against the module's own
forward pass."""

from __future__ import annotations

import pytest
import torch

from attnlab.practice.block import block_starter, choose_sizes, expected_block, grade_block, parse_block

HEAD = "block: {norm}\nsizes: B=2 T=5 d=48 h=4 d_ff=192\n"
PRE = """x -> [B, T, d]
LayerNorm -> [B, T, d]
attention -> [B, T, d]
residual -> [B, T, d]
LayerNorm -> [B, T, d]
Linear -> [B, T, 4d]
GELU -> [B, T, d_ff]
Linear -> [B, T, d]
residual -> [B, T, d]
"""
POST = """x -> [2, 5, 48]
Q -> [B, T, d]
split heads -> [B, h, T, d/h]
scores -> [B, h, T, T]
weights -> [B, h, T, T]
attention -> [B, T, d]
add -> [B, T, d]
LN -> [B, T, d]
MLP -> [B, T, d]
residual -> [B, T, d]
LayerNorm -> [B, T, d]
"""


def _failures(text: str) -> list:
    return [r for r in grade_block(text).results if not r.passed]


def test_correct_drawings_pass_when_declared():
    for norm, body in (("pre-norm", PRE), ("post-norm", POST)):
        report = grade_block(HEAD.format(norm=norm) + body)
        assert report.score == report.total > 0, [r.message for r in report.results if not r.passed]


def test_expected_shapes_are_the_real_modules():
    """The MLP's hidden width and the block output: audit_shapes against the GPT block run directly."""
    from attnlab.audit.build import build
    from attnlab.audit.config import ModelSpec

    sizes = {"B": 3, "T": 7, "d": 24, "h": 2, "d_ff": 40}
    exp = expected_block("pre-norm", sizes)
    torch.manual_seed(0)
    gpt = build(
        ModelSpec.from_sizes(
            model="gpt",
            d_model=24,
            heads=2,
            d_ff=40,
            layers=1,
            vocab=16,
            max_len=7,
            norm="pre",
            activation="gelu",
        )
    )
    seen = {}
    block = gpt.blocks[0]
    block.register_forward_hook(lambda m, i, o: seen.setdefault("out", o[0] if isinstance(o, tuple) else o))
    block.ffn.linear1.register_forward_hook(lambda m, i, o: seen.setdefault("hidden", o))
    gpt(torch.randint(0, 16, (3, 7)))
    assert [e.shape for e in exp if e.kind == "linear"][0] == tuple(seen["hidden"].shape) == (3, 7, 40)
    assert exp[-1].kind == "residual" and exp[-1].shape == tuple(seen["out"].shape)
    assert [
        e.kind
        for e in exp
        if e.kind not in ("q", "k", "v", "split", "scores", "weights", "heads_out", "concat")
    ] == [
        "input",
        "layernorm",
        "attention",
        "residual",
        "layernorm",
        "linear",
        "activation",
        "linear",
        "residual",
    ]


def test_norm_after_the_residual_in_a_pre_norm_block_is_named():
    drawn = POST.replace("Q -> [B, T, d]\nsplit heads -> [B, h, T, d/h]\n", "")
    fails = _failures(HEAD.format(norm="pre-norm") + drawn)
    assert (
        fails[0].mistake == "misplaced"
        and "post-norm block but it declares 'block: pre-norm'" in fails[0].message
    )
    assert any("LayerNorm after the residual" in r.message for r in fails)


def test_no_residual_around_the_mlp_is_named():
    drawn = PRE[: PRE.rindex("residual")]
    fails = _failures(HEAD.format(norm="pre-norm") + drawn)
    assert [r.message for r in fails] == ["missing: the residual around the MLP [2, 5, 48]"]


def test_wrong_shape_on_an_arrow_names_its_line():
    drawn = PRE.replace("Linear -> [B, T, 4d]", "Linear -> [B, T, d]")
    fails = _failures(HEAD.format(norm="pre-norm") + drawn)
    assert [r.message for r in fails] == [
        "line 8: Linear has [2, 5, 48]; the real module gives [2, 5, 192] here"
    ]
    drawn = POST.replace("scores -> [B, h, T, T]", "scores -> [B, T, T]")
    fails = _failures(HEAD.format(norm="post-norm") + drawn)
    assert [r.message for r in fails] == ["line 6: scores has [2, 5, 5]; the real module gives [2, 4, 5, 5]"]


def test_missing_layernorm_and_extra_component():
    drawn = PRE.replace("LayerNorm -> [B, T, d]\nLinear", "Linear")
    assert [r.message for r in _failures(HEAD.format(norm="pre-norm") + drawn)] == [
        "missing: LayerNorm before the MLP [2, 5, 48]"
    ]
    drawn = PRE + "LayerNorm -> [B, T, d]\n"
    fails = _failures(HEAD.format(norm="pre-norm") + drawn)
    assert len(fails) == 1 and fails[0].mistake == "extra" and "line 12" in fails[0].message


@pytest.mark.parametrize(
    "text, message",
    [
        ("sizes: B=2 T=5 d=48 h=4 d_ff=192\nx -> [B, T, d]\n", "lacks a 'block: pre-norm'"),
        ("block: pre-norm\nx -> [B, T, d]\n", "lacks its 'sizes:"),
        ("block: sideways\n", "line 1: block must be pre-norm or post-norm"),
        (
            HEAD.format(norm="pre-norm") + "x -> [B, T, d]\nLayerNorm [B, T, d]\n",
            "line 4: expected 'component -> [shape]'",
        ),
        (
            HEAD.format(norm="pre-norm") + "x -> [B, T, d]\nAtention -> [B, T, d]\n",
            "line 4: unknown component 'Atention'",
        ),
        (HEAD.format(norm="pre-norm") + "x -> B, T, d\n", "line 3: the shape must be written like [B, T, d]"),
        (HEAD.format(norm="pre-norm") + "x -> [B, T, D]\n", "line 3: unknown size 'D'"),
        ("block: pre-norm\nsizes: B=2 T=5 d=50 h=4 d_ff=192\n", "line 2: d=50 is not divisible by h=4"),
        (HEAD.format(norm="pre-norm"), "draws no arrows"),
    ],
)
def test_syntax_errors_name_the_line(text, message):
    with pytest.raises(ValueError, match=None) as info:
        parse_block(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_starter_parses_with_its_sizes():
    sizes = choose_sizes(7)
    assert sizes["d"] % sizes["h"] == 0 and sizes["d_ff"] == 4 * sizes["d"]
    drawing = parse_block(block_starter(sizes))
    assert drawing.norm == "pre-norm" and drawing.sizes == sizes and len(drawing.arrows) == 1


@pytest.mark.parametrize(
    "size, message",
    [
        ("d/0", "the dimension 'd/0' divides by 0"),
        ("d/5", r"the dimension 'd/5' is not a whole size \(36 / 5\)"),
    ],
)
def test_a_size_that_cannot_be_is_refused(size, message):
    drawing = f"block: pre-norm\nsizes: B=4 T=9 d=36 h=3 d_ff=144\nx -> [B, T, {size}]\n"
    with pytest.raises(ValueError, match=f"line 3: {message}"):
        parse_block(drawing)


def test_the_course_pages_norm_names_grade_as_layernorms():
    """audit shapes names a GPT block's norms ln1, ln2 (the Week 19 page's ``class Block``): the grader
    reads both those and the paper's LN_i as the block's norms, and a learner may write either."""
    from attnlab.audit.shapes import layer_norm_name

    assert [layer_norm_name(s) for s in ("norm ln1 (pre-norm, into FFN)", "norm LN_2 (add & norm)")] == [
        "ln1",
        "LN_2",
    ]
    assert layer_norm_name("final LayerNorm ln_f") is None and layer_norm_name("norm weight") is None
    drawn = PRE.replace("LayerNorm", "ln1", 1).replace("LayerNorm", "ln2", 1)
    report = grade_block(HEAD.format(norm="pre-norm") + drawn)
    assert report.score == report.total == 9
    assert [r.title for r in report.results if r.function == "layernorm"] == [
        "LayerNorm before the attention (line 4)",
        "LayerNorm before the MLP (line 7)",
    ]
