"""``attnlab train --resume`` on a run folder a kill or a bad disk left odd: no ``latest.json`` (a
kill between a checkpoint's rename and its pointer), a damaged newest checkpoint, a pointer or state
file that is not a JSON object. It resumes from the newest checkpoint that verifies and says so in
one line, ending with the uninterrupted run's weights, or refuses in one line."""

import hashlib
import json
import shutil

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from attnlab.cli import cli
from attnlab.training import train

STEPS = 10


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``(reference weights after STEPS, a run folder stopped at step 5 holding ckpt-000005 and,
    copied back beside it, ckpt-000010)``: a template each test copies and damages."""
    from attnlab.training import TrainConfig

    config = TrainConfig(
        task="reverse",
        model="attention-rnn",
        steps=STEPS,
        batch_size=16,
        train_size=200,
        eval_size=10,
        warmup=2,
        lr=5e-3,
        task_params={"min_len": 3, "max_len": 5},
        model_params={"hidden": 16, "emb": 8},
        ckpt_every=5,
        seed=1,
    )
    base = tmp_path_factory.mktemp("fallback")
    ref = base / "ref"
    train(config, ref, progress=False)
    template = base / "template"
    train(config, template, progress=False, until=5)
    shutil.copytree(ref / "ckpt-000010", template / "ckpt-000010")  # as a kill before its pointer
    return load_file(str(ref / "model.safetensors")), template


def _copy(runs, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(runs[1], out)
    return out


def _resume(out):
    return CliRunner().invoke(cli, ["train", "--out", str(out), "--resume", "--quiet", "--json"])


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _same_weights(out, want) -> bool:
    got = load_file(str(out / "model.safetensors"))
    return got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)


def test_no_pointer_resumes_from_the_newest_checkpoint(runs, tmp_path):
    out = _copy(runs, tmp_path)
    (out / "latest.json").unlink()
    _flip(out / "ckpt-000010" / "model.safetensors")  # the newest is damaged: step 5 is the one
    result = _resume(out)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"{out}: it has no latest.json; resuming from ckpt-000005 (step 5), the newest checkpoint that "
        f"verifies (ckpt-000010 skipped: checkpoint file {out / 'ckpt-000010' / 'model.safetensors'} is "
        "missing or corrupt (sha256 mismatch))"
    ]
    assert json.loads(result.stdout)["step"] == STEPS
    assert json.loads((out / "latest.json").read_text()) == {"checkpoint": "ckpt-000010", "step": 10}
    assert _same_weights(out, runs[0])  # steps 6..10 redone, bit for bit


def test_no_pointer_and_a_complete_newest_checkpoint_resumes_from_it(runs, tmp_path):
    out = _copy(runs, tmp_path)
    (out / "latest.json").unlink()
    result = _resume(out)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"{out}: it has no latest.json; resuming from ckpt-000010 (step 10), the newest checkpoint "
        "that verifies",
        "Warning: nothing trained: the checkpoint is at step 10 and --steps is 10; give a larger --steps "
        "to train on",
    ]
    assert json.loads(result.stdout)["step"] == STEPS and _same_weights(out, runs[0])


def test_evaluate_without_a_pointer_names_the_checkpoint_and_the_way_back(runs, tmp_path):
    out = _copy(runs, tmp_path)
    (out / "latest.json").unlink()
    result = CliRunner().invoke(cli, ["evaluate", str(out), "--n", "2"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: {out} holds no checkpoint (no latest.json); ckpt-000010 verifies: "
        "resuming the run (attnlab train --resume) continues from it"
    ]


def test_a_damaged_pointed_checkpoint_falls_back_to_the_previous_one(runs, tmp_path):
    out = _copy(runs, tmp_path)
    (out / "latest.json").write_text('{"checkpoint": "ckpt-000010", "step": 10}')
    (out / "ckpt-000010" / "rng.safetensors").unlink()
    result = _resume(out)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"{out}: latest.json names ckpt-000010; resuming from ckpt-000005 (step 5), the newest checkpoint "
        f"that verifies (ckpt-000010 skipped: checkpoint file {out / 'ckpt-000010' / 'rng.safetensors'} "
        "is missing or corrupt (sha256 mismatch))"
    ]
    assert json.loads(result.stdout)["step"] == STEPS and _same_weights(out, runs[0])
    assert sorted(p.name for p in out.glob("ckpt-*")) == ["ckpt-000010"]  # rewritten, verified


def test_nothing_verifies_is_one_line_and_the_folder_is_untouched(runs, tmp_path):
    out = _copy(runs, tmp_path)
    (out / "latest.json").unlink()
    _flip(out / "ckpt-000010" / "model.safetensors")
    (out / "ckpt-000005" / "state.json").write_text("[1, 2]")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*") if p.is_file()}
    result = _resume(out)
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: {out} holds no checkpoint that verifies (ckpt-000010: checkpoint file "
        f"{out / 'ckpt-000010' / 'model.safetensors'} is missing or corrupt (sha256 mismatch); "
        f"ckpt-000005: {out / 'ckpt-000005' / 'state.json'} is not an attnlab checkpoint of format 1)"
    ]
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*") if p.is_file()}
    assert after == before


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "file,content,problem",
    [
        ("latest.json", "[1, 2]", "is damaged (holds a JSON array, not a JSON object)"),
        ("latest.json", "7", "is damaged (holds a JSON number, not a JSON object)"),
        ("latest.json", DEEP, "is damaged (JSON nested too deeply to read)"),
        ("latest.json", '{"a": {"b": [[[{}]]]}}', "is corrupt (not a checkpoint pointer)"),
        ("ckpt-000010/state.json", DEEP, "is damaged (JSON nested too deeply to read)"),
    ],
)
def test_a_state_file_that_is_not_an_object_is_one_line(runs, tmp_path, file, content, problem):
    out = _copy(runs, tmp_path)
    (out / "latest.json").write_text('{"checkpoint": "ckpt-000010", "step": 10}')
    (out / "ckpt-000005").rename(out / "old")  # nothing to fall back to: the damage must be named
    (out / file).write_text(content)
    for args in (["train", "--out", str(out), "--resume"], ["evaluate", str(out), "--n", "2"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        lines = result.output.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and problem in lines[0], lines
        assert str(out / file) in lines[0] or file.startswith("ckpt"), lines


def test_a_config_nested_too_deeply_is_one_line(runs, tmp_path):
    """Even with its sha256 recorded to match (so verification passes), the checkpoint's model
    config.json nested 100,000 deep is one line, not a RecursionError traceback."""
    out = _copy(runs, tmp_path)
    ck = out / "ckpt-000010"
    (out / "latest.json").write_text('{"checkpoint": "ckpt-000010", "step": 10}')
    (ck / "config.json").write_text(DEEP)
    state = json.loads((ck / "state.json").read_text())
    state["files"]["config.json"] = hashlib.sha256(DEEP.encode()).hexdigest()
    (ck / "state.json").write_text(json.dumps(state))
    result = _resume(out)
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: {ck / 'config.json'} is damaged (JSON nested too deeply to read)"
    ]


def test_a_damaged_lock_file_is_taken_over(runs, tmp_path):
    out = _copy(runs, tmp_path)
    for junk in (DEEP, "[1]", '{"pid": 1e400}', '{"pid": 99999999999999999999}'):
        (out / ".attnlab.lock").write_text(junk)
        result = _resume(out)
        assert result.exit_code == 0, (junk[:20], result.output)
        assert json.loads(result.stdout)["step"] == STEPS
        assert not (out / ".attnlab.lock").exists()
