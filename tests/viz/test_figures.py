"""`attnlab figures`: five files written, and the numbers plotted are the notes' numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.viz import figures


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("figs")
    result = CliRunner().invoke(cli, ["figures", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return out, json.loads(result.output)


@pytest.mark.slow
def test_five_png_files_are_written(drawn):
    out, data = drawn
    assert sorted(data) == ["fig1", "fig2", "fig3", "fig4", "fig5"]
    for name in data:
        head = (out / f"{name}.png").read_bytes()[:8]
        assert head == b"\x89PNG\r\n\x1a\n"
        assert 5_000 < (out / f"{name}.png").stat().st_size < 400_000


@pytest.mark.slow
def test_plotted_numbers(drawn):
    _, data = drawn
    f1, f2 = data["fig1"]["numbers"], data["fig2"]["numbers"]
    np.testing.assert_allclose(np.sum(f1["additive"], axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(f1["uniform"], np.full((5, 6), 1 / 6), atol=1e-15)
    assert np.ptp(np.argmax(f1["additive"], axis=1)) > 0  # per-step alignments differ between steps
    np.testing.assert_allclose(f2["row_sums"], 1.0, atol=1e-12)
    assert np.asarray(f2["weights"]).shape == (5, 5) and f2["tokens"] == ["the", "cat", "sat", "on", "mats"]
    var = data["fig3"]["numbers"]["variance"]
    # the notes' executed output of 02_dot_product_variance (seed 42, 20,000 pairs)
    assert [round(v, 2) for v in var["var"]] == [4.04, 15.87, 63.83, 253.99]
    assert [round(v, 3) for v in var["scaled_var"]] == [1.011, 0.992, 0.997, 0.992]
    assert all(abs(s - 1) < 0.02 for s in var["scaled_std"])
    sat = data["fig3"]["numbers"]["saturation"]
    unscaled, scaled = sat["max_weight_unscaled"], sat["max_weight_scaled"]
    assert all(b > a for a, b in zip(unscaled[:6], unscaled[1:7]))  # saturates as d_k grows
    assert unscaled[-1] > 0.9 and max(scaled) < 0.3  # scaled stays far from one-hot
    f4 = data["fig4"]["numbers"]
    assert f4["head_widths"] == [64] * 8 and f4["concat_width"] == 512 and f4["w_o_shape"] == [512, 512]
    np.testing.assert_allclose(np.sum(f4["head_weights"], axis=-1), 1.0, atol=1e-12)
    d, f = 512, 2048
    f5 = data["fig5"]["numbers"]
    assert (f5["MHA"], f5["FFN"], f5["norms"]) == (1_050_624, 2_099_712, 2_048)
    assert (f5["MHA"], f5["FFN"], f5["norms"]) == (4 * d * d + 4 * d, 2 * d * f + f + d, 4 * d)
    assert f5["total"] == 3_152_384


def test_svg_output(tmp_path, monkeypatch):
    monkeypatch.setitem(figures.FIGURES, "fig1", figures.fig2_toy_weights)
    for name in ("fig2", "fig3", "fig4", "fig5"):
        monkeypatch.delitem(figures.FIGURES, name)
    result = figures.draw_figures(tmp_path, "svg")
    text = result["fig1"]["path"].read_text()
    assert result["fig1"]["path"].name == "fig1.svg" and text.lstrip().startswith("<?xml") and "<svg" in text


def test_bad_arguments_exit_2(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(cli, ["figures", "--out", str(tmp_path), "--format", "gif"])
    assert bad.exit_code == 2 and "gif" in bad.output
    (tmp_path / "file").write_text("x")
    bad = runner.invoke(cli, ["figures", "--out", str(tmp_path / "file")])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    with pytest.raises(ValueError, match="format must be one of"):
        figures.draw_figures(tmp_path, "gif")


def test_figure_3_labels_fit_and_the_sqrt_line_is_on_top():
    """Every value label of the spread panel lies inside the figure (the '15.94' at d_k=256 was
    clipped), and the sqrt(d_k) line, which coincides with the unscaled curve, is drawn above it."""
    import matplotlib.pyplot as plt

    fig, numbers = figures.fig3_scaling()
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        box = fig.bbox
        labels = [t for t in ax.texts if t.get_text().replace(".", "").isdigit()]
        assert len(labels) == len(numbers["variance"]["d_k"])
        renderer = fig.canvas.get_renderer()
        for t in labels:
            b = t.get_window_extent(renderer)
            assert box.x0 <= b.x0 and b.x1 <= box.x1 and box.y0 <= b.y0 and b.y1 <= box.y1, t.get_text()
            assert b.y1 <= ax.get_window_extent(renderer).y1  # inside the axes too
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        sqrt_line = next(ln for name, ln in lines.items() if name.startswith("sqrt(d_k)"))
        unscaled = lines["std(q.k) unscaled"]
        assert sqrt_line.get_zorder() > unscaled.get_zorder()
        assert sqrt_line.get_linestyle() == "--" and sqrt_line.get_linewidth() < unscaled.get_linewidth()
    finally:
        plt.close(fig)
