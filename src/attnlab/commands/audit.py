"""``attnlab audit params|shapes|cost|peak``: parameters, shapes on every arrow, FLOPs and memory.

All logic lives in :mod:`attnlab.audit`; this module only declares flags and prints. Every choice
comes from a library registry (models, presets, norms, FFNs, activations, attention paths).
"""

from __future__ import annotations

import dataclasses

import click

from attnlab._io import dumps_json
from attnlab.audit.config import MODELS
from attnlab.audit.presets import PRESETS
from attnlab.audit.spec import from_options
from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._types import (
    POSITIVE,
    POSITIVE_NUMBER,
    Positive,
    PositiveNumber,
    SuggestingGroup,
    choice,
    options,
)
from attnlab.names import MODEL_DTYPES
from attnlab.nn.config import ACTIVATIONS, FFNS, NORM_PLACES, NORMS

_PRESET_HELP = "A published model (fixes every size and option of the model): " + "; ".join(
    f"{name} = {p.description}" for name, p in PRESETS.items()
)

# The model: a preset, or the kind and its sizes (flags named like the audit's keyword arguments).
_model = options(
    click.option("--preset", default=None, type=choice(PRESETS), help=_PRESET_HELP),
    click.option(
        "--config",
        "hf_config",
        default=None,
        type=click.Path(),
        help="A model's config, without its weights: a Hugging Face config.json or checkpoint directory "
        "(model_type gpt2, llama, mistral, qwen2 or bert), an attnlab train run folder, a saved model, "
        "or minilm.",
    ),
    click.option(
        "--model",
        default="encoder-layer",
        show_default=True,
        type=choice(MODELS),
        help="What to audit (attnlab.nn layers or attnlab.models models).",
    ),
    click.option("--d-model", default=512, show_default=True, type=POSITIVE, help="d_model (d)."),
    click.option("--heads", default=8, show_default=True, type=POSITIVE, help="Query heads h."),
    click.option("--d-ff", default=2048, show_default=True, type=POSITIVE, help="FFN width d_ff (f)."),
    click.option("--layers", default=1, show_default=True, type=Positive(10_000), help="Layers L."),
    click.option("--kv-heads", default=None, type=POSITIVE, help="Key/value heads h_kv (GQA; 1 = MQA)."),
    click.option("--vocab", default=None, type=POSITIVE, help="Vocabulary V (embeddings and logits)."),
    click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table."),
)

# The block (attnlab.nn.BlockConfig's choices); None = the model's own (GPT pre-norm GELU, BERT GELU).
_block = options(
    click.option(
        "--norm",
        default=None,
        type=choice(NORM_PLACES),
        help="Norm placement: post (the paper's LN(x + f(x))) or pre (x + f(LN(x))). Default: the model's "
        "(gpt pre, the others post).",
    ),
    click.option(
        "--norm-kind", default=None, type=choice(NORMS), help="LayerNorm (γ and β) or RMSNorm (γ only)."
    ),
    click.option("--ffn", default=None, type=choice(FFNS), help="FFN kind: mlp (2 matrices), glu (3), none."),
    click.option(
        "--activation",
        default=None,
        type=choice(ACTIVATIONS),
        help="FFN activation. Default: the model's (gpt and bert GELU, the others ReLU).",
    ),
    click.option("--no-bias", is_flag=True, help="Linear layers without biases."),
    click.option(
        "--untie-head", is_flag=True, help="gpt: a separate logits matrix [d, V] (default: tied to E)."
    ),
    click.option(
        "--share-embeddings",
        is_flag=True,
        help="transformer: one [V, d] matrix for source, target and generator (the paper's section 3.4).",
    ),
)


def _spec(ctx: click.Context, preset, as_json, no_bias=False, untie_head=False, hf_config=None, **sizes):
    """The audited model from the flags (the library checks them); ``as_json`` passes through."""
    given = tuple(
        k
        for k in (*sizes, "no_bias", "untie_head")
        if ctx.get_parameter_source(k) == click.core.ParameterSource.COMMANDLINE
    )
    if hf_config is not None:  # the model's own config (attnlab.models.load_config), weights unread
        from attnlab.models.load import load_config

        if preset is not None or given:
            extra = ("--preset",) * (preset is not None) + tuple("--" + k.replace("_", "-") for k in given)
            raise ValueError(f"--config fixes the model; leave out {', '.join(extra)}")
        return load_config(hf_config)
    if no_bias:
        sizes["bias"] = False
    if untie_head:
        sizes["tie_head"] = False
    if sizes.pop("share_embeddings", False):
        sizes["share_embeddings"] = True
    sizes["norm_kind"] = sizes.pop("norm_kind", None)
    return from_options(preset, given, **sizes)


def _given(ctx: click.Context, names) -> tuple[str, ...]:
    """The flags among parameters ``names`` that the user typed, as typed (``--config`` for hf_config)."""
    return tuple(
        p.opts[0]
        for p in ctx.command.params
        if p.name in names and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    )


