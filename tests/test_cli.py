"""The `attnlab` entry point: every command is listed, and bad arguments give one line and exit 2."""

import json
import os
import re
import subprocess
import sys

import pytest

from attnlab.cli import COMMANDS


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True)


def test_help_lists_every_command():
    r = run("--help")
    assert r.returncode == 0
    for name in COMMANDS:
        assert f"  {name}" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["lesson", "--no-such-flag"],
        ["audit", "params", "--d-model", "abc"],
        ["tasks", "show"],  # missing argument
        ["train", "--steps", "abc"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args):
    r = run(*args)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), r.stderr
    assert "Traceback" not in r.stderr


def test_atomic_writes_use_the_umask(tmp_path):
    import os

    from attnlab._io import atomic_write_bytes

    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "f.txt", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644


def test_an_atomic_write_never_replaces_a_device_or_a_pipe(tmp_path):
    import os
    import stat

    from attnlab._io import atomic_write_bytes

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # stands for /dev/null, which a rename over it would replace (as root)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(pipe))} .*\bnot a regular file\b"):
        atomic_write_bytes(pipe, b"x")
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))} .*\bfolder\b"):
        atomic_write_bytes(tmp_path, b"x")


@pytest.mark.parametrize(
    "args",
    [
        ["explore", "a\udced\udcb3\udcbf", "--out", "x.html"],
        ["embed", "caf\udcc3", "ok"],
        ["translate", "somewhere", "ab\udcff"],
    ],
)
def test_text_that_is_not_utf8_is_named_not_a_traceback(args):
    from click.testing import CliRunner

    from attnlab.cli import cli

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert re.search(r"^Error: .*\bUTF-8\b.*\bb'\\x(ed|c3|ff)", result.output), result.output
    assert result.output.count("\n") == 1


def test_dash_reads_text_from_standard_input():
    from click.testing import CliRunner

    from attnlab.cli import cli

    piped = CliRunner().invoke(cli, ["embed", "-", "a kitten", "--json"], input="a cat\n\nthe dog\n")
    typed = CliRunner().invoke(cli, ["embed", "a cat", "the dog", "a kitten", "--json"])
    assert piped.exit_code == 0 and typed.exit_code == 0, piped.output
    assert json.loads(piped.output) == json.loads(typed.output)  # one text per non-empty line
    empty = CliRunner().invoke(cli, ["explore", "-", "--out", "x.html"], input="\n")
    assert empty.exit_code == 2 and re.search(
        r"^Error: SENTENCE\b.*\bempty\b.*\bstandard input\b", empty.output
    )


@pytest.mark.parametrize(
    "args",
    [
        ["explore", "a cat", "--out", "{file}/x.html"],
        ["explore", "a cat", "--out", "{long}.html"],
        ["figures", "--out", "{file}/figs"],
        ["figures", "--out", ""],
        ["demo", "--out", "{file}"],
        ["demo", "--out", "{long}"],
        ["experiment", "bottleneck", "--quick", "--out", "{file}/x"],
        ["train", "--task", "reverse", "--steps", "1", "--out", "{file}/run"],
    ],
)
def test_outputs_that_cannot_be_written_are_refused_before_any_work(tmp_path, args):
    from click.testing import CliRunner

    from attnlab.cli import cli

    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    args = [a.format(file=a_file, long=tmp_path / ("n" * 300)) for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing half-written


def test_a_closed_stdin_reads_as_empty(monkeypatch, capsys):
    from attnlab.cli import main

    monkeypatch.setattr(sys, "stdin", None)  # what Python sets when the process starts with fd 0 closed
    with pytest.raises(SystemExit) as ended:
        main(["embed", "-"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.strip() == "Error: texts '-' read no lines from standard input"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_full_disk_on_stdout_is_one_line():
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "attnlab", "myths", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["Error: No space left on device"]


def test_a_reader_that_goes_away_ends_the_command_quietly():
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnlab", "myths"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # as `attnlab myths | head -0` does, before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and err == "", err  # (click's answer to EPIPE: no traceback)


def test_a_seed_past_the_limit_is_told_the_limit():
    from click.testing import CliRunner

    from attnlab.cli import cli
    from attnlab.commands._types import SEED

    assert SEED.convert("9223372036854775807", None, None) == 2**63 - 1  # the largest torch takes
    result = CliRunner().invoke(cli, ["compose", "some-run", "--seed", "9223372036854775808"])
    assert result.exit_code == 2  # it said "must be an integer >= 0", which the value is
    assert result.output == (
        "Error: --seed must be at most 9,223,372,036,854,775,807, got 9,223,372,036,854,775,808\n"
    )
    negative = CliRunner().invoke(cli, ["compose", "some-run", "--seed", "-1"])
    assert negative.output == "Error: --seed must be an integer >= 0, got -1\n"
