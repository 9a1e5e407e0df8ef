"""The click parameter types every command shares, with choices read from the library's registries.

A bad value exits 2 with one line naming the flag (``Error: --heads must be a positive integer,
got '0'``). Choices are never written by hand: :func:`choice` takes the registry (a tuple or a dict,
e.g. :data:`attnlab.tasks.TASKS`, :data:`attnlab.nn.config.ATTENTION_KINDS`) and ``--help`` lists
its keys, so a task, model or topic added to the library appears in the help by itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import click

from attnlab.commands._errors import BadInput


def _flag(param) -> str:
    return param.opts[0] if param is not None and param.opts else "value"


class Positive(click.ParamType):
    """A positive integer written in ASCII digits; anything else exits 2 naming the flag."""

    name = "N"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        text = str(value).strip()
        if text.isascii() and text.isdigit() and int(text) > 0:
            return int(text)
        raise BadInput(f"{_flag(param)} must be a positive integer, got {value!r}")


class PositiveNumber(click.ParamType):
    """A finite number > 0 (a rate, a time)."""

    name = "X"

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = -1.0
        if not x > 0 or not math.isfinite(x):
            raise BadInput(f"{_flag(param)} must be a positive number, got {value!r}")
        return x


class Choice(click.ParamType):
    """One of a registry's names (read when used, so the registry may live in a heavy module)."""

    name = "CHOICE"

    def __init__(self, registry: Iterable[str] | Callable[[], Iterable[str]]):
        self._registry = registry

    @property
    def choices(self) -> tuple[str, ...]:
        reg = self._registry() if callable(self._registry) else self._registry
        return tuple(reg)

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(self.choices) + "]"

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        raise BadInput(f"{_flag(param)} must be one of {', '.join(self.choices)}; got {value!r}")


POSITIVE = Positive()
POSITIVE_NUMBER = PositiveNumber()


def choice(registry: Iterable[str] | Callable[[], Iterable[str]]) -> Choice:
    """A :class:`Choice` over ``registry`` (a tuple, a dict's keys, or a function returning them)."""
    return Choice(registry)


def options(*opts):
    """One decorator applying click options in the order listed (the order ``--help`` shows them)."""

    def apply(fn):
        for option in reversed(opts):
            fn = option(fn)
        return fn

    return apply


def device_option():
    """``--device auto|cpu|cuda`` (:data:`attnlab.devices.DEVICES`): where the model runs."""
    from attnlab.devices import DEVICES

    return click.option(
        "--device",
        default="auto",
        show_default=True,
        type=choice(DEVICES),
        help="Where to run: auto (CUDA when present, else CPU), cpu, or cuda (an error if absent).",
    )
