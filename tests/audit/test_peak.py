"""Machine peak and MFU: the arithmetic exactly, the measurement's structure and sanity."""

from __future__ import annotations

import pytest

from attnlab.audit import measure_peak, mfu


def test_mfu_arithmetic():
    assert mfu(1000, 6e9, 1.2e13) == pytest.approx(0.5, rel=1e-15)
    assert mfu(10, 3, {"peak_flops": 60}) == 0.5


def test_measure_peak():
    r = measure_peak(seconds=0.2, sizes=(64, 128))
    assert [row["n"] for row in r["by_size"]] == [64, 128]
    assert all(row["repeats"] >= 3 and row["flops_per_s"] > 0 for row in r["by_size"])
    assert r["peak_flops"] == max(row["flops_per_s"] for row in r["by_size"])


def test_the_ceiling_is_the_best_of_every_kernel_attnlab_runs():
    """A ceiling measured with torch.mm alone was exceeded by the oneDNN prepacked path (AMD Zen 5)."""
    from attnlab.models.precision import onednn_linear

    r = measure_peak(seconds=0.2, sizes=(64, 96))
    for row in r["by_size"]:
        assert "torch.mm" in row["kernels"]
        assert ("oneDNN prepacked linear" in row["kernels"]) == onednn_linear()
        assert row["flops_per_s"] == max(row["kernels"].values())
        assert row["kernel"] == max(row["kernels"], key=row["kernels"].get)


@pytest.mark.parametrize("args", [(0, 1, 1), (1, -1, 1), (1, 1, 0), (True, 1, 1)])
def test_mfu_bad_input(args):
    with pytest.raises(
        ValueError,
        match=rf"^(tokens_per_s|flops_per_token|peak)\b.*, got "
        rf"{next(a for a in args if a is True or a <= 0)!r}$",
    ):
        mfu(*args)


def test_peak_bad_input():
    with pytest.raises(ValueError, match="seconds must be positive"):
        measure_peak(seconds=0)
    with pytest.raises(ValueError, match=r"^size\b.*\bpositive\b.*, got 0$"):
        measure_peak(seconds=0.1, sizes=(0,))
