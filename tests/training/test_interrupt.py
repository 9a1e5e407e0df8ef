"""Ctrl-C or SIGTERM during training: the step in progress ends, a checkpoint is written, and the run
resumed from it ends with the weights of a run never interrupted."""

import json
import signal
import time

import pytest
import torch
from safetensors.torch import load_file

import attnlab.training.trainer as trainer
from attnlab.training import train
from attnlab.training.interrupt import TrainingInterrupted, stop_requests


def _signal_at(monkeypatch, step: int, signum=signal.SIGINT):
    """Make the training loop receive ``signum`` while it computes step ``step`` (0-based)."""
    real = trainer._train_step

    def step_then_signal(loop, *args, **kw):
        if loop.step == step:
            signal.raise_signal(signum)  # delivered to the handler in this (main) thread
        return real(loop, *args, **kw)

    monkeypatch.setattr(trainer, "_train_step", step_then_signal)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_saves_the_step_and_resumes_to_the_same_weights(
    tiny_config, tmp_path, monkeypatch, signum
):
    config = tiny_config(steps=20, ckpt_every=0)  # no periodic checkpoint: only the interrupt saves
    out = tmp_path / "run"
    _signal_at(monkeypatch, 7, signum)
    before = signal.getsignal(signal.SIGINT)  # (SIG_IGN where the suite runs in the background)
    with pytest.raises(TrainingInterrupted) as stopped:
        train(config, out, progress=False)
    assert (stopped.value.step, stopped.value.total, stopped.value.saved) == (8, 20, str(out))
    assert stopped.value.exit_code == 128 + signum
    assert f"continue with train(config, out_dir={str(out)!r}, resume=True)" in str(stopped.value)
    assert json.loads((out / "latest.json").read_text())["step"] == 8
    assert signal.getsignal(signal.SIGINT) is before  # handlers given back
    monkeypatch.undo()
    resumed = train(config, out, resume=True, progress=False)
    assert resumed.resumed_from == 8 and resumed.step == 20
    reference = train(config, progress=False).model.state_dict()
    got = load_file(str(out / "model.safetensors"))
    assert got.keys() == reference.keys() and all(torch.equal(got[k], reference[k]) for k in got)


def test_without_a_folder_nothing_is_saved_and_the_message_says_so(tiny_config, monkeypatch):
    _signal_at(monkeypatch, 2)
    with pytest.raises(TrainingInterrupted) as stopped:
        train(tiny_config(steps=10), progress=False)
    assert stopped.value.saved is None and "not saved" in str(stopped.value)


def test_a_second_ctrl_c_stops_at_once():
    before = signal.getsignal(signal.SIGINT)  # (SIG_IGN where the suite runs in the background)
    with stop_requests() as asked:
        signal.raise_signal(signal.SIGINT)
        assert asked() == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
            time.sleep(0.01)  # (the handler runs between bytecodes)
    assert signal.getsignal(signal.SIGINT) is before
