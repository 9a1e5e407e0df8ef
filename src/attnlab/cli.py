"""The ``attnlab`` command: a thin dispatcher, no logic of its own.

Each subcommand lives in :mod:`attnlab.commands` and is imported only when it is run, so
``attnlab --help`` stays fast and a command's heavy imports (torch, matplotlib) are paid only
by the command that needs them.
"""

from __future__ import annotations

import contextlib
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
