"""Run folders damaged after training: the top-level ``model.safetensors`` (not a checkpoint's) with a
flipped byte is found by its sha256 and restored from the verified checkpoint with a note (evaluate,
train --resume); a checkpoint whose weights hold NaN is not resumed; a text run whose config,
tokenizer or weights were changed, or replaced by a link, is one line naming the file."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from attnlab.cli import cli
from attnlab.training import TrainConfig, train


@pytest.fixture(scope="module")
def task_run(tmp_path_factory):
    config = TrainConfig(
        task="reverse",
        model="attention-rnn",
        steps=4,
        batch_size=8,
        train_size=50,
        eval_size=5,
        warmup=1,
        lr=5e-3,
        task_params={"min_len": 3, "max_len": 5},
        model_params={"hidden": 16, "emb": 8},
        ckpt_every=4,
        seed=1,
    )
    out = tmp_path_factory.mktemp("damaged") / "run"
    train(config, out, progress=False)
    return out


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_damaged_top_level_copy_is_restored_with_a_note(task_run, tmp_path):
    out = shutil.copytree(task_run, tmp_path / "run")
    good = (out / "ckpt-000004" / "model.safetensors").read_bytes()
    note = (
        f"{out / 'model.safetensors'} did not match the verified checkpoint ckpt-000004 (sha256): "
        "restored from it"
    )
    _flip(out / "model.safetensors")
    result = CliRunner().invoke(cli, ["evaluate", str(out), "--n", "2"])
    assert result.exit_code == 0 and result.stderr.splitlines() == [f"note: {note}"]
    assert (out / "model.safetensors").read_bytes() == good
    result = CliRunner().invoke(cli, ["evaluate", str(out), "--n", "2"])
    assert result.exit_code == 0 and result.stderr == ""  # nothing left to say
    _flip(out / "model.safetensors")
    result = CliRunner().invoke(cli, ["train", "--out", str(out), "--resume", "--steps", "4", "--quiet"])
    assert result.exit_code == 0 and result.stderr.splitlines()[0] == note
    assert (out / "model.safetensors").read_bytes() == good


def test_a_checkpoint_holding_nan_is_not_resumed(task_run, tmp_path):
    out = shutil.copytree(task_run, tmp_path / "run")
    ckpt = out / "ckpt-000004"
    state = load_file(ckpt / "model.safetensors")
    name = sorted(state)[0]
    state[name].view(-1)[0] = float("nan")
    save_file(state, ckpt / "model.safetensors")  # as a run that diverged writes it: digest recorded
    meta = json.loads((ckpt / "state.json").read_text())
    meta["files"]["model.safetensors"] = hashlib.sha256((ckpt / "model.safetensors").read_bytes()).hexdigest()
    (ckpt / "state.json").write_text(json.dumps(meta))
    result = CliRunner().invoke(cli, ["train", "--out", str(out), "--resume", "--steps", "8", "--quiet"])
    lines = result.output.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and name in lines[0] and "1 of" in lines[0]
    assert "cannot resume training" in lines[0] and not (out / "ckpt-000008").exists()


def _damage(run, what):
    if what == "tokenizer":
        data = json.loads((run / "tokenizer.json").read_text())
        data["added_tokens"] = []
        (run / "tokenizer.json").write_text(json.dumps(data))
        return run / "tokenizer.json"
    if what == "tokenizer link":
        other = run.parent / "other.json"
        shutil.copy(run / "tokenizer.json", other)
        with open(other, "a") as f:
            f.write(" ")
        (run / "tokenizer.json").unlink()
        (run / "tokenizer.json").symlink_to(other)
        return run / "tokenizer.json"
    ckpt = json.loads((run / "latest.json").read_text())["checkpoint"]
    if what == "config":
        path = run / ckpt / "config.json"
        config = json.loads(path.read_text())
        config["config"]["num_layers"] = 1
        path.write_text(json.dumps(config))
        return path
    if what == "weights":
        _flip(run / ckpt / "model.safetensors")
        return run / ckpt / "model.safetensors"
    if what == "weights link":  # a checkpoint's weights replaced by a link to the top-level copy's twin
        path = run / ckpt / "model.safetensors"
        twin = run.parent / "twin.safetensors"
        save_file({k: v + 1 for k, v in load_file(path).items()}, twin)
        path.unlink()
        path.symlink_to(twin)
        return path
    raise AssertionError(what)


@pytest.mark.parametrize("what", ["config", "tokenizer", "tokenizer link", "weights", "weights link"])
def test_a_text_run_damaged_after_training_is_one_line_naming_the_file(text_run, tmp_path, what):
    run = shutil.copytree(text_run, tmp_path / "run", symlinks=True)
    damaged = _damage(run, what)
    for args in (["generate", str(run), "ROMEO:", "--max-new", "3"], ["heads", str(run), "--length", "4"]):
        result = CliRunner().invoke(cli, args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, (what, args[0], result.output)
        assert str(damaged) in lines[0] and "sha256" in lines[0] and "Traceback" not in result.output
