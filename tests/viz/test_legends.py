"""Legends hide no data: the check can fail, and every figure attnlab draws passes it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from attnlab.experiments.bottleneck import QUICK, ModelResult, _plot  # noqa: E402
from attnlab.viz.figures import FIGURES  # noqa: E402
from attnlab.viz.legends import covered_points, place_legend, save_figure  # noqa: E402


def _crowded_axes():
    """Points in every corner and along every edge: no spot inside the axes is free."""
    fig, ax = plt.subplots(figsize=(4, 3))
    xs = [i / 10 for i in range(11)]
    for y in (0.0, 0.5, 1.0):
        ax.plot(xs, [y] * len(xs), "o", label=f"y = {y}")
    for x in (0.0, 0.5, 1.0):
        ax.plot([x] * len(xs), xs, "s", label=f"x = {x}")
    return fig, ax


def test_a_legend_over_the_data_is_detected_and_refused(tmp_path):
    fig, ax = _crowded_axes()
    ax.legend(loc="center")
    problems = covered_points(fig)
    assert len(problems) == 1 and "covers" in problems[0]
    with pytest.raises(ValueError, match="legend covers"):
        save_figure(fig, tmp_path / "bad.png")  # ATTNLAB_CHECK_FIGURES=1 is set by conftest
    assert not (tmp_path / "bad.png").exists()
    plt.close(fig)


def test_place_legend_moves_it_outside_when_no_spot_inside_is_free(tmp_path):
    fig, ax = _crowded_axes()
    legend = place_legend(ax, fontsize=7)
    assert covered_points(fig) == []
    box, axes_box = legend.get_window_extent(), ax.get_window_extent()
    assert box.y1 <= axes_box.y0  # below the axes
    save_figure(fig, tmp_path / "ok.png")
    assert (tmp_path / "ok.png").stat().st_size > 1000
    plt.close(fig)


def test_a_legend_over_a_line_between_two_points_is_detected(tmp_path):
    """A line drawn between two markers is data too: a legend over its middle, clear of both
    markers, is refused (the bottleneck plot's legend once sat on such a segment)."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], "o-", label="diagonal")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.legend(loc="center")
    assert len(covered_points(fig)) == 1
    with pytest.raises(ValueError, match="legend covers"):
        save_figure(fig, tmp_path / "bad.png")
    ax.lines[0].set_linestyle("None")  # markers alone: the middle is free
    assert covered_points(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("name", list(FIGURES))
def test_no_legend_of_the_notes_figures_covers_a_point(name):
    fig, _ = FIGURES[name]()
    assert covered_points(fig) == []
    plt.close(fig)


def test_bottleneck_plot_keeps_the_fixed_context_point_and_coinciding_lines_visible(tmp_path):
    """The cases earlier versions got wrong: the legend sat on the fixed-context model's points, then
    on its line, and two models at accuracy 1.0 drew one line. The legend is below the axes, and
    coinciding series differ in marker and dash."""
    # the demo's run: exact accuracy 1.0, 0.57, 0.15, 0, 0 at lengths 4..16 (the legend sat on its
    # line near length 8)
    buckets_fixed = [
        {"lo": lo, "hi": lo + 2, "exact": e, "token_acc": t}
        for lo, e, t in ((3, 1.0, 1.0), (6, 0.57, 0.79), (9, 0.15, 0.61), (12, 0.0, 0.44), (15, 0.0, 0.36))
    ]
    perfect = [{"lo": b["lo"], "hi": b["hi"], "exact": 1.0, "token_acc": 1.0} for b in buckets_fixed]
    models = [
        ModelResult("fixed context (RNN)", "seq2seq-rnn", 50_000, {}, 1.0, 0.5, buckets_fixed),
        ModelResult("attention RNN (Luong)", "attention-rnn", 60_000, {}, 1.0, 0.1, perfect),
        ModelResult("Transformer", "transformer", 70_000, {}, 1.0, 0.1, perfect),
    ]
    path = tmp_path / "plot.png"
    captured = {}
    original = plt.close

    def keep(fig=None):
        captured["fig"] = fig
        original(fig)

    plt.close = keep
    try:
        _plot(models, QUICK, path)
    finally:
        plt.close = original
    fig = captured["fig"]
    assert covered_points(fig) == []
    legend = fig.axes[0].get_legend().get_window_extent()
    assert all(legend.y1 <= ax.get_window_extent().y0 for ax in fig.axes)  # below both panels
    assert len(fig.axes[0].get_legend().get_texts()) == 3
    lines = fig.axes[0].get_lines()
    styles = {(ln.get_marker(), str(ln.get_linestyle())) for ln in lines}
    assert len(styles) == 3
    assert path.stat().st_size > 1000
