"""Shared error handling for commands: a library ``ValueError`` becomes exit status 2 and one line."""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import click


class BadInput(click.ClickException):
    """A one-line ``Error: ...`` on stderr and exit status 2 (click's usage-error status)."""

    exit_code = 2


# arguments that take many texts, where "-" stands for one text per non-empty line of standard input
# (a single text, "-" or a file's name, is read by attnlab.commands._text.text_or_file)
TEXT_ARGUMENTS = {"texts", "text"}


def _from_stdin(name: str, value: Any) -> Any:
    """``-`` among many texts (``embed -``, ``translate DIR -``) reads one text per non-empty line of
    standard input."""
    if name not in TEXT_ARGUMENTS or not (isinstance(value, tuple) and "-" in value):
        return value
    from attnlab.tasks.text_source import read_lines  # bounded lines, binary refused (imports torch)

    lines = []
    try:
        for number, raw in read_lines(sys.stdin.buffer, "standard input"):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BadInput(
                    f"standard input line {number} is not UTF-8 text (byte {exc.start + 1})"
                ) from None
            if line.strip():
                lines.append(line)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if not lines:
        raise BadInput(f"{name} '-' read no lines from standard input")
    out: list[str] = []
    for v in value:
        out.extend(lines if v == "-" else [v])
    return tuple(out)


def _check_text(name: str, value: Any) -> None:
    """Arguments that are not valid UTF-8 arrive as lone surrogates (Python's surrogateescape);
    refuse them here, named, instead of letting a tokenizer raise a TypeError deep inside."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    for v in values:
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = v[exc.start : exc.end].encode("utf-8", "surrogateescape")
                where = f"bytes {bad!r} at character {exc.start}"
                raise BadInput(f"{name.replace('_', ' ')} is not valid UTF-8 text ({where})") from None


# warnings printed as one ``Warning:`` line: a tokenizer's (it names every character mapped to
# ``<unk>``), a loader's (it names the weights holding NaN or infinity) and the study database's
# (it names the tables it had to create)
ONE_LINE = ("UnknownCharacterWarning", "NonFiniteWeightsWarning", "StudyRepairedWarning")


def _one_line_warnings(show: Callable[..., None]) -> Callable[..., None]:
    """A ``warnings.showwarning`` that prints the warnings of :data:`ONE_LINE` as one ``Warning:``
    line on stderr, and any other warning as Python does."""

    def shown(message, category, filename, lineno, file=None, line=None):
        if category.__name__ in ONE_LINE:  # (their modules import torch: matched by name)
            click.echo(f"Warning: {message}", err=True)
        else:
            show(message, category, filename, lineno, file, line)

    return shown


def command_flags() -> dict[str, str]:
    """The running command's parameters by Python name (``as_json`` -> ``--json``, ``d_model`` ->
    ``--d-model``, an argument ``out_dir`` -> ``OUT_DIR``): what a library message's ``name=``
    becomes. Empty outside a click command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return {}
    flags = {}
    for param in ctx.command.params:
        long = [opt for opt in param.opts if opt.startswith("--")]
        if isinstance(param, click.Option) and param.name and long:
            flags[param.name] = long[0]
        elif isinstance(param, click.Argument) and param.name:
            flags[param.name] = param.human_readable_name
    return flags


def with_flags(message: str, flags: Mapping[str, str], names: Mapping[str, str] | None = None) -> str:
    """A library message with the command's flags in place of the Python arguments it names.

    The library writes an argument as ``name=`` (``"resume=True needs out_dir=DIR"``,
    ``"attention='ssm' is ..."``, a config's ``model_params.max_len=16``); each ``name`` in ``flags``
    (the command's options by Python name) or ``names`` (other library names -> the flag that sets
    them, e.g. ``out_dir`` -> ``--out``, a config field ``batch_size`` -> ``--batch``) becomes the flag:
    ``name=True`` -> ``--name``, ``name=VALUE`` -> ``--name VALUE``, a bare ``name=`` -> ``--name``.
    A message that starts with a bare name of ``names`` (``"lr must be ..."``, as the shared checks
    of :mod:`attnlab._checks` name their argument) starts with its flag (``"--lr must be ..."``)."""
    known = {**flags, **(names or {})}
    if not known:
        return message

    def flag(match: re.Match) -> str:
        name, value = match.group(1), match.group(2)
        if name not in known:
            return match.group(0)
        if value == "True":
            return known[name]
        return f"{known[name]} {value}" if value else known[name]

    message = re.sub(r"(?<![\w.-])([A-Za-z_][\w.]*\w|[A-Za-z_])=(?!=)(True\b|[^\s,;:)]*)", flag, message)
    for name, option in (names or {}).items():
        if re.match(rf"{re.escape(name)}\b(?!=)", message):
            return option + message[len(name) :]
    return message


def usage_errors(
    fn: Callable[..., Any] | None = None, *, names: Callable[[], Mapping[str, str]] | None = None
) -> Any:
    """Decorate a click callback so ``ValueError``/``FileNotFoundError`` exit 2 with one clear line
    naming the command's flags (:func:`with_flags`; ``names`` gives the library names that differ from
    the options', read only when there is an error), and a tokenizer's unknown-character warning is
    one line on stderr. Used bare (``@usage_errors``) or as ``@usage_errors(names=...)``."""
    if fn is None:
        return functools.partial(usage_errors, names=names)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            kwargs[name] = value = _from_stdin(name, value)
            _check_text(name, value)
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warnings(warnings.showwarning)
                return fn(*args, **kwargs)
        except (ValueError, FileNotFoundError) as exc:
            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise BadInput(with_flags(line, command_flags(), names() if names else None)) from None

    return wrapper
