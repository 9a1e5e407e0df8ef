"""Reconcile the analytic FLOPs with ``torch.utils.flop_counter.FlopCounterMode``.

The counter knows a fixed list of operators (matmuls, convolutions, some attention kernels). An
operator it does not know is counted as 0 — on CPU that includes the kernel behind
``F.scaled_dot_product_attention`` in some PyTorch versions. So we do not assume: a second
dispatch mode logs every operator that actually ran, and each matmul-like operator that ran but
is absent from the counter's table is reported as missed.
"""

from __future__ import annotations

import re
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from attnlab.audit.build import build
from attnlab.audit.config import ModelSpec, Workload
from attnlab.nn.masks import causal_mask, sliding_window_mask

# operators that do matmul-scale work; element-wise ops are not counted by design
HEAVY_OPS = re.compile(r"mm|matmul|linear|conv|einsum|scaled_dot_product|attention|_transformer_encoder")


class OpLog(TorchDispatchMode):
    """Counts every aten operator that runs inside the ``with`` block."""

    def __init__(self):
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def _find(model: torch.nn.Module, class_names: tuple[str, ...]) -> list[str]:
    return [name for name, m in model.named_modules() if type(m).__name__ in class_names and name]


def blocks(model: str) -> list[tuple[str, str]]:
    """The reconciliation's sections in data-flow order: ("attn" | "ffn", term-name prefix)."""
    if model == "transformer":
        return [
            ("attn", "encoder "),
            ("ffn", "encoder "),
            ("attn", "decoder "),
            ("attn", "decoder cross "),
            ("ffn", "decoder "),
        ]
    if model == "decoder-layer":
        return [("attn", ""), ("attn", "cross "), ("ffn", "")]
    return [("attn", ""), ("ffn", "")]


def _prefix(model: str, module_name: str, attention: bool) -> str:
    """Term-name prefix of a MultiHeadAttention (``attention``) or FeedForward module."""
    cross = "cross " if attention and "cross_attn" in module_name else ""
    if model == "transformer":
        return ("encoder " if module_name.startswith("encoder") else "decoder ") + cross
    return cross


def _inputs(a: ModelSpec, seq: int, batch: int, causal: bool, window: int | None, src_seq: int):
    """Positional arguments and keyword arguments of the built model's forward pass."""
    low = 4 if a.vocab and a.vocab > 4 else 0  # ids above the special tokens (PAD id 0 would mask)
    if a.model == "gpt":
        return (torch.randint(4, a.vocab, (batch, seq)),), {}
    if a.model == "bert":
        return (torch.randint(low, a.vocab, (batch, seq)),), {}
    if a.model == "transformer":
        src = torch.randint(low, a.vocab, (batch, src_seq))  # [B, S]
        return (src, torch.randint(low, a.vocab, (batch, seq))), {}  # tgt_in [B, T]
    x = torch.randn(batch, seq, a.d_model)  # [B, T, d]
    if a.model == "decoder-layer":  # causal self-attention; cross-attention over memory [B, S, d]
        kwargs = {"is_causal": True}
        if window is not None:
            kwargs["self_mask"] = _mask(seq, window)
        return (x, torch.randn(batch, src_seq, a.d_model)), kwargs
    return (x,), ({"mask": _mask(seq, window)} if (causal or window) else {})


# what --measure is assumed to run at when its time is estimated: a CPU core's float32 matmul rate,
# the order of magnitude this machine's `attnlab audit peak` reports (it is a rough bound, not a promise)
ASSUMED_FLOPS_PER_S = 1e11
MOST_SECONDS = 3600


def check_measurable(report: dict, seq: int, memory: int) -> None:
    """Refuse, before anything is built, a ``--measure`` that cannot run here. ``report``: the
    analytic float32 audit of the same model and workload (``audit_cost(spec, workload,
    bytes_per_value=4)``). The run keeps one layer's tensors at once (the ``[B, h, T, T]`` scores and
    weights among them: ``activations.per_layer_bytes``) and the logits ``[B, T, V]``; a
    ``ValueError`` names that memory against ``memory`` (half of it may be used, as for models) and
    the rough time of ``executed.total_flops`` at :data:`ASSUMED_FLOPS_PER_S` (refused past an hour)."""
    a = report["activations"]
    need = a["per_layer_bytes"] + a["logits_bytes"]
    flops = report["executed"]["total_flops"]
    seconds = flops / ASSUMED_FLOPS_PER_S
    if need <= memory // 2 and seconds <= MOST_SECONDS:
        return
    raise ValueError(
        f"measure=True at T={seq:,} would need about {need / 2**30:,.1f} GiB (one layer's float32 tensors, "
        f"the [B, h, T, T] scores and weights among them) and {flops:.2e} FLOPs (about "
        f"{_duration(seconds)} at {ASSUMED_FLOPS_PER_S:.0e} FLOP/s); this machine has "
        f"{memory / 2**30:,.1f} GiB of memory: leave out measure=True (the arithmetic needs neither) "
        f"or use a smaller seq="
    )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.1f} s"


