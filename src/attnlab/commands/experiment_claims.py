"""The claim experiments of ``attnlab experiment``: one command each, all alike.

``attnlab experiment paths | residuals | gqa | relations | icl | beam | scoring [--quick] [--out DIR]
[--seed N] [--quiet] [--json]`` each test one sentence of the course material that it states in words
only (:mod:`attnlab.experiments.claim_result`): the sentence, quoted, then the measured table, the
verdict, and with ``--out`` the JSON, the table and the plot. The library modules hold the logic;
:data:`CLAIMS` names them and says what each measures (the command's help).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

import click

from attnlab.commands._errors import usage_errors
from attnlab.commands._types import SEED

# name -> (module under attnlab.experiments, what the command measures)
CLAIMS = {
    "paths": (
        "paths",
        "RNN against Transformer (Week 1 notes, section 1): the gradient of the last output with respect to "
        "the first input through a GRU and through one attention layer as T grows, and the time of a "
        "training step of each.",
    ),
    "residuals": (
        "residuals",
        "Residuals and layer norm (Week 19 course page, the block's roles): deep stacks with and without "
        "residuals, pre- against post-norm; the first block's gradient and every block's activation "
        "scale, at initialisation and after some training.",
    ),
    "gqa": (
        "gqa",
        "GQA (Week 19 course page): GPTs differing only in the number of KV heads (h, h/2, 2, 1) learn "
        "Shakespeare's plays by character; held-out loss against KV-cache bytes per token.",
    ),
    "relations": (
        "relations",
        "Head specialisation (Week 19 course page against the Week 1 notes): every MiniLM head scored on "
        "hand-labelled verb -> subject and pronoun -> antecedent pairs, against a position baseline.",
    ),
    "icl": (
        "icl",
        "Induction heads and in-context learning (Week 19 course page): the ICL score (late loss minus "
        "early loss, Olsson et al. 2022) beside the induction score as the induction experiment's "
        "models train.",
    ),
    "beam": (
        "beam",
        "Beam search where there is a right answer (Week 19 course page): exact match of greedy and beam "
        "2/4/8 on the reverse and dates tasks, a small Transformer trained briefly on each (cached in "
        "OUT/models), beam minus greedy with a bootstrap interval over the examples.",
    ),
    "scoring": (
        "scoring",
        "Dot-product against additive scoring (Week 19 course page): Bahdanau, Luong dot and scaled "
        "dot-product attention timed at equal sizes in NumPy and PyTorch (ratios).",
    ),
    "facts": (
        "facts",
        "Facts in the MLP (Week 19 course page, the block's roles): a small GPT learns made-up facts "
        "('<subject> lives in <city>'), then each layer's MLP or attention output is mean-ablated; fact "
        "recall with a bootstrap interval over the facts (the model cached in OUT/models/facts).",
    ),
}


def _claim_command(name: str, module: str, summary: str, one_writer: Callable) -> click.Command:
    @click.command(name, help=summary)
    @click.option("--quick", is_flag=True, help="The small preset (well under a minute of CPU).")
    @click.option("--out", type=str, default=None, help="Folder for results.json, table.txt and the plot.")
    @click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the weights and the data.")
    @click.option("--quiet", is_flag=True, help="No progress output.")
    @click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
    @usage_errors
    def command(quick: bool, out: str | None, seed: int, quiet: bool, as_json: bool) -> None:
        experiment = importlib.import_module(f"attnlab.experiments.{module}")
        settings = dataclasses.replace(experiment.QUICK if quick else experiment.Settings(), seed=seed)
        log = (lambda *_: None) if (as_json or quiet) else (lambda line: click.echo(line, err=True))
        with one_writer(out):  # checked and locked before any work
            result = experiment.run(settings, out, log=log, progress=not (quiet or as_json))
        if as_json:
            from attnlab.experiments.claim_result import dumps

            click.echo(dumps(result))
            return
        click.echo(result.text())
        if result.files:
            click.echo(f"wrote {result.files['json']}, {result.files['table']} and {result.files['plot']}")
        else:
            click.echo("no --out: the table only (no JSON or plot files written)")

    return command


def claim_commands(one_writer: Callable) -> list[click.Command]:
    """One command per :data:`CLAIMS` entry; ``one_writer(out)`` is the ``--out`` folder's lock."""
    return [_claim_command(name, module, summary, one_writer) for name, (module, summary) in CLAIMS.items()]
