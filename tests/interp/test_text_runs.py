"""The logit lens and the head scan on a GPT trained on text (``attnlab train --text``): the lens's
last layer is the model's own logits and its prediction sharpens with depth; ``attnlab heads`` reads
a text run's tokenizer (a repeat probe with the line break as BOS, or any text)."""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.text_model import text_model
from attnlab.interp.lens import eventual_token_by_layer, logit_lens
from attnlab.interp.scan import scan_repeat, scan_text


def test_the_logit_lens_on_a_text_run(text_run):
    lm = text_model(text_run, text_run.parent, "quick", log=lambda *a: None)
    pieces = lm.pieces(lm.speech_starts(8, 33), 33)  # held-out lines [8, 33]
    ids, nxt = pieces[:, :32], pieces[:, 1:]
    lens = logit_lens(lm.model, ids)  # [L + 1, B, T, V]
    with torch.no_grad():
        torch.testing.assert_close(lens[-1], lm.model(ids), rtol=0, atol=1e-6)
    loss = [float(F.cross_entropy(layer.flatten(0, 1), nxt.flatten())) for layer in lens]  # per layer
    print("held-out loss read at each layer:", [round(v, 3) for v in loss])
    assert loss[-1] < loss[0] - 0.5  # the residual stream is refined layer by layer
    by_layer = eventual_token_by_layer(lens)
    assert bool((by_layer["rank"][-1] == 0).all())
    assert float(by_layer["prob"][-1].mean()) > float(by_layer["prob"][0].mean()) + 0.1


def test_the_head_scan_on_a_text_run(text_run):
    (scan,) = scan_repeat(text_run, batch=4)
    assert scan.kind == "causal" and scan.tokens[0] == "\n"  # a text has no BOS: a line break stands in
    assert len(scan.tokens) == 1 + 2 * 20 and len(scan.scores["induction"]) == 2  # [L][h]
    assert all(0 <= v <= 1 for rows in scan.scores.values() for row in rows for v in row)
    (text,) = scan_text("NURSE:\nab cd, ab cd.", text_run)
    assert text.tokens[:7] == list("NURSE:\n") and len(text.scores["previous"][0]) == 2


def test_heads_command_on_a_text_run(text_run):
    done = CliRunner().invoke(cli, ["heads", str(text_run), "--json", "--length", "10"])
    assert done.exit_code == 0, done.output
    (scan,) = json.loads(done.stdout)
    assert scan["view"] == "decoder causal self-attention" and len(scan["tokens"]) == 21
    bad = CliRunner().invoke(cli, ["heads", str(text_run), "--tokens", "ROMEO: café"])
    assert bad.exit_code == 2 and "'é' (U+00E9)" in bad.output and "Traceback" not in bad.output