def measure_model(a: ModelSpec, workload: Workload, path: str = "sdpa", seed: int = 0) -> dict:
    """Run the attnlab model for ``a`` on ``workload`` under the counter and split its FLOPs by term.

    ``path``: "sdpa" (the fast path, ``F.scaled_dot_product_attention``) or "explicit" (every
    :class:`~attnlab.nn.MultiHeadAttention` gets a no-op ``trace``, which selects the explicit path).
    ``workload.src_seq``: the memory length S of decoder-layer and transformer (default ``seq``).
    Returns {"terms": {term: measured FLOPs}, "total", "ops_run", "ops_counted", "missed"}; terms
    are split by :func:`blocks` (e.g. "cross QKᵀ + AV", "encoder FFN").
    """

    if path not in ("sdpa", "explicit"):
        raise ValueError(f"path must be sdpa or explicit; got {path!r}")
    torch.manual_seed(seed)
    model = build(a)
    attn_names = _find(model, ("MultiHeadAttention",))
    ffn_names = _find(model, ("FeedForward",))
    if path == "explicit":
        for name in attn_names:
            model.get_submodule(name).trace = lambda _name, _tensor: None
    root = type(model).__name__
    with torch.no_grad():
        w = workload
        args, kwargs = _inputs(a, w.seq, w.batch, w.causal, w.window, w.S)
        counter = FlopCounterMode(display=False)
        log = OpLog()
        with counter, log:
            model(*args, **kwargs)
    counts = {name: {str(op): n for op, n in ops.items()} for name, ops in counter.get_flop_counts().items()}
    total_of = lambda name: sum(counts.get(f"{root}.{name}", {}).values())
    terms: dict[str, int] = {}
    for kind, p in blocks(a.model):
        names = [f"{p}Q, K, V projections", f"{p}QKᵀ + AV", f"{p}W^O"] if kind == "attn" else [f"{p}FFN"]
        terms.update(dict.fromkeys(names, 0))
    for name in attn_names:
        p = _prefix(a.model, name, attention=True)
        own = counts.get(f"{root}.{name}", {})
        o = total_of(f"{name}.out_proj")
        # 2-D matmuls (addmm/mm) are the projections; everything else (bmm, attention kernels) the core
        proj = sum(n for op, n in own.items() if op in ("aten.addmm", "aten.mm"))
        terms[f"{p}Q, K, V projections"] += proj - o
        terms[f"{p}W^O"] += o
        terms[f"{p}QKᵀ + AV"] += sum(own.values()) - proj
    for name in ffn_names:
        terms[f"{_prefix(a.model, name, attention=False)}FFN"] += total_of(name)
    total = sum(counts.get("Global", {}).values())
    terms["outside attention and FFN"] = total - sum(terms.values())
    counted = {str(op) for op in counter.get_flop_counts().get("Global", {})}
    missed = sorted(op for op in log.calls if HEAVY_OPS.search(op) and op not in counted)
    return {
        "path": path,
        "terms": terms,
        "total": total,
        "ops_run": dict(log.calls),
        "ops_counted": sorted(counted),
        "missed": missed,
    }


def _mask(seq: int, window: int | None) -> torch.Tensor:
    """Boolean ``[T, T]`` mask, True = may attend: causal, or a causal window of ``window`` keys."""
    return causal_mask(seq) if window is None else sliding_window_mask(seq, window=window)


def reconcile(report: dict, measured: dict) -> dict:
    """Analytic (dense kernel, as executed) against measured, term by term, with warnings."""
    dense = {t["term"]: t["flops"] for t in report["executed"]["terms"]}
    # what runs outside the layers: the LM head (gpt, transformer) or bert's pooler; embeddings are lookups
    outside = {"gpt": "logits", "transformer": "logits", "bert": "pooler"}.get(report["model"])
    analytic = {}
    for kind, p in blocks(report["model"]):
        if kind == "ffn":
            analytic[f"{p}FFN"] = dense.get(f"{p}FFN", 0)
            continue
        analytic[f"{p}Q, K, V projections"] = sum(dense[f"{p}{x} projection"] for x in "QKV")
        analytic[f"{p}QKᵀ + AV"] = dense[f"{p}QKᵀ"] + dense[f"{p}AV"]
        analytic[f"{p}W^O"] = dense[f"{p}W^O"]
    analytic["outside attention and FFN"] = dense.get(outside, 0) if outside else 0
    rows = [
        {"term": k, "analytic": v, "measured": measured["terms"][k], "equal": v == measured["terms"][k]}
        for k, v in analytic.items()
    ]
    total_analytic = sum(analytic.values())
    warnings = [
        f"the counter recorded 0 FLOPs for {op} ({measured['ops_run'][op]} call(s)): "
        f"its work is missing from the measured total"
        for op in measured["missed"]
    ]
    warnings += [
        f"{r['term']}: analytic {r['analytic']:,} != measured {r['measured']:,}"
        for r in rows
        if not r["equal"]
    ]
    return {
        "path": measured["path"],
        "rows": rows,
        "analytic_total": total_analytic,
        "measured_total": measured["total"],
        "missed_ops": measured["missed"],
        "warnings": warnings,
        "note": "analytic counts the dense kernel (masked scores are computed, then discarded); "
        "softmax and element-wise ops are outside the counter's scope",
    }
