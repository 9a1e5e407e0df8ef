"""``attnlab audit params|shapes|cost|peak``: parameters, shapes on every arrow, FLOPs and memory.

All logic lives in :mod:`attnlab.audit`; this module only parses flags and prints. Sizes are
parsed here (not by click's INT type) so that a bad size exits 2 with one line naming the flag.
"""

from __future__ import annotations

import json

import click

from attnlab.commands._errors import BadInput, usage_errors

MODELS = ("encoder-layer", "decoder-layer", "transformer", "gpt", "bert")
COST_MODELS = MODELS


class Positive(click.ParamType):
    """A positive integer; anything else exits 2 with ``Error: --flag must be a positive integer``."""

    name = "N"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        text = str(value).strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
        flag = param.opts[0] if param is not None else "value"
        raise BadInput(f"{flag} must be a positive integer, got {value!r}")


class OneOf(click.ParamType):
    """A choice that exits 2 with one line on a bad value."""

    name = "CHOICE"

    def __init__(self, *choices: str):
        self.choices = choices

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(self.choices) + "]"

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        flag = param.opts[0] if param is not None else "value"
        raise BadInput(f"{flag} must be one of {', '.join(self.choices)}; got {value!r}")


class PositiveNumber(click.ParamType):
    """A positive float (tokens per second)."""

    name = "X"

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = -1.0
        if not x > 0 or x == float("inf"):
            flag = param.opts[0] if param is not None else "value"
            raise BadInput(f"{flag} must be a positive number, got {value!r}")
        return x


POS = Positive()


def _options(*options):
    """One decorator applying ``options`` in the order listed (the order ``--help`` shows them)."""

    def apply(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


# The flags every audit shares: the model and its sizes (keyword arguments of the audit functions).
def _sizes_of(models: tuple[str, ...]):
    return _options(
        click.option(
            "--model",
            default="encoder-layer",
            show_default=True,
            type=OneOf(*models),
            help="What to audit (attnlab.nn layers or attnlab.models models).",
        ),
        *_SIZE_FLAGS,
    )


_SIZE_FLAGS = (
    click.option("--d-model", default=512, show_default=True, type=POS, help="d_model (d)."),
    click.option("--heads", default=8, show_default=True, type=POS, help="Query heads h."),
    click.option("--d-ff", default=2048, show_default=True, type=POS, help="FFN width d_ff (f)."),
    click.option("--layers", default=1, show_default=True, type=POS, help="Layers L."),
    click.option("--kv-heads", default=None, type=POS, help="Key/value heads h_kv (GQA; 1 = MQA)."),
    click.option("--vocab", default=None, type=POS, help="Vocabulary V (embeddings and logits)."),
    click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table."),
)
_sizes = _sizes_of(MODELS)
# the cost model covers every model; peak --mfu still takes its PaLM count from encoder-layer or gpt only
_cost_sizes = _sizes_of(COST_MODELS)

# The flags of the built block that params and shapes share: norm placement, biases, activation.
_block = _options(
    click.option("--norm", default="post", show_default=True, type=OneOf("post", "pre")),
    click.option("--no-bias", is_flag=True, help="Linear layers without biases."),
    click.option("--activation", default="relu", show_default=True, type=OneOf("relu", "gelu")),
)


def _emit(report: dict, as_json: bool, render) -> None:
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else render(report))


@click.group()
def audit() -> None:
    """Audits: parameters by group, shapes on every arrow, FLOPs and memory, machine peak."""


@audit.command("params")
@_sizes
@_block
@click.option(
    "--max-len", default=512, show_default=True, type=POS, help="n_ctx: learned position table rows."
)
@usage_errors
def params(as_json, no_bias, **sizes):
    """Parameters by group with formulas, checked against the module actually built."""
    from attnlab.audit.params import audit_params, render_params

    _emit(audit_params(bias=not no_bias, **sizes), as_json, render_params)


@audit.command("shapes")
@_sizes
@click.option("--seq", default=50, show_default=True, type=POS, help="Sequence length T.")
@click.option("--batch", default=5, show_default=True, type=POS, help="Batch size B.")
@click.option("--src-seq", default=None, type=POS, help="Source length S (decoder-layer, transformer).")
@_block
@usage_errors
def shapes(as_json, no_bias, **sizes):
    """The tensor shape on every arrow through the block, measured with hooks."""
    from attnlab.audit.shapes import audit_shapes, render_shapes

    _emit(audit_shapes(bias=not no_bias, **sizes), as_json, render_shapes)


@audit.command("cost")
@_cost_sizes
@click.option("--seq", default=128, show_default=True, type=POS, help="Sequence length T.")
@click.option("--batch", default=1, show_default=True, type=POS, help="Batch size B.")
@click.option(
    "--src-seq", default=None, type=POS, help="Source length S (decoder-layer, transformer; default T)."
)
@click.option("--causal", is_flag=True, help="Causal self-attention (T(T+1)/2 attended entries).")
@click.option("--window", default=None, type=POS, help="Causal sliding window of W keys (W <= T).")
@click.option("--training", is_flag=True, help="Add training FLOPs per token (PaLM's 6N + 12LHQT).")
@click.option(
    "--bytes",
    "bytes_per_value",
    default=4,
    show_default=True,
    type=POS,
    help="Bytes per value for memory (4 float32, 2 bf16).",
)
@click.option("--measure", is_flag=True, help="Reconcile with torch's FlopCounterMode on the built module.")
@click.option(
    "--path",
    default="sdpa",
    show_default=True,
    type=OneOf("sdpa", "explicit"),
    help="Attention path run by --measure.",
)
@usage_errors
def cost(as_json, **sizes):
    """FLOPs term by term (MACs and FLOPs), memory, KV cache, growth with T."""
    from attnlab.audit.cost import audit_cost, render_cost

    _emit(audit_cost(**sizes), as_json, render_cost)


@audit.command("peak")
@_sizes
@click.option(
    "--seconds", default=2.0, show_default=True, type=PositiveNumber(), help="Time to spend measuring."
)
@click.option(
    "--mfu",
    "tokens_per_s",
    default=None,
    type=PositiveNumber(),
    help="A measured throughput in tokens/s: print model-FLOPs utilisation.",
)
@click.option("--seq", default=128, show_default=True, type=POS, help="T for the attention term of MFU.")
@click.option(
    "--flops-per-token",
    default=None,
    type=PositiveNumber(),
    help="Override the model FLOPs per token (default: PaLM training FLOPs of the sized model).",
)
@usage_errors
def peak(as_json, seconds, tokens_per_s, flops_per_token, **sizes):
    """This machine's float32 matmul FLOP/s; with --mfu, model-FLOPs utilisation."""
    from attnlab.audit.cost import audit_cost
    from attnlab.audit.peak import measure_peak, mfu, render_peak

    source = "given with --flops-per-token"
    if tokens_per_s is not None and flops_per_token is None:
        if sizes["model"] not in ("encoder-layer", "gpt"):
            raise BadInput(f"--model for --mfu must be encoder-layer or gpt; got {sizes['model']!r}")
        flops_per_token = audit_cost(training=True, **sizes)["training"]["flops_per_token"]
        source = "PaLM training FLOPs per token 6N + 12·L·h·d_k·T of the sized model"
    report = measure_peak(seconds=seconds)
    if tokens_per_s is not None:
        report["mfu"] = {
            "tokens_per_s": tokens_per_s,
            "flops_per_token": flops_per_token,
            "mfu": mfu(tokens_per_s, flops_per_token, report),
            "flops_source": source,
        }
    _emit(report, as_json, render_peak)
