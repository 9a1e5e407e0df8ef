"""``attnlab train/evaluate/translate``: bad input is one line, exit 2, and no checkpoint is touched."""

import hashlib
import json
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli

TINY = [
    "--model",
    "attention-rnn",
    "--batch",
    "16",
    "--train-size",
    "200",
    "--eval-size",
    "20",
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
    "--quiet",
]


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def snapshot(folder):
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    result = run("train", "--task", "reverse", "--steps", "8", *TINY, "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_train_writes_a_checkpoint_and_reports(trained):
    assert json.loads((trained / "latest.json").read_text())["step"] == 8
    state = json.loads((trained / "ckpt-000008" / "state.json").read_text())
    assert state["task"] == {"name": "reverse", "params": {"min_len": 3, "max_len": 5, "num_symbols": 10}}


def test_evaluate_and_translate(trained):
    result = run("evaluate", str(trained), "--n", "30", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["overall"]["n"] == 30 and sum(r["n"] for r in data["by_length"]) == 30
    assert {r["src_len"] for r in data["by_length"]} <= {3, 4, 5}
    result = run("translate", str(trained), "abc", "cab", "--json")
    assert result.exit_code == 0, result.output
    assert [r["src"] for r in json.loads(result.output)] == ["abc", "cab"]
    inputs = trained.parent / "inputs.txt"
    inputs.write_text("abc\n\ncab\n")
    from_file = run("translate", str(trained), str(inputs), "--json")  # one input per non-empty line
    assert from_file.exit_code == 0 and from_file.output == result.output
    long = run("translate", str(trained), "abcdefghij")  # the run trained on 3 to 5 symbols
    assert long.exit_code == 0
    assert re.search(r"^Warning: 1 of 1 inputs\b.*\b3 to 5 symbols\b", long.stderr, re.M), long.stderr
    wide = run("evaluate", str(trained), "--decode", "beam", "--beam-size", "100000", "--n", "2")
    assert wide.exit_code == 2
    assert wide.output.strip() == "Error: --beam-size 100,000 is more than the vocabulary (15 tokens)"


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["train", "--task", "nope", "--steps", "5"],
            "--task must be one of reverse, copy, sort, dates; got 'nope'",
        ),
        (
            ["train", "--task", "reverse", "--model", "lstm9", "--steps", "5"],
            "--model must be one of seq2seq-rnn",
        ),
        (["train", "--task", "reverse", "--steps", "0"], "steps must be a positive integer, got 0"),
        (["train", "--task", "reverse", "--steps", "-3"], "steps must be a positive integer, got -3"),
        (
            ["train", "--task", "reverse", "--steps", "5", "--batch", "64", "--train-size", "10"],
            "batch size 64 is larger than the training set (10 examples)",
        ),
        (
            ["train", "--task", "reverse", "--steps", "5", "--model", "transformer", "--hidden", "8"],
            "--hidden does not apply to model 'transformer'",
        ),
        (["train", "--steps", "5"], "--task is required"),
        (
            ["train", "--task", "reverse", "--steps", "5", "--model", "transformer", "--heads", "3"],
            "--d-model 64 is not divisible by --heads 3",
        ),
        (["train", "--task", "reverse", "--resume"], "--resume needs --out DIR"),
        (["evaluate", "/nonexistent/dir"], "is not a model attnlab can load"),
        (["train", "--task", "reverse", "--steps", "5", "--schedule", "linear"], "schedule must be one of"),
        (
            ["train", "--task", "reverse", "--steps", "5", "--model", "attention-rnn", "--attention", "x"],
            "attention must be one of",
        ),
        (["train", "--task", "reverse", "--lr", "-1"], "Error: --lr must be a finite number > 0, got -1.0"),
        (["train", "--task", "reverse", "--clip", "-1"], "Error: --clip must be a finite number >= 0"),
        (["train", "--task", "reverse", "--label-smoothing", "1.5"], "Error: --label-smoothing must be"),
        (["train", "--task", "reverse", "--beam-size", "0"], "Error: --beam-size must be a positive"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path, args, message):
    result = run(*args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args,message",
    [
        (["--task", "copy", "--resume"], "cannot resume"),
        (
            ["--task", "reverse", "--model", "seq2seq-rnn", "--resume"],
            "model 'attention-rnn' (checkpoint) vs 'seq2seq-rnn'",
        ),
        (["--task", "reverse", "--steps", "20"], "already holds a checkpoint (step 8)"),
    ],
)
def test_resume_conflicts_touch_nothing(trained, args, message):
    before = snapshot(trained)
    result = run("train", *TINY, *args, "--out", str(trained))
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output
    assert snapshot(trained) == before


def test_corrupt_checkpoint_is_refused_and_kept(trained, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    weights = copy / "ckpt-000008" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-7])
    before = snapshot(copy)
    result = run("train", "--out", str(copy), "--resume", "--steps", "20", "--quiet")
    assert result.exit_code == 2
    assert "missing or corrupt" in result.output and len(result.output.strip().splitlines()) == 1
    assert snapshot(copy) == before