def _check_peak_flags(ctx: click.Context, tokens_per_s, flops_per_token, model_flags) -> None:
    """Refuse what peak would not read: without ``--mfu`` the FLOPs per token, ``--seq`` and the model;
    with ``--flops-per-token`` the model and ``--seq``, which only size the FLOPs it replaces."""
    sizing = ("preset", "seq", *model_flags)
    if tokens_per_s is None:
        unread = _given(ctx, ("flops_per_token", *sizing))
        if unread:
            raise BadInput(
                f"{', '.join(unread)}: only --mfu TOKENS_PER_S reads {'them' if len(unread) > 1 else 'it'} "
                "(model-FLOPs utilisation); without it peak measures the machine alone"
            )
    elif flops_per_token is not None and _given(ctx, sizing):
        unread = ", ".join(_given(ctx, sizing))
        raise BadInput(f"--flops-per-token replaces the FLOPs of the sized model; leave out {unread}")


def _emit(report: dict, as_json: bool, render) -> None:
    click.echo(dumps_json(report, indent=2, ensure_ascii=False) if as_json else render(report))


@click.group(cls=SuggestingGroup)
def audit() -> None:
    """Audits: parameters by group, shapes on every arrow, FLOPs and memory, machine peak."""


@audit.command("params")
@_model
@_block
@click.option(
    "--max-len", default=512, show_default=True, type=POSITIVE, help="n_ctx: learned position table rows."
)
@click.pass_context
@usage_errors
def params(ctx, as_json, preset, **flags):
    """Parameters by group with formulas, checked against the module actually built."""
    from attnlab.audit.params import audit_params, render_params

    _emit(audit_params(_spec(ctx, preset, as_json, **flags)), as_json, render_params)


_WORKLOAD = ("seq", "batch", "src_seq", "causal", "window")


def _workload(flags: dict):
    from attnlab.audit.config import Workload

    w = Workload(**{k: flags.pop(k) for k in _WORKLOAD if k in flags})
    flags["max_len"] = max(w.seq, w.S)  # a learned position table as long as the input
    return w


@audit.command("shapes")
@_model
@click.option("--seq", default=50, show_default=True, type=POSITIVE, help="Sequence length T.")
@click.option("--batch", default=5, show_default=True, type=POSITIVE, help="Batch size B.")
@click.option("--src-seq", default=None, type=POSITIVE, help="Source length S (decoder-layer, transformer).")
@_block
@click.pass_context
@usage_errors
def shapes(ctx, as_json, preset, **flags):
    """The tensor shape on every arrow through the block, measured with hooks."""
    from attnlab.audit.shapes import audit_shapes, render_shapes

    w = _workload(flags)
    _emit(audit_shapes(_spec(ctx, preset, as_json, **flags), w), as_json, render_shapes)


def _with_attention(spec, attention: str, w):
    """``spec`` with the block's attention kind set (a block-sparse block takes the workload's window)."""
    from attnlab.audit.spec import model_spec

    if attention == "block_sparse" and w.window is None:
        raise BadInput("--attention block_sparse needs --window W (the window whose empty tiles it skips)")
    spec = model_spec(spec)  # a preset's name or a checkpoint's config: its ModelSpec
    if attention == "ssm":  # no queries or keys: RoPE and key/value heads do not apply (nor cost)
        positions = "none" if spec.block.positions in ("rope", "alibi") else spec.block.positions
        spec = dataclasses.replace(spec, block=spec.block.replace(positions=positions, num_kv_heads=None))
    window = w.window if attention == "block_sparse" else None
    return dataclasses.replace(spec, block=spec.block.replace(attention=attention, window=window))


