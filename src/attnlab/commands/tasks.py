"""``attnlab tasks list`` and ``attnlab tasks show NAME``: the built-in generated tasks."""

from __future__ import annotations

import itertools

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import BadInput, usage_errors
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
@click.argument("name", type=choice("attnlab.names:TASKS"))
@click.option("--n", "n", default=5, show_default=True, type=POSITIVE, help="Examples to print.")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Random seed of the examples.")
@click.option(
    "--split",
    default="train",
    show_default=True,
    type=choice("attnlab.names:SPLITS"),
    help="Which deterministic split the examples come from.",
)
@click.option("--min-len", type=POSITIVE, default=None, help="Shortest source (symbol tasks, dates filter).")
@click.option("--max-len", type=POSITIVE, default=None, help="Longest source.")
@click.option("--num-symbols", type=POSITIVE, default=None, help="Symbol tasks: alphabet size.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@usage_errors
def show(
    name: str,
    n: int,
    seed: int,
    split: str,
    min_len: int | None,
    max_len: int | None,
    num_symbols: int | None,
    as_json: bool,
) -> None:
    """Print NAME's examples: source -> target (with their token ids under --json)."""
    from attnlab.tasks import EOS, TASKS, get_task

    if num_symbols is not None and "num_symbols" not in TASKS[name]().params():
        symbolic = ", ".join(k for k, cls in TASKS.items() if "num_symbols" in cls().params())
        raise BadInput(f"--num-symbols applies to the symbol tasks ({symbolic}); {name} has no alphabet size")
    given = (("min_len", min_len), ("max_len", max_len), ("num_symbols", num_symbols))
    task = get_task(name, **{k: v for k, v in given if v is not None})
    examples = task.iter_sample(split, n, seed=seed)  # streamed: --n 10**9 prints in bounded memory
    if as_json:
        # drawn once to the end before anything is printed, so a split that cannot be filled prints no
        # half document; then drawn again (the same seeded stream) and written one example at a time
        for _ in examples:
            pass
        _print_json(task, split, task.iter_sample(split, n, seed=seed), EOS)
        return
    first = list(itertools.islice(examples, 50))  # aligned columns over the first 50, drawn before printing
    click.echo(f"{task.describe()}")
    click.echo(
        f"params {_params_text(task.params())}  vocabulary {task.tokenizer.vocab_size} ids "
        f"(PAD=0 BOS=1 EOS=2 UNK=3 SEP=4)  split {split}  seed {seed}"
    )
    width = max(len(e.src) for e in first)
    for e in itertools.chain(first, examples):
        click.echo(f"  {e.src:<{width}}  ->  {e.tgt}")


def _print_json(task, split: str, examples, eos: int) -> None:
    """The document ``dumps_json(indent=2)`` would print for ``{task, vocab_size, split, examples}``,
    written one example at a time (``examples``: an iterator of :class:`attnlab.tasks.Example`, each
    with its ``src_ids`` / ``tgt_ids``: the token ids and ``eos``)."""
    tok = task.tokenizer
    head = {"task": task.spec(), "vocab_size": tok.vocab_size, "split": split}
    click.echo(dumps_json(head, indent=2)[:-2] + ',\n  "examples": [')
    for i, e in enumerate(examples):
        item = {
            "src": e.src,
            "tgt": e.tgt,
            "src_ids": tok.encode(e.src) + [eos],
            "tgt_ids": tok.encode(e.tgt) + [eos],
        }
        text = "\n".join("    " + line for line in dumps_json(item, indent=2).splitlines())
        click.echo(("" if i == 0 else ",\n") + text, nl=False)
    click.echo("\n  ]\n}")