def test_translate_rejects_foreign_characters(trained):
    result = run("translate", str(trained), "xyz")
    assert result.exit_code == 2 and "outside the 'reverse' alphabet" in result.output


def test_explore_refuses_foreign_characters_as_translate_does(trained, tmp_path):
    out = tmp_path / "e.html"
    result = run("explore", "Hello World", "--model", str(trained), "--out", str(out))
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert re.search(r"^Error: .*'reverse'.*'abcdefghij'.*'H'", result.output), result.output
    assert not out.exists()


def _spy_on_training(monkeypatch) -> list[str]:
    """Replace the trainer with a recorder of the device it is asked for (nothing is trained)."""
    import attnlab.training.trainer as trainer

    seen: list[str] = []

    def fake(config, out, **kw):
        seen.append(kw["device"])
        return trainer.TrainResult(None, [], 0, None, 0)

    monkeypatch.setattr(trainer, "train", fake)
    return seen


@pytest.mark.parametrize("cuda_present, want", [(False, "cpu"), (True, "cuda")])
def test_train_device_auto_picks_cuda_only_when_present(tmp_path, monkeypatch, cuda_present, want):
    import torch

    seen = _spy_on_training(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_present)
    result = run("train", "--task", "reverse", "--steps", "2", *TINY, "--out", str(tmp_path / "r"), "--json")
    assert result.exit_code == 0, result.output
    assert seen == [want]


@pytest.mark.parametrize("command", ["train", "evaluate", "translate"])
def test_device_cuda_without_cuda_is_one_line_and_exit_2(trained, tmp_path, monkeypatch, command):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this CPU-only machine
    before = snapshot(trained)
    args = {
        "train": ["train", "--task", "reverse", "--steps", "2", *TINY, "--out", str(tmp_path / "new")],
        "evaluate": ["evaluate", str(trained), "--n", "5"],
        "translate": ["translate", str(trained), "abc"],
    }[command]
    result = CliRunner().invoke(cli, [*args, "--device", "cuda"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: device 'cuda' was asked for"), result.output
    assert not (tmp_path / "new").exists() and snapshot(trained) == before


def test_evaluate_device_auto_scores_as_cpu(trained):
    auto = run("evaluate", str(trained), "--n", "20", "--json")
    cpu = run("evaluate", str(trained), "--n", "20", "--json", "--device", "cpu")
    assert auto.exit_code == cpu.exit_code == 0
    assert json.loads(auto.output) == json.loads(cpu.output)


def test_train_refuses_cuda_with_several_processes(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--task",
            "reverse",
            *TINY,
            "--nproc",
            "2",
            "--device",
            "cuda",
            "--out",
            str(tmp_path / "d"),
        ],
    )
    assert result.exit_code == 2 and re.search(r"^Error: --device cuda\b.*--nproc > 1\b", result.output)


# ----------------------------------------------------- trial C: messages that name the user's options
@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--max-len", "300"],
            "--max-len 300 needs sequences of 301 tokens but the model has --positions 256",
        ),
        (
            ["--max-len", "200", "--positions", "100"],
            "needs sequences of 201 tokens but the model has --positions 100",
        ),
        (["--max-len", "200", "--model", "gpt"], "--max-len 200 needs sequences of 402 tokens"),
    ],
)
def test_max_len_past_the_positions_is_refused_before_the_run_folder(tmp_path, args, message):
    out = tmp_path / "run"
    result = run("train", "--task", "reverse", "--steps", "2", "--quiet", *args, "--out", str(out))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "raise --positions" in lines[0], result.output
    assert not out.exists()  # no attnlab-run.json left behind


