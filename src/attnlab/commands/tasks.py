"""``attnlab tasks list`` and ``attnlab tasks show NAME``: the built-in generated tasks."""

from __future__ import annotations

import itertools

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import usage_errors
from attnlab.commands._types import POSITIVE, SEED, SuggestingGroup, choice


@click.group(cls=SuggestingGroup)
def tasks() -> None:
    """The built-in tasks (generated, seeded, no downloads)."""


@tasks.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@usage_errors
def list_tasks(as_json: bool) -> None:
    """List the tasks with their default parameters."""
    from attnlab.tasks import TASKS

    rows = []
    for name, cls in TASKS.items():
        task = cls()
        rows.append(
            {
                "name": name,
                "description": task.describe(),
                "vocab_size": task.tokenizer.vocab_size,
                "params": task.params(),
            }
        )
    if as_json:
        click.echo(dumps_json(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']:<8} {r['description']}")
        click.echo(f"{'':<8} defaults: {_params_text(r['params'])}; vocabulary {r['vocab_size']} ids")


def _params_text(params: dict) -> str:
    """``min_len=3 max_len=12 num_symbols=10``: unset (None) values left out, lists comma-joined."""
    return " ".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
        for k, v in params.items()
        if v is not None
    )


@tasks.command("show")
@click.argument("name", type=choice("attnlab.tasks:TASKS"))
@click.option("--n", "n", default=5, show_default=True, type=POSITIVE, help="Examples to print.")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Random seed of the examples.")
@click.option(
    "--split",
    default="train",
    show_default=True,
    type=choice("attnlab.tasks.base:SPLITS"),
    help="Which deterministic split the examples come from.",
)
@click.option("--min-len", type=POSITIVE, default=None, help="Shortest source (symbol tasks, dates filter).")
@click.option("--max-len", type=POSITIVE, default=None, help="Longest source.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@usage_errors
def show(
    name: str, n: int, seed: int, split: str, min_len: int | None, max_len: int | None, as_json: bool
) -> None:
    """Print NAME's examples: source -> target (with their token ids under --json)."""
    from attnlab.tasks import EOS, get_task

    kw = {k: v for k, v in (("min_len", min_len), ("max_len", max_len)) if v is not None}
    task = get_task(name, **kw)
    tok = task.tokenizer
    examples = task.iter_sample(split, n, seed=seed)  # streamed: --n 10**9 prints in bounded memory
    if as_json:
        # the same document dumps_json(indent=2) would print, written one example at a time
        head = {"task": task.spec(), "vocab_size": tok.vocab_size, "split": split}
        click.echo(dumps_json(head, indent=2)[:-2] + ',\n  "examples": [')
        for i, e in enumerate(examples):
            item = {
                "src": e.src,
                "tgt": e.tgt,
                "src_ids": tok.encode(e.src) + [EOS],
                "tgt_ids": tok.encode(e.tgt) + [EOS],
            }
            text = "\n".join("    " + line for line in dumps_json(item, indent=2).splitlines())
            click.echo(("" if i == 0 else ",\n") + text, nl=False)
        click.echo("\n  ]\n}")
        return
    click.echo(f"{task.describe()}")
    click.echo(
        f"params {_params_text(task.params())}  vocabulary {tok.vocab_size} ids "
        f"(PAD=0 BOS=1 EOS=2 UNK=3 SEP=4)  split {split}  seed {seed}"
    )
    first = list(itertools.islice(examples, 50))  # aligned columns over the first 50
    width = max(len(e.src) for e in first)
    for e in itertools.chain(first, examples):
        click.echo(f"  {e.src:<{width}}  ->  {e.tgt}")
