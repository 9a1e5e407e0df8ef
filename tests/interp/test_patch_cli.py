"""`attnlab patch` and `attnlab attribute` at the command line (on the tiny trained run of
tests/conftest.py): --heatmap is checked before the model runs and never costs the printed analysis;
patch's JSON keeps its keys when the runs tie and its progress counts hook points; --target equal to
--wrong is warned about."""

from __future__ import annotations

import errno
import json
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.viz import grids

CLEAN, CORRUPT = "ROMEO:\nqo zeb, qo", "ROMEO:\nqa zeb, qo"


def _patch(run, *more):
    return ["patch", str(run), "--clean", CLEAN, "--corrupt", CORRUPT, "--target", "z", *more]


def _attribute(run, *more):
    return ["attribute", str(run), CLEAN, "--target", "z", *more]


def _no_model(monkeypatch):
    """Loading a model fails the test: what is refused must be refused before the model runs."""

    def load_decoder(*_, **__):
        raise AssertionError("the model was loaded before --heatmap was checked")

    monkeypatch.setattr("attnlab.commands.patch.load_decoder", load_decoder)


@pytest.mark.parametrize("command", [_patch, _attribute])
@pytest.mark.parametrize(
    "name, message",
    [
        ("-", "--heatmap writes a file, not standard output: give a file name, not '-'"),
        ("h1.txt", "--heatmap {path}: matplotlib cannot write .txt files; end the name with one of .png, "),
        ("h1.pgn", "did you mean 'png'?"),
        ("a-file/h.png", "--heatmap {path}: {tmp}/a-file is a file, so nothing can be written under it"),
    ],
)
def test_a_heatmap_that_cannot_be_written_is_refused_before_the_model_runs(
    tmp_path, monkeypatch, command, name, message
):
    (tmp_path / "a-file").write_text("x")
    path = name if name == "-" else str(tmp_path / name)
    _no_model(monkeypatch)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, command("some-run", "--heatmap", path))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert message.format(path=path, tmp=tmp_path) in result.stderr
    assert result.stdout == "" and not (tmp_path / "-").exists()


def test_the_formats_offered_are_the_ones_matplotlib_writes(tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    try:
        for fmt in ("png", "svg", "pdf", "jpg"):
            assert fmt in grids.FORMATS
            fig.savefig(tmp_path / f"f.{fmt}", format=fmt)
    finally:
        plt.close(fig)
    assert "pgf" not in grids.FORMATS  # (it runs a LaTeX install)


@pytest.mark.parametrize("command", [_patch, _attribute])
def test_a_heatmap_that_fails_to_write_keeps_the_printed_analysis(text_run, tmp_path, monkeypatch, command):
    def full_disk(fig, path, **_):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / ".h.png.x1y2z3.tmp"))

    monkeypatch.setattr(grids, "save_figure", full_disk)
    path = str(tmp_path / "h.png")
    result = CliRunner().invoke(cli, command(text_run, "--heatmap", path, "--json"))
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["metric"] == "logit('z')"  # the analysis, whole, on stdout
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: --heatmap {path}: the picture could not be written (No space left on device)"
    )
    assert ".tmp" not in result.stderr
    table = CliRunner().invoke(cli, command(text_run, "--heatmap", path))
    assert table.exit_code == 1 and "(layer x head)" in table.stdout and "heatmap:" not in table.stdout


@pytest.mark.parametrize("command", [_patch, _attribute])
def test_a_heatmap_is_written_after_the_tables(text_run, tmp_path, command):
    path = tmp_path / "h.svg"
    result = CliRunner().invoke(cli, command(text_run, "--heatmap", str(path)))
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith(f"heatmap: {path}") and path.read_text().startswith("<?xml")


def test_patch_json_keeps_its_keys_when_the_runs_tie(text_run):
    apart = CliRunner().invoke(cli, [*_patch(text_run), "--json"])
    tied = CliRunner().invoke(cli, [*_patch(text_run)[:5], CLEAN, "--target", "z", "--json"])
    assert apart.exit_code == 0 and tied.exit_code == 0, tied.output
    apart, tied = json.loads(apart.stdout), json.loads(tied.stdout)
    assert list(apart) == list(tied) and {"resid_recovered", "heads_recovered", "tie"} <= set(tied)
    assert tied["resid_recovered"] is None and tied["heads_recovered"] is None
    assert "same metric" in tied["tie"] and apart["tie"] is None


def test_patch_progress_counts_hook_points(text_run, monkeypatch):
    monkeypatch.setenv("ATTNLAB_PROGRESS", "plain")
    result = CliRunner().invoke(cli, _patch(text_run))
    assert result.exit_code == 0, result.output
    # 2 layers: each layer's residual point and each layer's heads; it said "4/4 layer"
    assert "patching: 4/4 hook point (100%)" in result.stderr


@pytest.mark.parametrize("command", [_patch, _attribute])
def test_target_and_wrong_the_same_token_are_warned_about(text_run, command):
    result = CliRunner().invoke(cli, command(text_run, "--wrong", "z", "--json"))
    assert result.exit_code == 0, result.output
    assert re.search(r"^Warning: --target 'z'.*--wrong 'z'.*\('z'\).*\bis 0\b", result.stderr, re.M), (
        result.stderr
    )
    other = CliRunner().invoke(cli, command(text_run, "--wrong", "a", "--json"))
    assert other.exit_code == 0 and "same token" not in other.stderr
