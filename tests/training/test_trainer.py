"""The trainer learns, and resuming from a checkpoint gives exactly the uninterrupted result."""

import re

import pytest
import torch

from attnlab.training import train
from attnlab.training.checkpoint import load_checkpoint


def test_loss_decreases_and_reverse_is_learned(tiny_config):
    cfg = tiny_config(
        steps=150, eval_every=150, model_params={"hidden": 32, "emb": 16}, train_size=1000, batch_size=32
    )
    result = train(cfg, progress=False)
    first = result.history[0]
    assert result.step == 150 and first["step"] == 150
    # untrained, the loss is ~ln(V) = ln(15) = 2.7; a learned reversal of 3-5 symbols is near 0
    assert first["loss"] < 0.5
    assert first["val_token_acc"] > 0.9
    assert first["val_exact"] > 0.7


@pytest.mark.parametrize("model", ["seq2seq-rnn", "attention-rnn"])
def test_resume_gives_the_same_weights(tmp_path, tiny_config, model):
    cfg = tiny_config(
        model=model, steps=24, ckpt_every=10, model_params={"hidden": 16, "emb": 8, "dropout": 0.2}
    )
    whole = train(cfg, tmp_path / "whole", progress=False)
    train(cfg, tmp_path / "split", progress=False, until=10)  # same schedule, stopped at step 10
    assert load_checkpoint(tmp_path / "split").step == 10
    resumed = train(cfg, tmp_path / "split", resume=True, progress=False)
    assert resumed.resumed_from == 10 and resumed.step == 24
    a, b = whole.model.state_dict(), resumed.model.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # and training did change the weights (the comparison is not of two untouched models)
    torch.manual_seed(0)
    fresh = type(whole.model)(whole.model.config).state_dict()
    assert any(not torch.equal(a[k], fresh[k]) for k in a)


def test_checkpoint_holds_optimizer_and_history(tmp_path, tiny_config):
    cfg = tiny_config(steps=12, eval_every=6)
    result = train(cfg, tmp_path, progress=False)
    ck = load_checkpoint(tmp_path)
    assert ck.step == 12 and [h["step"] for h in ck.history] == [6, 12]
    assert ck.config == cfg
    moments = [s["exp_avg"] for s in ck.optimizer_state["state"].values()]
    assert len(moments) == len(list(result.model.parameters()))
    assert all(float(s["step"]) == 12.0 for s in ck.optimizer_state["state"].values())
    assert any(m.abs().sum() > 0 for m in moments)


def test_resume_of_a_folder_that_does_not_exist_is_refused(tmp_path, tiny_config):
    """As ``attnlab train --resume`` refuses it: a mistyped path never starts a fresh run."""
    missing = tmp_path / "nonexistent_run"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(missing))} .*\bno such folder\b"):
        train(tiny_config(steps=2), missing, resume=True, progress=False)
    assert not missing.exists()


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"threads": 0}, "threads must be a positive integer, got 0"),
        ({"threads": -2}, "threads must be a positive integer, got -2"),
        ({"device": "xyz"}, "device must be one of auto, cpu, cuda .*got 'xyz'"),
    ],
)
def test_bad_threads_or_device_is_a_value_error(tiny_config, kw, message):
    with pytest.raises(ValueError, match=message):
        train(tiny_config(steps=2), None, progress=False, **kw)
