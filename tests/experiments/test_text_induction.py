"""``attnlab experiment induction --text``: on a model known to copy through induction heads (the
synthetic experiment's two-layer attention-only GPT, over 32 characters) the experiment finds them,
the repeat is easier, and zeroing them takes that away; on a tiny GPT trained on a play it runs end
to end from the command line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.induction import QUICK as SYNTHETIC
from attnlab.experiments.induction import train_one
from attnlab.experiments.text_induction import (
    PROBES,
    QUICK,
    TextInductionResult,
    _verdict,
    causal_test,
    control_draws,
    control_heads,
    measure,
)
from attnlab.experiments.text_model import TextModel, training_seconds
from attnlab.interp.sequences import segment_batch
from attnlab.tasks.text_tokenizer import char_tokenizer
from attnlab.tasks.token_stream import id_dtype
from attnlab.tasks.tokenize import wrap
from attnlab.training.text_data import TRAIN


@pytest.fixture(scope="module")
def copying(tmp_path_factory):
    """The synthetic two-layer attention-only GPT (800 steps) as a text model: 32 characters with the
    line break as id 0 (its BOS), held-out text its segment sequences, a blank line before each."""
    settings = dataclasses.replace(SYNTHETIC, steps=800, eval_every=800, eval_size=32)
    model, _ = train_one(settings, "2-layer attention-only", show_progress=False)
    tokenizer = wrap(char_tokenizer("\nABCDEabcdefghijklmnopqrstuvwxyz"))  # code-point order: "\n" = 0
    rows = segment_batch(48, settings.seq_len, settings.vocab, settings.min_len, settings.max_len,
                         generator=torch.Generator().manual_seed(7)).ids  # fmt: skip
    val = np.concatenate([[0, *r] for r in rows.tolist()])  # "\n" + "\n r r s": a blank line each
    meta = {"source": "segments", "holdout": "fresh segments", "params": {"tokenizer": "char"}}
    meta["vocab_size"] = 32
    folder = tmp_path_factory.mktemp("copying")
    train = segment_batch(256, settings.seq_len, settings.vocab, settings.min_len, settings.max_len,
                          generator=torch.Generator().manual_seed(8)).ids  # fmt: skip
    (folder / TRAIN).write_bytes(train.numpy().astype(id_dtype(32)).tobytes())  # the n-gram tables' text
    with torch.no_grad():  # its held-out loss, as a text run records it
        logits = model.eval()(rows[:, :-1])  # [B, T-1, V]
        val_loss = float(F.cross_entropy(logits.transpose(1, 2), rows[:, 1:]))
    return TextModel(model, tokenizer, meta, folder, val, val_loss, 0.0)


def test_a_model_that_copies_is_found_out(copying):
    result = measure(copying, QUICK, {})
    print(result.heads_line(), result.rows, sep="\n")
    assert result.above and all(layer == 1 for layer, _ in result.induction)  # in the second layer
    assert max(map(max, result.scores["previous"][:1])) > 0.5  # beside a first-layer previous-token head
    rand = result.rows[PROBES[0]]
    assert rand["intact"]["copies"] and rand["intact"]["gain"] > 1.0  # the repeat is far easier
    assert rand["induction heads zeroed"]["gain"] < 0.5 * rand["intact"]["gain"]  # ... until they go
    assert rand["control heads zeroed"]["gain"] > 0.5 * rand["intact"]["gain"]  # other heads: not so
    # two of layer 1's four heads are induction heads: the other two are the one distinct control draw
    assert result.control == [[(1, 1), (1, 2)]]
    test = result.verdict["tests"][PROBES[0]]
    assert len(test["draws"]) == 1 and test["interval"][0] > 1.0 and test["answer"] == "agrees"
    # the gate: copying beats every n-gram table of the segments by far more than 0.1 nats
    gate = result.model["gate"]
    assert gate["passed"] and gate["model_loss"] < gate["best_loss"] - 0.5
    assert result.verdict["answer"] == "agrees" and result.verdict["reading"].startswith("holds")
    # the same numbers on a model that failed its gate: nothing is concluded
    weak = _verdict(True, result.rows, result.verdict["tests"], competent=False)
    assert weak["answer"] == "model too weak"


def _rows(copies: bool) -> dict:
    return {"intact": {"copies": copies}}


def test_the_verdict_follows_the_shared_rule():
    rows = {PROBES[0]: _rows(True), PROBES[1]: _rows(False)}
    induction = torch.tensor([0.0, 0.1, -0.1, 0.0])  # [B]: the gain left with the induction heads zeroed
    controls = torch.tensor([[2.0, 2.1, 1.9, 2.0], [1.8, 2.2, 2.0, 2.0]])  # [K, B]
    agree = {p: causal_test(induction, controls) for p in PROBES}
    assert agree[PROBES[0]]["difference"] == 2.0 and agree[PROBES[0]]["draws"] == [2.0, 2.0]
    assert agree[PROBES[0]]["answer"] == "agrees"
    assert _verdict(True, rows, agree, competent=True)["answer"] == "agrees"
    assert _verdict(True, rows, agree, competent=False)["answer"] == "model too weak"
    mixed = {p: causal_test(induction, torch.tensor([[-0.5, 0.6, 0.1, 0.0]])) for p in PROBES}
    assert mixed[PROBES[0]]["answer"] == "inconclusive"
    assert _verdict(True, rows, mixed, competent=True)["answer"] == "inconclusive"
    below = {p: causal_test(induction, torch.tensor([[-0.5, -0.4, -0.6, -0.5]])) for p in PROBES}
    assert _verdict(True, rows, below, competent=True)["answer"] == "disagrees"
    none = {PROBES[0]: _rows(False), PROBES[1]: _rows(False)}  # copies on no probe
    verdict = _verdict(False, none, agree, competent=True)
    assert verdict["answer"] == "inconclusive" and "(it has none)" in verdict["reading"]


def test_control_draws_are_distinct_and_as_many_as_the_heads_allow():
    ranked = [(1, h, 0.9 - h / 10) for h in range(6)] + [(0, h, 0.0) for h in range(6)]
    draws = control_draws(ranked, [(1, 0)], seed=0, draws=5)
    assert len(draws) == 5 and len({tuple(d) for d in draws}) == 5 and all(d[0][0] == 1 for d in draws)
    assert len(control_draws(ranked[:3], [(1, 0), (1, 1)], seed=0, draws=5)) == 1  # only head 1.2 is left


def test_control_heads_come_from_the_induction_heads_layers():
    ranked = [(1, 0, 0.9), (1, 1, 0.1), (1, 2, 0.1), (0, 0, 0.0), (0, 1, 0.0)]
    assert all(la == 1 for la, _ in control_heads(ranked, [(1, 0)], seed=0))
    assert len(control_heads(ranked, [(1, 0), (1, 1), (1, 2)], seed=0)) == 2  # only layer 0 is left


def test_a_text_run_from_the_command_line(text_run, tmp_path):
    done = CliRunner().invoke(
        cli,
        [
            "experiment",
            "induction",
            "--text",
            "--quick",
            "--run",
            str(text_run),
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert set(data["probes"]) == set(PROBES) and data["claim"].startswith("Interpretability research")
    for conditions in data["probes"].values():
        assert {c["loss_first"] > 0 and c["loss_repeat"] > 0 for c in conditions.values()} == {True}
    assert len(data["scores"]["induction"]) == 2 and len(data["scores"]["induction"][0]) == 2  # [L][h]
    assert (tmp_path / "induction.png").read_bytes()[:4] == b"\x89PNG"
    # the run was trained before (a fixture) and is reused: its training time comes from its history
    history = json.loads(next(text_run.glob("ckpt-*/state.json")).read_text())["history"]
    assert data["model"]["trained_seconds"] == round(training_seconds(history), 1) > 0
    # the competence gate: the run's held-out loss against the n-gram tables of its own plays
    gate = data["model"]["gate"]
    assert gate["best_loss"] == min(data["model"]["baselines"].values())
    assert gate["passed"] is (gate["model_loss"] <= gate["best_loss"] - 0.1)
    assert data["verdict"]["answer"] in {"model too weak", "agrees", "disagrees", "inconclusive"}
    if not gate["passed"]:
        assert data["verdict"]["answer"] == "model too weak"


def test_training_seconds_adds_each_session_of_a_resumed_run():
    history = [{"elapsed_s": 2.0}, {"elapsed_s": 5.0}, {"step": 9}, {"elapsed_s": 1.5}, {"elapsed_s": 4.0}]
    assert training_seconds(history) == 9.0 and training_seconds([]) == 0.0


@pytest.mark.parametrize(
    "args,message",
    [
        (["--text", "--steps", "5"], "--steps applies to the synthetic models"),
        (["--run", "{not_text}"], "--run {not_text} holds a run that is not a GPT trained on text"),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path):
    not_text = tmp_path / "task-run"
    not_text.mkdir()
    (not_text / "latest.json").write_text("{}")
    args = [a.replace("{not_text}", str(not_text)) for a in args]
    done = CliRunner().invoke(cli, ["experiment", "induction", *args, "--out", str(tmp_path / "out")])
    message = message.replace("{not_text}", str(not_text))
    assert done.exit_code == 2 and message in done.output and "Traceback" not in done.output


def test_the_summary_names_the_head_the_ablation_chose_when_rounded_scores_tie():
    scores = {"induction": [[0.0100, 0.0, 0.0100], [0.0, 0.0100]]}  # tied once rounded to 4 places
    verdict = {"reading": "is not borne out", "competent": True, "answer": "inconclusive", "tests": {}}
    result = TextInductionResult(QUICK, {}, scores, [(0, 2), (1, 1)], False, [], {}, verdict, {})
    assert result.summary().startswith("Best induction score 0.01 (head 0.2;")
