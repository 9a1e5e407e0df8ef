"""Checkpoints: save/load errors name the tensor and shapes; pickles are refused; configs that do
not validate (or miss fields) are errors; a safetensors file whose header length starts with the
byte 0x80 is still read (it is not a pickle)."""

from __future__ import annotations

import json
import pickle
import re

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig, load_model
from attnlab.models.base import load_state

CFG = GPTConfig(vocab_size=9, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=6)


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = GPT(CFG)
    model.save(tmp_path)
    return tmp_path, model


def test_round_trip_writes_json_and_safetensors(saved):
    path, model = saved
    data = json.loads((path / "config.json").read_text())
    assert data["model"] == "gpt" and data["config"]["vocab_size"] == 9
    state = load_file(str(path / "model.safetensors"))
    assert "lm_head.weight" not in state and "tok_embed.weight" in state  # the tied matrix is stored once
    loaded = load_model(path)
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t), name


def test_missing_tensor_is_named(saved):
    path, _ = saved
    state = load_file(str(path / "model.safetensors"))
    del state["blocks.0.ffn.linear2.bias"]
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing tensors \['blocks.0.ffn.linear2.bias'\]"):
        load_model(path)


def test_mismatched_tensor_names_both_shapes(saved):
    path, _ = saved
    state = load_file(str(path / "model.safetensors"))
    state["blocks.0.self_attn.q_proj.weight"] = torch.zeros(8, 7)
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(
        ValueError,
        match=r"'blocks\.0\.self_attn\.q_proj\.weight'.*\[8, 7\].*\[8, 8\]",
    ):
        load_model(path)


def test_unexpected_tensor_is_named(saved):
    path, _ = saved
    state = load_file(str(path / "model.safetensors"))
    state["extra.weight"] = torch.zeros(2)
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"unexpected tensors \['extra.weight'\]"):
        load_model(path)


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_pickles_are_refused(saved, writer):
    path, model = saved
    target = path / "model.safetensors"
    if writer == "pickle":
        target.write_bytes(pickle.dumps({"x": [1, 2, 3]}))
    else:
        torch.save(model.state_dict(), target)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(target))} .*\bpickle\b"):
        load_model(path)


def test_safetensors_header_starting_with_0x80_is_not_taken_for_a_pickle(tmp_path):
    for n in range(1, 300):  # find a tensor name that makes the header length = 128 (mod 256)
        path = tmp_path / f"w{n}.safetensors"
        save_file({"a" * n: torch.zeros(1)}, str(path))
        if path.read_bytes()[0] == 0x80:
            break
    else:
        pytest.fail("no header length = 128 mod 256 found")
    assert list(load_state(path)) == ["a" * n]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(d_model=9), "d_model=9 is not divisible by num_heads=2"),
        (lambda c: c.pop("vocab_size"), r"missing required field\(s\) \['vocab_size'\]"),
        (lambda c: c.update(colour="red"), r"has no field\(s\) \['colour'\]"),
        (lambda c: c.update(positions="sinus"), "positions must be one of"),
    ],
)
def test_configs_that_do_not_validate(saved, edit, message):
    path, _ = saved
    data = json.loads((path / "config.json").read_text())
    edit(data["config"])
    (path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_model(path)


def test_wrong_kind_and_unknown_kind(saved):
    path, _ = saved
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} .*'gpt'.*'transformer'"):
        Transformer.load(path)
    (path / "config.json").write_text(json.dumps({"model": "lstm-lm", "config": {}}))
    with pytest.raises(ValueError, match=r"\bmodel 'lstm-lm'.*\bknown\b.*'gpt'"):
        load_model(path)


def test_a_hugging_face_folder_or_a_pretrained_name_points_to_load(tmp_path):
    """load_model reads attnlab's own folders; the others are named, with the function that reads them."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 8}))
    with pytest.raises(ValueError, match=r"\bmodel_type 'gpt2'.*\battnlab\.models\.load\b"):
        load_model(tmp_path)
    with pytest.raises(ValueError, match=r"^'minilm' .*\battnlab\.models\.load\('minilm'\)"):
        load_model("minilm")


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path)
    Transformer(
        TransformerConfig(5, 5, d_model=8, num_heads=2, d_ff=8, num_encoder_layers=1, num_decoder_layers=1)
    ).save(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no weights file"):
        load_model(tmp_path)
