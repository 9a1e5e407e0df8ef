"""``--device auto|cpu|cuda``: CUDA when present, one clear line when asked for and absent."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.devices import DEVICES, resolve_device


def test_resolve_device():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match=r"^device\b.*\bcuda\b.*; got 'tpu'"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is absent")
def test_cuda_absent_is_one_line(monkeypatch):
    with pytest.raises(ValueError, match=r"^device 'cuda'.*\bno CUDA device\b"):
        resolve_device("cuda")
    for args in (
        ["embed", "--device", "cuda", "hello"],
        ["explore", "--device", "cuda", "hello", "--out", "x.html"],
    ):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: device 'cuda' was asked for"), args


@pytest.mark.parametrize("command", ["embed", "explore", "generate"])
def test_help_lists_the_registry(command):
    r = CliRunner().invoke(cli, [command, "--help"])
    assert r.exit_code == 0 and "--device [" + "|".join(DEVICES) + "]" in r.output


def test_explore_on_the_auto_device_equals_cpu(monkeypatch):
    """``auto`` picks CUDA when present, else cpu: the model is loaded onto that device (the real
    loader, watched), and its weights equal cpu's."""
    from attnlab.interp import attention_views as pipeline  # where explore's load -> run lives
    from attnlab.viz import explorer

    placed, real_load = [], pipeline.load

    def load(*args, **kwargs):
        loaded = real_load(*args, **kwargs)
        placed.append(next(loaded.model.parameters()).device.type)
        return loaded

    monkeypatch.setattr(pipeline, "load", load)
    cpu, _ = explorer.attention_views("The animal was tired.", "minilm", "cpu")
    auto, _ = explorer.attention_views("The animal was tired.", "minilm", "auto")
    assert placed == ["cpu", "cuda" if torch.cuda.is_available() else "cpu"]
    np.testing.assert_allclose(auto[0].weights, cpu[0].weights, atol=1e-5)


def test_torch_threads_sets_the_count_inside_and_restores_it_after_an_error():
    import torch

    from attnlab.devices import torch_threads

    before = torch.get_num_threads()
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="inside"):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before
