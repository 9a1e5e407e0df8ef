"""Shared error handling for commands: a library ``ValueError`` becomes exit status 2 and one line."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click


class BadInput(click.ClickException):
    """A one-line ``Error: ...`` on stderr and exit status 2 (click's usage-error status)."""

    exit_code = 2


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


def usage_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click callback so ``ValueError``/``FileNotFoundError`` exit 2 with one clear line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            _check_text(name, value)
        try:
            return fn(*args, **kwargs)
        except (ValueError, FileNotFoundError) as exc:
            raise BadInput(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    return wrapper
