"""Shared error handling for commands: a library ``ValueError`` becomes exit status 2 and one line."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click


class BadInput(click.ClickException):
    """A one-line ``Error: ...`` on stderr and exit status 2 (click's usage-error status)."""

    exit_code = 2


def usage_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click callback so ``ValueError``/``FileNotFoundError`` exit 2 with one clear line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ValueError, FileNotFoundError) as exc:
            raise BadInput(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    return wrapper
