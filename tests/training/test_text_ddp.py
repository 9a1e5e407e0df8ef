"""A GPT on text trained by two DDP processes (gloo on CPU) follows the one-process loss curve at the
same global batch: rank 0 writes the token files, the ranks take alternate rows of each step's
windows, DDP averages the gradients, and the recorded loss is the global batch's."""

import json
import os
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from attnlab.cli import cli
from attnlab.training import train
from attnlab.training.distributed import train_distributed

# the bound on |two processes - one process| for every recorded loss: measured 0 for the held-out
# loss and < 1e-7 for the training loss over 60 steps (the two sum the same gradients in another
# order); 1e-4 leaves room for other CPUs' summation order
BOUND = 1e-4


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, play):
    path = tmp_path_factory.mktemp("text-ddp") / "play.txt"
    path.write_text(play(400), encoding="utf-8")
    return path


@pytest.mark.slow
def test_two_processes_follow_the_one_process_curve(tmp_path, corpus, text_config):
    config = text_config(corpus, steps=60, eval_every=20, batch_size=8, lr=3e-3)
    one = train(config, tmp_path / "one", progress=False)
    replicas = tmp_path / "replicas"
    replicas.mkdir()
    train_distributed(config, tmp_path / "two", nproc=2, progress=False, replica_dir=replicas)
    two = json.loads(next((tmp_path / "two").glob("ckpt-*/state.json")).read_text())["history"]
    evals = [(r["step"], r["loss"], r["val_loss"]) for r in one.history]
    assert [r["step"] for r in two] == [s for s, _, _ in evals] == [20, 40, 60]
    for (_, loss, val), r in zip(evals, two):
        assert abs(r["loss"] - loss) < BOUND and abs(r["val_loss"] - val) < BOUND
    assert evals[-1][2] < evals[0][2] - 0.1  # and it learnt
    r0 = load_file(str(replicas / "replica-0.safetensors"))
    r1 = load_file(str(replicas / "replica-1.safetensors"))
    assert all(torch.equal(r0[k], r1[k]) for k in r0)  # the replicas agree exactly
    ref = one.model.state_dict()
    assert max(float((r0[k] - ref[k]).abs().max()) for k in r0) < BOUND
    meta = json.loads((tmp_path / "two" / "text.json").read_text())
    assert meta == json.loads((tmp_path / "one" / "text.json").read_text())  # the same token files


@pytest.mark.slow
def test_torchrun_trains_on_text_into_one_default_folder(tmp_path, corpus, text_config):
    args = ["--text", str(corpus), "--d-model", "32", "--layers", "1", "--heads", "2", "--context", "32"]
    args += ["--batch", "8", "--steps", "20", "--eval-every", "10", "--eval-size", "8", "--lr", "0.003"]
    args += ["--warmup", "5", "--quiet", "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*launch, "-m", "attnlab", "train", *args], cwd=tmp_path, env=env, capture_output=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    summary = json.loads(proc.stdout)  # rank 0 alone prints
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["play-gpt"]  # both ranks chose one folder
    one = train(text_config(corpus, steps=20, eval_every=10, eval_size=8), tmp_path / "one", progress=False)
    for e, r in zip(summary["evaluations"], one.history):
        assert e["step"] == r["step"] and abs(e["val_loss"] - r["val_loss"]) < BOUND


def test_what_ddp_on_text_cannot_take_is_one_line(tmp_path, corpus, text_config):
    r = CliRunner().invoke(cli, ["train", "--text", "-", "--nproc", "2", "--out", str(tmp_path / "r")])
    assert r.exit_code == 2
    assert r.output.strip() == (
        "Error: --text - (standard input) reaches one process only; give a file to train with several"
    )
    with pytest.raises(ValueError, match=r"\btext run\b.*\bprocesses\b.*\bout_dir=:"):
        train_distributed(text_config(corpus), None, nproc=2)


@pytest.mark.slow
def test_bad_text_in_a_worker_is_one_line_and_leaves_no_folder(tmp_path):
    binary = tmp_path / "data.bin"
    binary.write_bytes(b"ROMEO:\n\x00\x01")
    out = tmp_path / "run"
    r = CliRunner().invoke(
        cli, ["train", "--text", str(binary), "--nproc", "2", "--out", str(out), "--quiet"]
    )
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        f"Error: {binary} is a binary file (a NUL byte at offset 7), not text"
    ]
    assert not out.exists()
