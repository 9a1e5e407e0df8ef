"""``attnlab.models.load``'s arguments: a source that is no path and a device torch cannot use are one
``ValueError`` each, before anything is read (the resolver itself: ``tests/models/hf/test_resolver.py``)."""

from __future__ import annotations

import re

import pytest
import torch

from attnlab.models import GPT, GPTConfig, load, load_config
from attnlab.models.load import resolve_load_device


@pytest.mark.parametrize("source", [None, 5, "", "  "])
def test_a_source_that_is_no_path_is_named(source):
    for read in (load, load_config):
        with pytest.raises(
            ValueError, match=re.escape("source must be 'minilm' or the path of a model folder")
        ):
            read(source)


def test_a_device_torch_cannot_use_is_named(tmp_path):
    GPT(GPTConfig(11, d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=8)).save(tmp_path)
    with pytest.raises(
        ValueError,
        match=re.escape("device must be 'cpu', 'cuda', 'cuda:N', 'auto' or a torch.device, got 'gpu'"),
    ):
        load(tmp_path, device="gpu")
    with pytest.raises(ValueError, match="device must be .*, got 0"):
        load(tmp_path, device=0)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"^device 'cuda'.*\bno CUDA device\b"):
            load(tmp_path, device="cuda")
    assert resolve_load_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert next(load(tmp_path, device=torch.device("cpu")).model.parameters()).device.type == "cpu"


def test_label_counts_layers_and_heads_in_the_singular_for_one(tmp_path):
    # before: "2 layers x 1 heads" (compose's header on a one-head model)
    GPT(GPTConfig(11, d_model=8, num_heads=1, d_ff=16, num_layers=2, max_len=8)).save(tmp_path / "a")
    GPT(GPTConfig(11, d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=8)).save(tmp_path / "b")
    assert load(tmp_path / "a").label == "a: 2 layers x 1 head"
    assert load(tmp_path / "b").label == "b: 1 layer x 2 heads"


def test_weights_stored_as_integers_are_refused_at_load_naming_the_tensor(tmp_path):
    """An embedding stored as int64 was cast to float silently (every value rounded)."""
    from safetensors.torch import load_file, save_file

    GPT(GPTConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=8)).save(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    state["tok_embed.weight"] = (state["tok_embed.weight"] * 100).to(torch.int64)
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(
        ValueError, match=r"\bmodel\.safetensors: tensor 'tok_embed\.weight'.*\bint64\b.*\(float32\)"
    ):
        load(tmp_path)