def test_max_len_at_the_positions_trains_and_evaluates(tmp_path):
    """The check is exact: 255 symbols + EOS fill 256 positions; decoding's slack stops there too."""
    out = tmp_path / "run"
    small = ["--d-model", "16", "--heads", "2", "--layers", "1", "--train-size", "20", "--batch", "4"]
    result = run(
        "train", "--task", "reverse", "--steps", "1", "--quiet", "--eval-size", "2", "--min-len", "254",
        "--max-len", "255", *small, "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    result = run("evaluate", str(out), "--n", "2", "--min-len", "254")
    assert result.exit_code == 0, result.output


def test_evaluate_max_len_past_the_positions_names_the_model_limit(trained, tmp_path):
    out = tmp_path / "tf"
    result = run("train", "--task", "reverse", "--steps", "1", "--quiet", "--model", "transformer",
                 "--d-model", "16", "--heads", "2", "--layers", "1", "--train-size", "20", "--batch", "4",
                 "--eval-size", "2", "--positions", "32", "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    result = run("evaluate", str(out), "--max-len", "500")
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: --max-len 500 needs sequences of 501 tokens but the model in {out} has 32 positions "
        f"(its --positions); lower --max-len"
    )


def test_resume_with_text_on_a_task_run_is_one_clear_line(trained):
    before = snapshot(trained)
    result = run("train", "--out", str(trained), "--resume", "--text", "foo.txt", "--quiet")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and re.search(r"^Error: --text\b.*\btask 'reverse'", lines[0]), result.output
    assert "unexpected keyword" not in result.output
    assert snapshot(trained) == before


def _edit_state(run_dir, **changes):
    state_path = run_dir / "ckpt-000008" / "state.json"
    state = json.loads(state_path.read_text())
    for key, value in changes.items():
        if key in state:
            state[key] = value
        else:
            state["config"][key] = value
    state_path.write_text(json.dumps(state))
    return state_path


def test_bad_value_in_state_json_names_the_checkpoint(trained, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    state_path = _edit_state(copy, lr=-1)
    result = run("train", "--out", str(copy), "--resume", "--steps", "20", "--quiet")
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: checkpoint {state_path} holds a bad config: lr must be a finite number > 0, got -1"
    )


def test_step_not_an_integer_in_state_json(trained, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    _edit_state(copy, step="x")
    result = run("train", "--out", str(copy), "--resume", "--steps", "20", "--quiet")
    assert result.exit_code == 2
    assert re.search(r"^Error: .*state\.json: 'step'.*\binteger\b", result.output), result.output


@pytest.mark.slow
@pytest.mark.parametrize("nproc", ["1", "2"])
def test_resume_past_steps_warns_whatever_nproc(trained, tmp_path, nproc):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    result = run("train", "--out", str(copy), "--resume", "--steps", "5", "--nproc", nproc, "--quiet")
    assert result.exit_code == 0, result.output
    assert re.search(r"^Warning: nothing trained\b.*\bstep 8\b.*--steps is 5\b", result.stderr, re.M), (
        result.stderr
    )
