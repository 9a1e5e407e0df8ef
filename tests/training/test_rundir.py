"""The worst a careless user (or a kill) can do to a run folder, and what attnlab does about it."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import re
import shutil
import signal

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from attnlab.cli import cli
from attnlab.models import load_model
from attnlab.training import train
from attnlab.training.checkpoint import load_checkpoint, load_trained
from attnlab.training.rundir import LOCK, MARKER, writer_lock


def _weights(directory) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_folder_with_someone_elses_files_is_never_written(tmp_path, tiny_config):
    hf = tmp_path / "hf-model"
    hf.mkdir()
    (hf / "config.json").write_text('{"model_type": "bert"}')
    (hf / "model.safetensors").write_bytes(b"their weights")
    before = {p.name: p.read_bytes() for p in hf.iterdir()}
    for resume in (False, True):
        with pytest.raises(ValueError, match=rf"^out_dir={re.escape(str(hf))} .*\bconfig\.json\b"):
            train(tiny_config(steps=2), hf, resume=resume, progress=False)
    assert {p.name: p.read_bytes() for p in hf.iterdir()} == before
    result = CliRunner().invoke(cli, ["train", "--task", "reverse", "--steps", "2", "--out", str(hf)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    empty = CliRunner().invoke(cli, ["train", "--task", "reverse", "--steps", "2", "--out", ""])
    assert empty.exit_code == 2 and "empty path" in empty.output


def test_overwrite_replaces_only_an_attnlab_run(tmp_path, tiny_config):
    out = tmp_path / "run"
    train(tiny_config(steps=2), out, progress=False)
    assert (out / MARKER).is_file()
    with pytest.raises(ValueError, match="overwrite=True"):
        train(tiny_config(steps=2), out, progress=False)
    train(tiny_config(steps=3, seed=1), out, overwrite=True, progress=False)
    assert sorted(p.name for p in out.glob("ckpt-*")) == ["ckpt-000003"]
    with pytest.raises(ValueError, match="contradict"):
        train(tiny_config(steps=3), out, resume=True, overwrite=True, progress=False)


def test_a_stale_top_level_copy_is_read_past_and_rebuilt_by_the_next_resume(tmp_path, tiny_config):
    out = tmp_path / "run"
    train(tiny_config(steps=4, ckpt_every=2), out, progress=False)
    newest = _weights(out / "ckpt-000004")
    stale = {k: torch.zeros_like(v) for k, v in newest.items()}
    from safetensors.torch import save_file

    save_file(stale, str(out / "model.safetensors"))  # what a kill mid-replace can leave
    before = (out / "model.safetensors").read_bytes()
    for read in (load_model, load_trained):  # reading uses the verified checkpoint and never writes
        loaded = read(out)
        loaded = loaded[0] if isinstance(loaded, tuple) else loaded
        assert _same({k: v for k, v in loaded.state_dict().items() if k in newest}, newest)
    assert (out / "model.safetensors").read_bytes() == before
    load_checkpoint(out)  # what a resume reads: the copy is repaired there
    assert _same(_weights(out), newest)


@pytest.mark.parametrize(
    "damage",
    ["flip", "config-lie", "pickle", "files-empty", "pointer-escape", "pointer-absolute", "state-list"],
)
def test_every_reader_refuses_a_tampered_checkpoint(tmp_path, tiny_config, damage):
    out = tmp_path / "run"
    train(
        tiny_config(steps=2, model="transformer", model_params={"d_model": 16, "heads": 4}),
        out,
        progress=False,
    )
    ck = out / "ckpt-000002"
    if damage == "flip":
        data = bytearray((ck / "model.safetensors").read_bytes())
        data[len(data) // 2] ^= 0x01
        (ck / "model.safetensors").write_bytes(bytes(data))
    elif damage == "config-lie":  # shape-compatible: 4 heads -> 8 heads would load and print garbage
        cfg = json.loads((ck / "config.json").read_text())
        cfg["config"]["num_heads"] = 8
        (ck / "config.json").write_text(json.dumps(cfg))
    elif damage == "pickle":
        (ck / "optimizer.safetensors").write_bytes(pickle.dumps({"state": {}}))
    elif damage == "files-empty":
        state = json.loads((ck / "state.json").read_text())
        state["files"] = {}
        (ck / "state.json").write_text(json.dumps(state))
    elif damage == "pointer-escape":
        other = tmp_path / "other"
        shutil.copytree(out, other)
        (out / "latest.json").write_text('{"checkpoint": "../other/ckpt-000002", "step": 2}')
    elif damage == "pointer-absolute":
        (out / "latest.json").write_text(json.dumps({"checkpoint": str(ck.resolve()), "step": 2}))
    else:
        (ck / "state.json").write_text("[1, 2, 3]")
    for read in (load_checkpoint, load_trained, load_model):
        with pytest.raises(ValueError):
            read(out)
    for args in (
        ["evaluate", str(out), "--n", "5"],
        ["translate", str(out), "abc"],
        ["explore", "abc", "--model", str(out), "--out", str(tmp_path / "x.html")],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output


def test_a_config_that_would_not_fit_in_memory_is_refused_before_building(tmp_path, tiny_config):
    out = tmp_path / "run"
    train(tiny_config(steps=1, model="gpt", model_params={"d_model": 16, "heads": 2}), out, progress=False)
    model_dir = tmp_path / "saved"
    load_model(out).save(model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    for field, value in (("max_len", 10**9), ("d_model", 10**6)):
        bad = json.loads(json.dumps(cfg))
        bad["config"][field] = value
        (model_dir / "config.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=r"\bconfig\.json: .*\b[1-9][\d,]+ parameters \([\d,.]+ GiB\)"):
            load_model(model_dir)
    (model_dir / "config.json").write_text("[]")
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(model_dir / 'config.json'))} .*\bJSON object\b.*\blist$"
    ):
        load_model(model_dir)


def _hold_lock(path, ready, release):
    with writer_lock(path):
        ready.set()
        release.wait(60)


def test_a_second_writer_is_refused_and_a_dead_ones_lock_is_taken_over(tmp_path, tiny_config):
    out = tmp_path / "run"
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(out, ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        with pytest.raises(ValueError, match=f"pid {holder.pid}"):
            train(tiny_config(steps=2), out, progress=False)
    finally:
        release.set()
        holder.join(60)
    # a lock left by a process that was killed
    (out / LOCK).write_text(json.dumps({"pid": holder.pid}))  # that pid has exited
    train(tiny_config(steps=2), out, overwrite=True, progress=False)
    assert not (out / LOCK).exists()


def test_a_resume_in_the_last_steps_reports_the_uninterrupted_loss(tmp_path, tiny_config):
    whole = train(tiny_config(steps=12, ckpt_every=1), tmp_path / "a", progress=False)
    train(tiny_config(steps=12, ckpt_every=1), tmp_path / "b", progress=False, until=11)
    resumed = train(tiny_config(steps=12, ckpt_every=1), tmp_path / "b", resume=True, progress=False)
    assert resumed.history[-1]["loss"] == whole.history[-1]["loss"]
    assert resumed.history[-1]["train_token_acc"] == whole.history[-1]["train_token_acc"]


# --- a SIGKILL at every write step ------------------------------------------------------------------

WRITES = ("replace", "fsync", "rename", "unlink", "rmdir", "mkdir")


def _train_killed_at(out, config, kill_at: int, counter=None) -> None:
    """Train in this (forked) process, SIGKILLing it just before write operation number ``kill_at``
    (os.replace/fsync/rename/unlink/rmdir/mkdir); ``counter`` receives the total when not killed."""
    seen = [0]

    def wrap(name):
        real = getattr(os, name)

        def call(*a, **kw):
            seen[0] += 1
            if seen[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **kw)

        return call

    for name in WRITES:
        setattr(os, name, wrap(name))
    torch.set_num_threads(1)
    train(config, out, progress=False)
    if counter is not None:
        counter.value = seen[0]


@pytest.mark.slow
def test_a_kill_at_every_write_step_resumes_to_the_uninterrupted_run(tmp_path, tiny_config):
    config = tiny_config(steps=4, ckpt_every=2, eval_size=4, train_size=64)
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("i", 0)
    ref = tmp_path / "ref"
    p = ctx.Process(target=_train_killed_at, args=(ref, config, 10**9, counter))
    p.start()
    p.join(300)
    total = counter.value
    assert p.exitcode == 0 and total > 20, total  # every write step of two checkpoints, counted
    want = _weights(ref)
    outcomes = {"resumed": 0, "fresh": 0}
    for k in range(1, total + 1):
        out = tmp_path / f"k{k}"
        p = ctx.Process(target=_train_killed_at, args=(out, config, k))
        p.start()
        p.join(300)
        if p.exitcode == 0:  # past the run's last write (the count includes the lock's release)
            assert k >= total - 1, (k, total)
            break
        assert p.exitcode == -signal.SIGKILL, (k, p.exitcode)
        outcomes["resumed" if (out / "latest.json").exists() else "fresh"] += 1
        # whatever the kill left, --resume finishes the run, and it equals the uninterrupted one; a
        # kill before the folder was made left nothing to resume: refused as the CLI does, run afresh
        if not out.exists():
            with pytest.raises(ValueError, match=rf"^{re.escape(str(out))} .*\bno such folder\b"):
                train(config, out, resume=True, progress=False)
        result = train(config, out, resume=out.exists(), progress=False)
        assert result.step == 4, k
        assert _same(_weights(out), want), f"kill at write {k} of {total}"
        assert _same({n: t for n, t in load_model(out).state_dict().items() if n in want}, want), k
        assert not [
            p.name for p in out.iterdir() if p.name.startswith(".ckpt-tmp-") or p.name.endswith(".tmp")
        ]
    assert outcomes["resumed"] > 0 and outcomes["fresh"] > 0, outcomes


@pytest.mark.parametrize(
    "flag,value,message",
    [
        ("--lr", "inf", "lr must be a finite number > 0"),
        ("--lr", "nan", "lr must be a finite number > 0"),
        ("--weight-decay", "inf", "--weight-decay must be a finite number >= 0"),
        ("--clip", "nan", "clip must be a finite number >= 0"),
        ("--label-smoothing", "1.5", "--label-smoothing must be a number in [0, 1)"),
    ],
)
def test_hyper_parameters_that_cannot_train_are_refused(tmp_path, flag, value, message):
    result = CliRunner().invoke(
        cli,
        ["train", "--task", "reverse", "--steps", "2", flag, value, "--out", str(tmp_path / "r"), "--json"],
    )
    assert result.exit_code == 2 and message in result.output and result.output.count("\n") == 1
    assert not (tmp_path / "r").exists()
