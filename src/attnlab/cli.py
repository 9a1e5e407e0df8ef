"""The ``attnlab`` command: a thin dispatcher, no logic of its own.

Each subcommand lives in :mod:`attnlab.commands` and is imported only when it is run, so
``attnlab --help`` stays fast and a command's heavy imports (torch, matplotlib) are paid only
by the command that needs them.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import os
import sys

import click

from attnlab.commands._types import SuggestingGroup

# command name -> (module under attnlab.commands, attribute holding the click command)
COMMANDS: dict[str, tuple[str, str]] = {
    "lesson": ("lesson", "lesson"),
    "audit": ("audit", "audit"),
    "embed": ("embed", "embed"),
    "generate": ("generate", "generate"),
    "export": ("export", "export"),
    "tasks": ("tasks", "tasks"),
    "train": ("train", "train"),
    "evaluate": ("train", "evaluate"),
    "translate": ("train", "translate"),
    "experiment": ("experiment", "experiment"),
    "demo": ("demo", "demo"),
    "figures": ("viz", "figures"),
    "explore": ("viz", "explore"),
    "myths": ("myths", "myths"),
    "quiz": ("quiz", "quiz"),
    "heads": ("heads", "heads"),
    "prune": ("heads", "prune"),
    "patch": ("patch", "patch"),
    "attribute": ("patch", "attribute"),
    "compose": ("patch", "compose"),
    "practice": ("practice", "practice"),
    "study": ("study", "study"),
    "serve": ("serve", "serve"),
}


def _available(module: str) -> bool:
    return importlib.util.find_spec(f"attnlab.commands.{module}") is not None


class LazyGroup(SuggestingGroup):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, (mod, _) in COMMANDS.items() if _available(mod))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _available(COMMANDS[name][0]):
            return None
        mod, attr = COMMANDS[name]
        return getattr(importlib.import_module(f"attnlab.commands.{mod}"), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``attnlab --help``, as click writes it, from each command's summary
        (:func:`summary`) read from its module's source: no command module is imported."""
        rows = [(name, summary(name)) for name in self.list_commands(ctx)]
        rows = [(name, cmd) for name, cmd in rows if not cmd.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


_SUMMARY_FIELDS = ("help", "short_help", "hidden", "deprecated")


def summary(name: str) -> click.Command:
    """The command ``name`` of :data:`COMMANDS` as its help list needs it: a bare ``click.Command``
    with the ``help`` (the docstring of the function the click decorator wraps, or its ``help=``),
    ``short_help``, ``hidden`` and ``deprecated`` its decorator gives, read from the module's source
    with :mod:`ast` (the module is not imported, so neither is torch)."""
    mod, attr = COMMANDS[name]
    tree = _source(mod)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == attr)
    fields = {"help": ast.get_docstring(fn, clean=False)}
    for dec in fn.decorator_list:
        called = dec.func if isinstance(dec, ast.Call) else None
        if getattr(called, "attr", getattr(called, "id", None)) in ("command", "group"):
            fields |= {k.arg: _value(k.value, tree) for k in dec.keywords if k.arg in _SUMMARY_FIELDS}
    return click.Command(name, **fields)


@functools.cache  # (train.py holds three commands, patch.py three, heads.py and viz.py two)
def _source(mod: str) -> ast.Module:
    """The syntax tree of ``attnlab.commands.<mod>``, read without importing it."""
    spec = importlib.util.find_spec(f"attnlab.commands.{mod}")
    return ast.parse(spec.loader.get_source(spec.name))


def _value(node: ast.expr, tree: ast.Module):
    """A decorator argument's value: a literal, a sum of strings, or a name assigned one at the top of
    the module (or imported from another command module)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _value(node.left, tree) + _value(node.right, tree)
    if not isinstance(node, ast.Name):
        return ast.literal_eval(node)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == node.id for t in stmt.targets):
            return _value(stmt.value, tree)
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("attnlab.commands."):
            for alias in stmt.names:
                if (alias.asname or alias.name) == node.id:
                    return _value(ast.Name(alias.name), _source(stmt.module.rpartition(".")[2]))
    raise ValueError(f"attnlab.cli: cannot read {node.id!r} from the source")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attnlab")
def cli() -> None:
    """attnlab: attention, implemented twice and proven correct."""


def leaf_commands(
    group: click.Group | None = None, path: tuple[str, ...] = ()
) -> list[tuple[str, click.Command]]:
    """Every runnable command under ``group`` (default: attnlab's own), depth first in ``--help``
    order, as ``("audit cost", command)`` pairs: what the help, sweep and JSON tests walk.

    Returns:
        ``list[tuple[str, click.Command]]``.
    """
    group = cli if group is None else group
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            found += leaf_commands(cmd, (*path, name))
        else:
            found.append((" ".join((*path, name)), cmd))
    return found


def main(argv: list[str] | None = None) -> None:
    """Console entry point. Bad arguments exit with status 2 and a one-line message; a closed standard
    input reads as empty; a reader that goes away (``| head``) ends the command quietly (click's status 1);
    an error of the system's (a full disk, a file that cannot be written) is one line and status 1."""
    if sys.stdin is None:  # started with stdin closed (<&-): every '-' then says it read nothing
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
    try:
        rv = cli.main(args=argv, prog_name="attnlab", standalone_mode=False)
    except click.UsageError as exc:  # one line, not click's usage block
        hint = f" (try '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"Error: {exc.format_message()}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt) as exc:  # Ctrl-C; a training run says what it saved
        cause = exc if isinstance(exc, KeyboardInterrupt) else exc.__cause__  # click wraps it in Abort
        said = str(cause) if isinstance(cause, KeyboardInterrupt) else ""
        click.echo(f"interrupted: {said}" if said else "interrupted", err=True)
        sys.exit(getattr(cause, "exit_code", 130))
    except OSError as exc:
        _drop_stdout()  # it may be stdout that failed (a full disk): Python's flush at exit would again
        where = f" ({exc.filename})" if exc.filename else ""
        click.echo(f"Error: {exc.strerror or exc}{where}", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


def _drop_stdout() -> None:
    """Point stdout at /dev/null (after flushing what it can), so that Python's flush at exit cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    main()