@audit.command("cost")
@_model
@click.option("--seq", default=128, show_default=True, type=POSITIVE, help="Sequence length T.")
@click.option("--batch", default=1, show_default=True, type=POSITIVE, help="Batch size B.")
@click.option(
    "--src-seq", default=None, type=POSITIVE, help="Source length S (decoder-layer, transformer; default T)."
)
@click.option("--causal", is_flag=True, help="Causal self-attention (T(T+1)/2 attended entries).")
@click.option("--window", default=None, type=POSITIVE, help="Causal sliding window of W keys (W <= T).")
@click.option("--training", is_flag=True, help="Add training FLOPs per token (PaLM's 6N + 12LHQT).")
@click.option(
    "--bytes",
    "bytes_per_value",
    default=4,
    show_default=True,
    type=POSITIVE,
    help="Bytes per value for memory (4 float32, 2 bf16). With --config: default the config's torch_dtype.",
)
@click.option("--measure", is_flag=True, help="Reconcile with torch's FlopCounterMode on the built module.")
@click.option(
    "--path",
    default="sdpa",
    show_default=True,
    type=choice(("sdpa", "explicit")),
    help="Attention path run by --measure: sdpa (fused) or explicit (step by step).",
)
@click.option(
    "--attention",
    default=None,
    type=choice("attnlab.nn.config:ATTENTION_KINDS"),
    help="The block's attention kind (default: the model's); block_sparse needs --window, linear and "
    "ssm replace the T² terms (the docs' concept page 'Beyond quadratic attention').",
)
@_block
@click.pass_context
@usage_errors
def cost(ctx, as_json, preset, training, bytes_per_value, measure, path, attention, **flags):
    """FLOPs term by term (MACs and FLOPs), memory, KV cache, growth with T."""
    from attnlab.audit.cost import audit_cost, render_cost
    from attnlab.audit.spec import model_spec

    w = _workload(flags)
    spec = _spec(ctx, preset, as_json, **flags)
    if attention is not None:
        spec = _with_attention(spec, attention, w)
    # a checkpoint's (or a preset's) sliding window applies when T exceeds it
    window = model_spec(spec).block.window
    if window is not None and w.window is None and window < w.seq:
        w = dataclasses.replace(w, window=window)
    if measure:  # refused up front when the run would not fit: the audit's own arithmetic knows
        from attnlab._checks import memory_bytes
        from attnlab.audit.measure import check_measurable

        check_measurable(audit_cost(spec, w, bytes_per_value=4), w.seq, memory_bytes())
    source = None
    if flags.get("hf_config") is not None:  # its torch_dtype sizes memory unless --bytes is given
        bytes_per_value, source = _config_bytes(ctx, flags["hf_config"], bytes_per_value)
    report = audit_cost(
        spec, w, training=training, bytes_per_value=bytes_per_value, measure=measure, path=path
    )
    if source is not None:
        report["config"]["bytes_source"] = source
    _emit(report, as_json, render_cost)


def _config_bytes(ctx: click.Context, hf_config: str, given: int) -> tuple[int, str]:
    """Bytes per value for ``--config`` and where the number came from: ``--bytes`` when given, else
    the config's ``torch_dtype``, else float32's 4."""
    from attnlab.models.load import config_dtype

    if ctx.get_parameter_source("bytes_per_value") == click.core.ParameterSource.COMMANDLINE:
        return given, "--bytes"
    found = config_dtype(hf_config)
    if found is None:
        return given, "the config names no torch_dtype: float32"
    return found[0], f"torch_dtype {found[1]} of the config"


@audit.command("peak")
@_model
@click.option(
    "--seconds",
    default=2.0,
    show_default=True,
    type=PositiveNumber(600),
    help="Time to spend measuring (at most 600 s).",
)
@click.option(
    "--mfu",
    "tokens_per_s",
    default=None,
    type=POSITIVE_NUMBER,
    help="A measured throughput in tokens/s: print model-FLOPs utilisation.",
)
@click.option("--seq", default=128, show_default=True, type=POSITIVE, help="T for the attention term of MFU.")
@click.option(
    "--flops-per-token",
    default=None,
    type=POSITIVE_NUMBER,
    help="Override the model FLOPs per token (default: PaLM training FLOPs of the sized model).",
)
@click.option(
    "--dtype",
    type=choice(MODEL_DTYPES),
    default="float32",
    show_default=True,
    help="Number format of the matmul (bfloat16: AMX / AVX-512 BF16; int8: dynamic quantisation).",
)
@click.pass_context
@usage_errors
def peak(ctx, as_json, preset, seconds, tokens_per_s, seq, flops_per_token, dtype, **flags):
    """This machine's matmul FLOP/s in --dtype and the CPU features behind it; with --mfu,
    model-FLOPs utilisation."""
    from attnlab.audit.config import Workload
    from attnlab.audit.cost import audit_cost
    from attnlab.audit.peak import measure_peak, mfu, render_peak
    from attnlab.audit.spec import model_spec

    _check_peak_flags(ctx, tokens_per_s, flops_per_token, tuple(flags))
    source = "given with --flops-per-token"
    if tokens_per_s is not None and flops_per_token is None:
        spec = model_spec(_spec(ctx, preset, as_json, max_len=seq, **flags))
        if spec.model not in ("encoder-layer", "gpt"):
            raise BadInput(f"--model for --mfu must be encoder-layer or gpt; got {spec.model!r}")
        flops_per_token = audit_cost(spec, Workload(seq=seq), training=True)["training"]["flops_per_token"]
        source = "PaLM training FLOPs per token 6N + 12·L·h·d_k·T of the sized model"
    report = measure_peak(seconds=seconds, dtype=dtype)
    if tokens_per_s is not None:
        report["mfu"] = {
            "tokens_per_s": tokens_per_s,
            "flops_per_token": flops_per_token,
            "mfu": mfu(tokens_per_s, flops_per_token, report),
            "flops_source": source,
        }
    _emit(report, as_json, render_peak)
