"""A run killed with SIGKILL mid-training and resumed ends with the uninterrupted run's weights."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from attnlab.training import TrainConfig, train

ARGS = [
    "--task",
    "reverse",
    "--model",
    "attention-rnn",
    "--steps",
    "200",
    "--batch",
    "16",
    "--train-size",
    "300",
    "--eval-size",
    "10",
    "--warmup",
    "5",
    "--lr",
    "0.005",
    "--min-len",
    "3",
    "--max-len",
    "5",
    "--hidden",
    "16",
    "--emb",
    "8",
    "--dropout",
    "0.1",
    "--ckpt-every",
    "10",
    "--seed",
    "3",
    "--quiet",
]


def _attnlab(*args, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "attnlab", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    out = tmp_path / "run"
    proc = _attnlab("train", *ARGS, "--out", str(out))
    pointer = out / "latest.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if pointer.is_file() and json.loads(pointer.read_text())["step"] >= 30:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert proc.poll() is None  # still training
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = json.loads(pointer.read_text())["step"]
    assert 30 <= killed_at < 200

    resumed = _attnlab("train", "--out", str(out), "--resume", "--quiet")
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    assert json.loads(pointer.read_text())["step"] == 200

    cfg = TrainConfig(
        task="reverse",
        model="attention-rnn",
        steps=200,
        batch_size=16,
        train_size=300,
        eval_size=10,
        warmup=5,
        lr=0.005,
        task_params={"min_len": 3, "max_len": 5},
        model_params={"hidden": 16, "emb": 8, "dropout": 0.1},
        ckpt_every=10,
        seed=3,
    )
    reference = train(cfg, progress=False).model.state_dict()
    got = load_file(str(out / "model.safetensors"))
    assert got.keys() == reference.keys()
    assert all(torch.equal(got[k], reference[k]) for k in got)


@pytest.mark.slow
def test_ctrl_c_on_the_command_line_checkpoints_and_says_how_to_resume(tmp_path):
    out = tmp_path / "run"
    args = [a for a in ARGS if a not in ("--quiet",)]
    args[args.index("--ckpt-every") + 1] = "0"  # only the interrupt writes a checkpoint
    proc = _attnlab("train", *args, "--steps", "100000", "--out", str(out))
    first = proc.stderr.readline()  # the first progress line: training has begun
    assert "step" in first, first + proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    step = json.loads((out / "latest.json").read_text())["step"]
    assert 0 < step < 100000
    assert f"interrupted: stopped after step {step} of 100000; checkpoint saved" in err
    assert f"attnlab train --resume --out {out}" in err
