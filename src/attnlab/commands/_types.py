"""The click parameter types every command shares, with choices read from the library's registries.

A bad value exits 2 with one line naming the flag (``Error: --heads must be a positive integer,
got '0'``). Choices are never written by hand: :func:`choice` takes the registry (a tuple or a dict,
e.g. :data:`attnlab.tasks.TASKS`, :data:`attnlab.nn.config.ATTENTION_KINDS`) and ``--help`` lists
its keys, so a task, model or topic added to the library appears in the help by itself.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable

import click

from attnlab._checks import did_you_mean
from attnlab._io import check_out_path
from attnlab.commands._errors import BadInput, with_flags


def _flag(param) -> str:
    """How the user wrote the parameter: ``--heads`` for an option, ``NAME`` for an argument."""
    if param is None:
        return "value"
    if isinstance(param, click.Argument):
        return param.human_readable_name
    return param.opts[0] if param.opts else "value"


def _as_int(value) -> int | None:
    """``value`` as an int if it is one or is written as one in ASCII digits (``"-3"``), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    digits = text[1:] if text[:1] in "+-" else text
    return int(text) if digits.isascii() and digits.isdigit() else None


class Positive(click.ParamType):
    """A positive integer written in ASCII digits; anything else exits 2 naming the flag."""

    name = "N"

    def __init__(self, maximum: int = 2**40):
        self.maximum = maximum  # past any real size: refused here, not allocated or looped over later

    def convert(self, value, param, ctx):
        n = _as_int(value)
        if n is not None and 0 < n <= self.maximum:
            return n
        if n is not None and n > self.maximum:
            raise BadInput(f"{_flag(param)} must be at most {self.maximum:,}, got {n:,}")
        raise BadInput(
            f"{_flag(param)} must be a positive integer, got {value if n is not None else repr(value)}"
        )


class NonNegative(click.ParamType):
    """An integer >= 0 (0 usually means "off" or "only at the end"), at most ``maximum`` (by default
    2^63 - 1, the largest seed torch and NumPy take); the message states the bound it broke."""

    name = "N"

    def __init__(self, maximum: int = 2**63 - 1):
        self.maximum = maximum

    def convert(self, value, param, ctx):
        n = _as_int(value)
        if n is not None and 0 <= n <= self.maximum:
            return n
        if n is not None and n > self.maximum:
            raise BadInput(f"{_flag(param)} must be at most {self.maximum:,}, got {n:,}")
        raise BadInput(
            f"{_flag(param)} must be an integer >= 0, got {value if n is not None else repr(value)}"
        )


class Number(click.ParamType):
    """A finite number in ``[low, high)`` (``low`` excluded when ``strict``, ``high`` included when
    ``closed``); NaN and inf are refused."""

    name = "X"

    def __init__(
        self, low: float = -math.inf, high: float = math.inf, strict: bool = False, closed: bool = False
    ):
        self.low, self.high, self.strict, self.closed = low, high, strict, closed

    def _what(self) -> str:
        if self.high != math.inf:
            left, right = "(["[not self.strict], "])"[not self.closed]
            return f"a number in {left}{self.low:g}, {self.high:g}{right}"
        if self.low == -math.inf:
            return "a finite number"
        return f"a finite number {'>' if self.strict else '>='} {self.low:g}"

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = math.nan
        ok = math.isfinite(x) and (x > self.low if self.strict else x >= self.low)
        ok = ok and (x <= self.high if self.closed else x < self.high)
        if not ok:
            raise BadInput(f"{_flag(param)} must be {self._what()}, got {value!r}")
        return x


class PositiveNumber(click.ParamType):
    """A finite number > 0 (a rate, a time), at most ``maximum`` (a time past which nobody waits)."""

    name = "X"

    def __init__(self, maximum: float = math.inf):
        self.maximum = maximum

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = -1.0
        if not x > 0 or not math.isfinite(x):
            raise BadInput(f"{_flag(param)} must be a positive number, got {value!r}")
        if x > self.maximum:
            raise BadInput(f"{_flag(param)} must be at most {self.maximum:g}, got {value!r}")
        return x


Registry = Iterable[str] | Callable[[], Iterable[str]] | str


def _names(reg: Registry) -> tuple[str, ...]:
    """A registry's names: a tuple or dict, a function returning one, or ``"module:NAME"`` (imported
    only now, so a command's module stays light)."""
    if isinstance(reg, str):
        module, _, attr = reg.partition(":")
        reg = getattr(importlib.import_module(module), attr)
    if callable(reg):
        reg = reg()
    return tuple(reg)


