"""The training step's linear layers on oneDNN (:mod:`attnlab.training.gemm`): the same values and
gradients as ``F.linear`` within float32 rounding, every ``F.linear`` of a forward routed, anything
else left alone, and a run that follows the MKL run's loss curve."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from attnlab.models.cpu import CAPS, _onednn_linear_op, cpu_features
from attnlab.training import gemm, train
from attnlab.training.gemm import OneDNNLinear, onednn_linears, use_onednn

pytestmark = [
    pytest.mark.skipif(not _onednn_linear_op(), reason="this PyTorch has no oneDNN linear"),
    pytest.mark.isa,  # rerun under the vector-unit caps (scripts/isa-caps.sh)
]

CHOICE = (
    "from attnlab.training.gemm import gemm_choice; from attnlab.models.cpu import mkl_isa; "
    "print(gemm_choice()[0], mkl_isa())"
)


def _choice_under(**caps) -> list[str]:
    """``[kernel, MKL's unit]`` that a fresh process capped by ``caps`` chooses (caps are read once,
    when the libraries load)."""
    dropped = ("ATTNLAB_TRAIN_GEMM", *CAPS)  # only the caps asked for (the suite may run under others)
    env = {k: v for k, v in os.environ.items() if k not in dropped} | caps
    done = subprocess.run(
        [sys.executable, "-c", CHOICE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_gemm_follows_what_each_library_runs_on_never_the_maker():
    """MKL capped to AVX2 beside an uncapped oneDNN (as on an AMD Zen 5, where MKL takes its AVX2 path)
    gives oneDNN exactly where the CPU has AVX-512; both capped to AVX2 (an AVX2-only CPU) gives
    ATen's linears, whatever the CPU's maker."""
    avx512 = cpu_features()["hardware"]["avx512f"]
    assert _choice_under(MKL_ENABLE_INSTRUCTIONS="AVX2") == ["onednn" if avx512 else "aten", "avx2"]
    assert _choice_under(MKL_ENABLE_INSTRUCTIONS="AVX2", ONEDNN_MAX_CPU_ISA="AVX2") == ["aten", "avx2"]


def _grads(fn, x, w, b):
    """``(y, dx, dw, db)`` of ``fn(x, w, b)`` against a fixed upstream gradient."""
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    b = None if b is None else b.detach().requires_grad_()
    y = fn(x, w, b)
    y.backward(torch.linspace(-1, 1, y.numel()).reshape(y.shape))
    return y, x.grad, w.grad, None if b is None else b.grad


@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16), (2, 3, 4, 16)])
@pytest.mark.parametrize("d_out", [8, 40])  # fewer and more outputs than inputs: both dW orders
@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_equal_f_linear(shape, d_out, bias):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(shape, generator=g), torch.randn(d_out, shape[-1], generator=g)
    b = torch.randn(d_out, generator=g) if bias else None
    exact = _grads(F.linear, x.double(), w.double(), None if b is None else b.double())
    ours = _grads(OneDNNLinear.apply, x, w, b)
    for got, want in zip(ours, exact):
        if want is not None:
            assert got.shape == want.shape and got.dtype == torch.float32
            assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)


def test_a_transposed_input_is_read_correctly():
    x = torch.randn(16, 6).t()  # [6, 16], not contiguous
    w = torch.randn(4, 16)
    assert torch.allclose(OneDNNLinear.apply(x, w, None), x @ w.t(), atol=1e-5)


def test_the_mode_routes_every_float32_linear_and_nothing_else():
    layer = torch.nn.Linear(16, 8)
    x = torch.randn(2, 3, 16)
    with onednn_linears():
        y = layer(x)
        z = F.linear(x, layer.weight)
        doubled = F.linear(x.double(), layer.weight.double())  # not float32: PyTorch's own
        vector = F.linear(torch.randn(16), layer.weight)  # 1-D: PyTorch's own
    assert type(y.grad_fn).__name__ == type(z.grad_fn).__name__ == "OneDNNLinearBackward"
    assert "OneDNN" not in type(doubled.grad_fn).__name__ and vector.shape == (8,)
    assert torch.allclose(y, layer(x), atol=1e-5)
    with onednn_linears(enabled=False):
        assert "OneDNN" not in type(layer(x).grad_fn).__name__


def test_the_environment_chooses_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv(gemm.ENV, "aten")
    assert not use_onednn()
    monkeypatch.setenv(gemm.ENV, "onednn")
    assert use_onednn()
    monkeypatch.setenv(gemm.ENV, "mkl")
    with pytest.raises(ValueError, match="ATTNLAB_TRAIN_GEMM.*'mkl'"):
        use_onednn()


def test_a_run_on_onednn_follows_the_mkl_run(tmp_path, monkeypatch, play, text_config):
    corpus = tmp_path / "play.txt"
    corpus.write_text(play(300), encoding="utf-8")
    config = text_config(corpus, steps=40, eval_every=10)
    runs = {}
    for kernel in ("aten", "onednn", "onednn"):
        monkeypatch.setenv(gemm.ENV, kernel)
        runs.setdefault(kernel, []).append(train(config, progress=False))
    a, b = runs["onednn"]
    assert all(torch.equal(v, b.model.state_dict()[k]) for k, v in a.model.state_dict().items())  # exact
    for ours, mkl in zip(a.history, runs["aten"][0].history):  # the same curve within float32 noise
        assert abs(ours["loss"] - mkl["loss"]) < 1e-3 and abs(ours["val_loss"] - mkl["val_loss"]) < 1e-3
