"""``attnlab train --text`` and ``attnlab generate`` on a text run: JSON and lines, stdin, a killed and
resumed run, and each kind of bad input as one ``Error:`` line with exit status 2."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from attnlab.cli import cli
from attnlab.decoding import GenerationRequest, generate_text
from attnlab.training import train

TINY = ["--d-model", "32", "--layers", "1", "--heads", "2", "--context", "32", "--batch", "8"]
TINY += ["--warmup", "5", "--lr", "0.003", "--quiet"]


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, play):
    path = tmp_path_factory.mktemp("text-cli") / "play.txt"
    path.write_text(play(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("text-cli-run") / "run"
    r = run(
        "train",
        "--text",
        corpus,
        *TINY,
        "--steps",
        30,
        "--eval-every",
        10,
        "--eval-size",
        4,
        "--out",
        out,
        "--json",
    )
    assert r.exit_code == 0, r.output
    return out, json.loads(r.stdout)


def test_train_reports_held_out_loss_and_bits_per_character(trained, corpus):
    out, summary = trained
    assert summary["task"] == "text" and summary["source"] == str(corpus.resolve())
    assert summary["holdout"].startswith("the last 10% of the text held out")
    assert [e["step"] for e in summary["evaluations"]] == [10, 20, 30]
    assert summary["val_tokens"] == summary["val_chars"] == 4 * 32  # char: one token per character
    assert summary["val_bits_per_char"] == pytest.approx(summary["val_loss"] / 0.6931471805599453)
    assert summary["evaluations"][-1]["val_loss"] < summary["evaluations"][0]["val_loss"]
    assert (out / "tokenizer.json").is_file() and (out / "train.bin").is_file()


def test_quiet_keeps_only_the_summary_and_loud_says_what_the_text_became(corpus, tmp_path):
    quiet = run("train", "--text", corpus, *TINY, "--steps", 2, "--out", tmp_path / "q")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr  # (TINY holds --quiet)
    loud = [a for a in TINY if a != "--quiet"]
    said = run("train", "--text", corpus, *loud, "--steps", 2, "--out", tmp_path / "l")
    assert said.exit_code == 0 and "text: " in said.stderr and " training tokens (char, " in said.stderr


def test_generate_streams_text_from_a_text_run(trained, tmp_path):
    out, _ = trained
    r = run("generate", out, "ROMEO:\n", "--max-new", 60, "--quiet")
    assert r.exit_code == 0, r.output
    assert len(r.output) == 60 + 1  # 60 characters (past the 32 positions), then a line break
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("ROMEO:\n", encoding="utf-8")
    assert run("generate", out, prompt, "--max-new", 60, "--quiet").output == r.output  # a file
    assert run("generate", out, "-", "--max-new", 60, "--quiet", input="ROMEO:\n").output == r.output
    pieces = []
    result = generate_text(out, GenerationRequest(prompt="ROMEO:\n", max_new=20), on_text=pieces.append)
    assert len(pieces) == 20 and "".join(pieces) == result["text"]  # one piece per token, as it comes
    r = run("generate", out, "NURSE:", "--max-new", 10, "--beam", 3, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["strategy"] == "beam search, 3 beams"


def test_generate_echoes_the_prompt_and_ends_the_text_before_the_stats(trained):
    """stdout and stderr on one pipe: the prompt, its continuation, a line break, then the stats line
    (it was glued to the text's last character, and the text began with the prompt's missing line)."""
    out, _ = trained
    cmd = [sys.executable, "-m", "attnlab", "generate", str(out), "ROMEO:", "--max-new", "20"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    text = proc.stdout.decode("utf-8")
    assert proc.returncode == 0, text
    assert text.startswith("ROMEO:")
    body, stats = text.rstrip("\n").rsplit("\n", 1)
    assert stats.startswith("[20 tokens in ") and len(body) >= len("ROMEO:") + 20 - 1
    r = run("generate", out, "ROMEO:", "--max-new", 20, "--quiet")
    assert r.stdout == body[len("ROMEO:") :] + "\n"  # --quiet: the continuation only, as before
    r = run("generate", out, "ROMEO:", "--max-new", 5, "--seed", 3, "--quiet")  # greedy: seed unused
    assert r.exit_code == 0 and r.stderr == "note: greedy decoding (no --temperature) does not use --seed\n"
    assert r.stdout == run("generate", out, "ROMEO:", "--max-new", 5, "--quiet").stdout


def test_a_killed_runs_staging_folder_is_removed_at_the_next_start(corpus, tmp_path):
    """A SIGKILL during train --text left .attnlab-text-* (a copy of the corpus) beside the run for
    good; the next run removes a stale one (owner dead, older than the process) and says so."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now
    stale, live, ownerless = (tmp_path / f".attnlab-text-{n}" for n in ("stale", "live", "young"))
    for folder, pid in ((stale, dead.pid), (live, os.getpid()), (ownerless, None)):
        folder.mkdir()
        (folder / "train.bin").write_bytes(b"\0" * 64)
        if pid is not None:
            (folder / "owner.json").write_text(json.dumps({"pid": pid}))
        os.utime(folder, (time.time() - 3600, time.time() - 3600))  # an hour old
    r = run("train", "--text", corpus, *TINY, "--steps", 2, "--out", tmp_path / "run")
    assert r.exit_code == 0, r.output
    assert not stale.exists() and live.exists() and ownerless.exists()  # a live owner's, an unknown's kept
    assert r.stderr.splitlines() == [
        f"removed {stale}, the staging folder of a killed text run (a copy of its corpus)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".attnlab-text-live", ".attnlab-text-young", "run"]


def test_text_from_stdin_in_a_real_process(corpus, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "attnlab", "train", "--text", "-", *TINY, "--steps", "3", "--out", str(out)],
        input=corpus.read_bytes(),
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert "held-out loss" in lines[0] and "bits/char; the last 10% of the text held out" in lines[0]
    assert json.loads((out / "text.json").read_text())["source"] == "-"


@pytest.mark.parametrize(
    "content,extra,message",
    [
        (b"", [], "is empty: there is no text to learn from"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", [], "is a binary file (a NUL byte at offset 8)"),
        (b"ROMEO:\nO \xe9t\xe9\n", [], "is not valid UTF-8: byte b'\\xe9' at offset 9"),
        (b"ROMEO:\nShort.\n" * 3, [], "shorter than one context of 32 + 1"),
        (None, ["--positions", "16"], "--context 32 is longer than the model's 16 positions (--positions)"),
        (None, ["--task", "reverse"], "--task and --text choose what to train on"),
        (None, ["--vocab-size", "300"], "--vocab-size applies to --tokenizer bpe"),
        (None, ["--tokenizer", "bpe", "--vocab-size", "100"], "--vocab-size must be at least 257"),
        (None, ["--model", "transformer"], "a text run trains a GPT (--model gpt)"),
    ],
)
def test_bad_text_input_is_one_line_and_writes_nothing(tmp_path, corpus, content, extra, message):
    source = corpus
    if content is not None:
        source = tmp_path / "input.txt"
        source.write_bytes(content)
    out = tmp_path / "run"
    r = run("train", "--text", source, *TINY, "--steps", 2, *extra, "--out", out)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], r.output
    assert not out.exists()


def test_a_folder_as_text_is_named_a_folder(tmp_path):
    r = run("train", "--text", tmp_path, *TINY, "--steps", 2, "--out", tmp_path / "run")
    assert r.exit_code == 2 and f"--text {tmp_path}: " in r.output and "folder" in r.output, r.output


def test_text_options_need_text(tmp_path):
    r = run("train", "--task", "reverse", "--context", 8, "--steps", 2, "--out", tmp_path / "run")
    assert r.exit_code == 2 and re.fullmatch(r"Error: --context\b.*\(--text\)\n", r.output), r.output
    r = run("train", "--task", "reverse", "--preset", "quick", "--out", tmp_path / "run")
    assert r.exit_code == 2 and re.fullmatch(r"Error: --preset\b.*\(--text\)\n", r.output), r.output


def test_prompt_with_unknown_characters_is_named(trained, play):
    out, _ = trained
    r = run("generate", out, "ROMEO: où ž", "--max-new", 5)
    assert r.exit_code == 2
    (line,) = r.output.strip().splitlines()
    assert line.startswith("Error: ") and line.endswith(f" {len(set(play()))}: 'ù' (U+00F9), 'ž' (U+017E)")
    r = run("generate", out, "ROMEO:", "--max-new", 40, "--beam", 2)
    assert r.exit_code == 2 and re.search(r"\bmax_len=32\b.*\bbeam\b.*\bat most 26\b", r.output), r.output


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted(corpus, tmp_path, text_config):
    out = tmp_path / "run"
    args = ["--text", str(corpus), *TINY, "--steps", "300", "--ckpt-every", "10", "--dropout", "0.1"]
    args += ["--eval-every", "100", "--eval-size", "4", "--seed", "3"]
    proc = subprocess.Popen([sys.executable, "-m", "attnlab", "train", *args, "--out", str(out)])
    pointer = out / "latest.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if pointer.is_file() and json.loads(pointer.read_text())["step"] >= 30:
            break
        assert proc.poll() is None
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = json.loads(pointer.read_text())["step"]
    assert 30 <= killed_at < 300
    resumed = subprocess.run(
        [sys.executable, "-m", "attnlab", "train", "--out", str(out), "--resume", "--quiet"],
        capture_output=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    config = text_config(
        corpus.resolve(),
        steps=300,
        batch_size=8,
        eval_every=100,
        eval_size=4,
        ckpt_every=10,
        lr=0.003,
        seed=3,
        model_params={"d_model": 32, "layers": 1, "heads": 2, "max_len": 32, "dropout": 0.1},
    )
    reference = train(config, progress=False).model.state_dict()
    got = load_file(str(out / "model.safetensors"))
    assert "tok_embed.weight" in got and set(got) <= set(reference)  # lm_head is tied to tok_embed
    assert all(torch.equal(got[k], reference[k]) for k in got)  # bit for bit


def test_prompt_longer_than_the_positions_keeps_its_end_with_a_warning(trained, tmp_path):
    out, _ = trained
    long_prompt = "ROMEO:\nO love, O night!\n" * 3  # 72 characters for 32 positions
    r = CliRunner().invoke(cli, ["generate", str(out), long_prompt, "--max-new", "5", "--json"])
    assert r.exit_code == 0, r.output
    assert re.search(r"^Warning: .*\b72 tokens\b.*\blast 32\b", r.stderr, re.M), r.stderr
    assert json.loads(r.stdout)["prompt_tokens"] == 32 and json.loads(r.stdout)["new_tokens"] == 5
    bad = tmp_path / "prompt.bin"
    bad.write_bytes(b"ROMEO\x00:")
    r = run("generate", out, bad, "--max-new", 5)
    assert r.exit_code == 2 and re.search(rf"{re.escape(str(bad))}\b.*\bNUL\b.*\boffset 5\b", r.output)


def test_overwrite_replaces_the_token_files(corpus, tmp_path, play):
    out = tmp_path / "run"
    assert run("train", "--text", corpus, *TINY, "--steps", 2, "--out", out).exit_code == 0
    other = tmp_path / "other.txt"
    other.write_text(play(200, seed=1).upper(), encoding="utf-8")
    r = run("train", "--text", other, *TINY, "--steps", 2, "--out", out, "--overwrite", "--json")
    assert r.exit_code == 0, r.output
    meta = json.loads((out / "text.json").read_text())
    assert meta["source"] == str(other.resolve()) and meta["train_chars"] + meta["val_chars"] == len(
        other.read_text(encoding="utf-8")
    )


@pytest.mark.slow
def test_generate_streams_into_a_pipe_as_it_comes(trained):
    """Piped (not a terminal), the text still arrives piece by piece: the first read returns a
    part of it, not the whole text at exit (what a block-buffered stdout would give)."""
    out, _ = trained
    cmd = [sys.executable, "-m", "attnlab", "generate", str(out), "ROMEO:\n", "--max-new", "2000", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = os.read(proc.stdout.fileno(), 1 << 16)  # returns as soon as anything is written
    rest = proc.stdout.read()
    assert proc.wait(timeout=300) == 0
    text = (first + rest).decode()
    assert len(text) == 2000 + 1 and 0 < len(first) < 2000  # a part: streamed, not written at exit


def test_the_cli_and_the_served_page_continue_a_text_run_alike(trained, play):
    """One front end: a 30-character prompt and 20 new tokens through 32 positions give the same
    continuation on the command line and on the served page, greedy and sampled (both slide past
    the context); the page's beam search box says why it cannot."""
    from attnlab.models import load
    from attnlab.serve import views

    out, _ = trained
    prompt = play()[:30]
    served = views.generate(load(out), prompt, n=20, beam=2, temperature=0.8, seed=5)
    for extra, box in (([], "greedy"), (["--temperature", "0.8", "--seed", "5"], "sample")):
        got = json.loads(run("generate", out, prompt, "--max-new", 20, "--json", *extra).stdout)
        assert got["tokens"] == served[box]["ids"] and len(got["tokens"]) == 20
        assert got["text"] == served[box]["text"]
    assert served["beam"]["ids"] == [] and "cannot slide" in served["beam"]["note"]
    assert "at most 2 new tokens" in served["beam"]["note"]