class OutFile(click.ParamType):
    """A file a command writes (``explore --out``, ``--heatmap``), checked when the command line is
    read, before any work: not ``-`` (these commands write files, never standard output), a name
    that can be written (:func:`attnlab._io.check_out_path`: not a device or pipe, its folder
    exists or can be made, and is writable), and, given ``formats`` (a registry, as :func:`choice`
    takes), an extension among them (a name without one gets the first)."""

    name = "FILE"

    def __init__(self, formats: Registry | None = None):
        self._formats = formats

    def convert(self, value, param, ctx):
        flag = _flag(param)
        if str(value).strip() == "-":
            raise BadInput(f"{flag} writes a file, not standard output: give a file name, not '-'")
        try:
            path = check_out_path(value, "path", folder=False)
        except ValueError as exc:
            raise BadInput(with_flags(str(exc), {}, {"path": flag})) from None
        if self._formats is not None:
            formats = _names(self._formats)
            ext = path.suffix.lstrip(".").lower()
            if ext and ext not in formats:
                raise BadInput(
                    f"{flag} {value}: matplotlib cannot write .{ext} files; end the name with one of "
                    f"{', '.join('.' + f for f in formats)}{did_you_mean(ext, formats)}"
                )
        return str(value)


class Choice(click.ParamType):
    """One of a registry's names. The registry is a tuple or dict, a function returning one, or
    ``"module:NAME"`` (imported when the choice is first checked or listed, so a command's module
    stays light)."""

    name = "CHOICE"

    def __init__(self, registry: Registry):
        self._registry = registry

    @property
    def choices(self) -> tuple[str, ...]:
        return _names(self._registry)

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(self.choices) + "]"

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        hint = did_you_mean(value, self.choices)
        raise BadInput(f"{_flag(param)} must be one of {', '.join(self.choices)}; got {value!r}{hint}")


class SuggestingGroup(click.Group):
    """A click group that answers a mistyped subcommand with the closest name (``No such command
    'embedd'; did you mean 'embed'?``). Every ``attnlab`` group is one (``cli.LazyGroup`` too)."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if (
            name
            and not name.startswith("-")
            and not ctx.resilient_parsing
            and self.get_command(ctx, name) is None
            and (
                ctx.token_normalize_func is None
                or self.get_command(ctx, ctx.token_normalize_func(name)) is None
            )
        ):
            hint = did_you_mean(name, self.list_commands(ctx))
            raise click.UsageError(f"No such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """An option of the subcommands given before one (``attnlab audit --preset X``) names the
        subcommands that take it and the command line to try, in one line."""
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            flag = exc.option_name
            takers = [  # the group's own subcommands (a lazy group's are not imported for this)
                name
                for name, cmd in self.commands.items()
                if any(flag in p.opts for p in cmd.params if isinstance(p, click.Option))
            ]
            if not takers:
                raise
            named = [a for a in given if a in takers]  # a subcommand given after the option
            sub = named[0] if named else takers[0]
            rest = " ".join(a for a in given if a != sub)
            raise click.UsageError(
                f"{flag} is an option of {', '.join(takers)}, given before the subcommand: "
                f"try: {ctx.command_path} {sub} {rest}"
            ) from None


POSITIVE = Positive()
NON_NEGATIVE = NonNegative()
POSITIVE_NUMBER = PositiveNumber()
NON_NEGATIVE_NUMBER = Number(0.0)
RATE = Number(0.0, 1.0)  # dropout, label smoothing: [0, 1)
SHARE = Number(0.0, 1.0, closed=True)  # a share of attention or probability: [0, 1]
NUCLEUS = Number(0.0, 1.0, strict=True, closed=True)  # top-p: (0, 1]
SEED = NonNegative()


def choice(registry: Registry) -> Choice:
    """A :class:`Choice` over ``registry`` (a tuple, a dict's keys, a function returning them, or
    ``"module:NAME"``)."""
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


def decode_options(what: str = "Decoding."):
    """``--decode`` (:data:`attnlab.training.config.DECODERS`) and ``--beam-size``, as ``train``,
    ``evaluate`` and ``translate`` take them; ``what`` is ``--decode``'s help."""

    def apply(f):
        f = click.option(
            "--beam-size", type=POSITIVE, default=4, show_default=True, help="Beam width (--decode beam)."
        )(f)
        return click.option(
            "--decode",
            type=choice("attnlab.names:DECODERS"),
            default="greedy",
            show_default=True,
            help=what,
        )(f)

    return apply
