"""``attnlab tasks list`` and ``attnlab tasks show NAME``: the built-in generated tasks."""

from __future__ import annotations

import json

import click

from attnlab.commands._errors import usage_errors


@click.group()
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
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']:<8} {r['description']}")


def _params_text(params: dict) -> str:
    """``min_len=3 max_len=12 num_symbols=10``: unset (None) values left out, lists comma-joined."""
    return " ".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
        for k, v in params.items()
        if v is not None
    )


@tasks.command("show")
@click.argument("name")
@click.option("--n", "n", default=5, show_default=True, type=int, help="Examples to print.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--split", default="train", show_default=True, type=click.Choice(["train", "validation", "test"])
)
@click.option("--min-len", type=int, default=None, help="Shortest source (symbol tasks, dates filter).")
@click.option("--max-len", type=int, default=None, help="Longest source.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@usage_errors
def show(
    name: str, n: int, seed: int, split: str, min_len: int | None, max_len: int | None, as_json: bool
) -> None:
    """Print NAME's examples: source -> target (with their token ids under --json)."""
    from attnlab.tasks import EOS, get_task

    kw = {k: v for k, v in (("min_len", min_len), ("max_len", max_len)) if v is not None}
    task = get_task(name, **kw)
    examples = task.sample(split, n, seed=seed)
    tok = task.tokenizer
    if as_json:
        click.echo(
            json.dumps(
                {
                    "task": task.spec(),
                    "vocab_size": tok.vocab_size,
                    "split": split,
                    "examples": [
                        {
                            "src": e.src,
                            "tgt": e.tgt,
                            "src_ids": tok.encode(e.src) + [EOS],
                            "tgt_ids": tok.encode(e.tgt) + [EOS],
                        }
                        for e in examples
                    ],
                },
                indent=2,
            )
        )
        return
    click.echo(f"{task.describe()}")
    click.echo(
        f"params {_params_text(task.params())}  vocabulary {tok.vocab_size} ids "
        f"(PAD=0 BOS=1 EOS=2 UNK=3 SEP=4)  split {split}  seed {seed}"
    )
    width = max(len(e.src) for e in examples)
    for e in examples:
        click.echo(f"  {e.src:<{width}}  ->  {e.tgt}")
