"""``attnlab audit ...`` through click: JSON outputs with exact values, bad input exits 2 with one line."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from attnlab.cli import cli


def run(*args):
    return CliRunner().invoke(cli, ["audit", *args])


def test_params_json():
    r = run("params", "--d-model", "512", "--heads", "8", "--d-ff", "2048", "--layers", "6", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["total"] == data["formula_total"] == data["module_total"] == 18_914_304
    assert data["by_group"] == {"attention": 6 * 1_050_624, "ffn": 6 * 2_099_712, "norms": 6 * 2_048}


def test_params_table():
    r = run("params", "--d-model", "768", "--heads", "12", "--d-ff", "3072", "--no-bias")
    assert r.exit_code == 0, r.output
    assert "589,824" in r.output and "equal to formula: True" in r.output


def test_shapes_json():
    r = run(
        "shapes", "--d-model", "64", "--heads", "4", "--d-ff", "256", "--seq", "20", "--batch", "5", "--json"
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["output"] == [5, 20, 64] and data["output_numbers"] == 6_400


def test_cost_json_and_measure():
    r = run("cost", "--d-model", "8", "--heads", "2", "--d-ff", "16", "--seq", "3", "--batch", "2", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["total_macs"] == 3360 and data["score_entries"] == 2 * 2 * 3**2
    r = run(
        "cost",
        "--d-model",
        "16",
        "--heads",
        "2",
        "--d-ff",
        "32",
        "--seq",
        "6",
        "--causal",
        "--measure",
        "--path",
        "explicit",
    )
    assert r.exit_code == 0, r.output
    assert "WARNING" not in r.output and "NO" not in r.output.split()


def test_peak_mfu_json():
    r = run("peak", "--seconds", "0.2", "--mfu", "1000", "--flops-per-token", "1e9", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["peak_flops"] > 0
    assert data["mfu"]["mfu"] == pytest.approx(1e12 / data["peak_flops"], rel=1e-12)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["params", "--d-model", "0"], "--d-model must be a positive integer"),
        (["params", "--d-model", "1.5"], "--d-model must be a positive integer"),
        (["params", "--heads", "-2"], "--heads must be a positive integer"),
        (["params", "--heads", "3"], "--d-model 512 is not divisible by --heads 3"),
        (["params", "--kv-heads", "3"], "--heads 8 is not divisible by --kv-heads 3"),
        (["params", "--model", "lstm"], "--model must be one of"),
        (["shapes", "--seq", "abc"], "--seq must be a positive integer"),
        (["cost", "--seq", "10", "--window", "11"], "--window 11 is larger than the sequence --seq 10"),
        (
            ["cost", "--model", "lstm"],
            "--model must be one of encoder-layer, decoder-layer, transformer, gpt, bert; got 'lstm'",
        ),
        (["cost", "--src-seq", "4"], "src_seq applies to decoder-layer and transformer"),
        (["peak", "--mfu", "-5"], "--mfu must be a positive number"),
        # past a learned position table (GPT-2: 1,024 rows), refused, never silently enlarged
        (
            ["cost", "--preset", "gpt2", "--seq", "2000"],
            "--seq 2000 is longer than the model's learned position table (max_len=1,024 positions)",
        ),
        (["shapes", "--preset", "gpt2", "--seq", "1025", "--batch", "1"], "(max_len=1,024 positions)"),
        # options the chosen model does not read are refused by name, as --share-embeddings is
        (["params", "--vocab", "100"], "vocab applies to the parameters of transformer, gpt and bert"),
        (["shapes", "--vocab", "100"], "vocab applies to the shapes of transformer, gpt and bert"),
        (["params", "--untie-head"], "tie_head=False (an untied head) applies to model 'gpt'"),
        (["params", "--untie-head", "--model", "bert", "--vocab", "9"], "'bert' has a pooler, no logits"),
        (["cost", "--untie-head", "--model", "transformer", "--vocab", "9"], "applies to model 'gpt'"),
        (["params", "--max-len", "5"], "--max-len applies to models gpt and bert"),
        (["params", "--max-len", "5", "--model", "transformer", "--vocab", "9"], "--max-len applies to"),
        (
            [
                "params",
                "--model",
                "gpt",
                "--vocab",
                "9",
                "--ffn",
                "none",
                "--d-ff",
                "6",
                "--activation",
                "relu",
            ],
            "--d-ff and --activation: --ffn none has no FFN to size",
        ),
        (["peak", "--flops-per-token", "100"], "--flops-per-token: only --mfu TOKENS_PER_S reads it"),
        (["peak", "--d-model", "64", "--seq", "8"], "--d-model, --seq: only --mfu TOKENS_PER_S reads them"),
        (["peak", "--mfu", "9", "--flops-per-token", "9", "--layers", "2"], "leave out --layers"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, fragment):
    r = run(*args)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("Error:")


@pytest.mark.parametrize("command", ["params", "shapes", "cost", "peak"])
def test_help(command):
    r = run(command, "--help")
    assert r.exit_code == 0, r.output
    # --help lists exactly the models the command accepts: every command covers all five
    models = "[encoder-layer|decoder-layer|transformer|gpt|bert]"
    assert "--d-model" in r.output and f"--model {models}" in r.output


def test_no_ffn_header_shows_no_ffn_sizes():
    # --ffn none: neither d_ff nor an activation in the header (they were shown as if they applied)
    for command in ("params", "cost", "shapes"):
        r = run(command, "--model", "gpt", "--vocab", "9", "--ffn", "none", "--d-model", "16", "--heads", "2")
        assert r.exit_code == 0, r.output
        header = r.output.splitlines()[0]
        assert "no FFN" in header and "2048" not in header and "GELU" not in header, header
    r = run("params", "--model", "gpt", "--vocab", "10", "--max-len", "7")
    assert "max_len=7" in r.output.splitlines()[0]  # read by gpt: the rows of its position table


@pytest.mark.parametrize(
    "args,sub",
    [(["--preset", "llama-2-7b"], "params"), (["--preset=llama-2-7b", "shapes", "--seq", "8"], "shapes")],
)
def test_an_option_before_the_subcommand_names_the_subcommands_that_take_it(capsys, args, sub):
    from attnlab.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["audit", *args])
    err = capsys.readouterr().err.strip()
    assert ended.value.code == 2 and len(err.splitlines()) == 1
    assert re.search(r"--preset\b.*\bparams, shapes, cost\b", err), err  # was "No such option '--preset'"
    assert err.endswith(f"try: attnlab audit {sub} " + " ".join(a for a in args if a != sub))
    with pytest.raises(SystemExit):
        main(["audit", "--presett", "x"])  # an option no subcommand takes: click's message as before
    assert "No such option '--presett'" in capsys.readouterr().err
