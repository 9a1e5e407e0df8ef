"""Checkpoints are written as a set and atomically: the pointer always names a complete one."""

import json

import pytest
import torch

from attnlab.models import load_model
from attnlab.training import train
from attnlab.training.checkpoint import load_checkpoint, save_checkpoint


def test_pointer_moves_only_to_complete_checkpoints(tmp_path, tiny_config):
    cfg = tiny_config(steps=10, ckpt_every=5)
    result = train(cfg, tmp_path, progress=False)
    assert json.loads((tmp_path / "latest.json").read_text()) == {"checkpoint": "ckpt-000010", "step": 10}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "attnlab-run.json",  # the marker: this folder is an attnlab run (never someone else's)
        "ckpt-000010",
        "config.json",
        "latest.json",
        "model.safetensors",
    ]
    # the top-level copy loads with the generic loader and equals the checkpoint's model
    top = load_model(tmp_path).state_dict()
    assert all(torch.equal(top[k], v) for k, v in result.model.state_dict().items())

    # a crash while writing the next checkpoint leaves a temp folder and maybe a renamed folder
    # that the pointer does not name yet; the last complete checkpoint still loads
    (tmp_path / ".ckpt-tmp-crash").mkdir()
    (tmp_path / ".ckpt-tmp-crash" / "model.safetensors").write_bytes(b"half")
    (tmp_path / "ckpt-000015").mkdir()
    assert load_checkpoint(tmp_path).step == 10
    # the next save replaces them and cleans up
    ck = load_checkpoint(tmp_path)
    opt = torch.optim.AdamW(ck.model.parameters())
    opt.load_state_dict(ck.optimizer_state)
    save_checkpoint(
        tmp_path,
        model=ck.model,
        optimizer=opt,
        step=15,
        config=cfg,
        history=[],
        task_spec={"name": "reverse", "params": {}},
    )
    assert load_checkpoint(tmp_path).step == 15
    assert not (tmp_path / ".ckpt-tmp-crash").exists() and not (tmp_path / "ckpt-000010").exists()


def test_optimizer_state_round_trips_exactly(tmp_path, tiny_config):
    cfg = tiny_config(steps=7)
    train(cfg, tmp_path, progress=False)
    ck = load_checkpoint(tmp_path)
    opt = torch.optim.AdamW(ck.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    opt.load_state_dict(ck.optimizer_state)
    save_checkpoint(
        tmp_path / "again", model=ck.model, optimizer=opt, step=7, config=cfg, history=[], task_spec={}
    )
    again = load_checkpoint(tmp_path / "again")
    for pid, st in ck.optimizer_state["state"].items():
        for key, value in st.items():
            assert torch.equal(again.optimizer_state["state"][pid][key], value)
    assert again.optimizer_state["param_groups"] == ck.optimizer_state["param_groups"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete", "state", "pointer"])
def test_corrupt_checkpoints_are_refused(tmp_path, tiny_config, damage):
    train(tiny_config(steps=3), tmp_path, progress=False)
    ck = tmp_path / "ckpt-000003"
    if damage == "flip":
        data = bytearray((ck / "model.safetensors").read_bytes())
        data[-1] ^= 0xFF
        (ck / "model.safetensors").write_bytes(bytes(data))
    elif damage == "truncate":
        (ck / "optimizer.safetensors").write_bytes((ck / "optimizer.safetensors").read_bytes()[:100])
    elif damage == "delete":
        (ck / "rng.safetensors").unlink()
    elif damage == "state":
        (ck / "state.json").write_text("{not json")
    else:
        (tmp_path / "latest.json").write_text('{"checkpoint": "ckpt-000099", "step": 99}')
    with pytest.raises(ValueError, match="corrupt|missing|not a complete checkpoint"):
        load_checkpoint(tmp_path)
