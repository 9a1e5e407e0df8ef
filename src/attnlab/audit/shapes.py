"""Shape audit: the tensor shape on every arrow through the block, measured by running it.

Nothing here is computed from formulas: the attnlab module is built and run on random input
while every :class:`~attnlab.nn.MultiHeadAttention` reports its steps through its ``trace`` hook
(its hook points, ``MultiHeadAttention.POINTS``: x_q, q, k, v, q_heads, ..., z, concat, out) and
forward hooks report the norms (their input is the residual sum), the FFN, embeddings and the head. The
steps come out in the order data flows, and :func:`render_shapes` draws them as the block diagram.
Each step is named by its address, the one the parameters and :func:`attnlab.nn.capture` use: an
attention step by its hook point (``blocks.0.self_attn.q``), any other by its module path
(``blocks.0.norm1``, ``blocks.0.ffn.linear1``, ``lm_head``), except GPT's final norm, named by its hook
point ``final_norm`` (its module is ``norm``). Norms are named as in :mod:`attnlab.audit.params`: the
paper's LN_1, LN_2 (LN_3) in encoder and decoder layers; a GPT block's as the Week 19 course page's
``class Block`` names them, ``ln1`` (module ``norm1``) and ``ln2`` (module ``norm3``: a GPT block is a
decoder layer without cross-attention), and its final norm ``ln_f``.
"""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from attnlab._checks import memory_bytes
from attnlab.audit.build import build
from attnlab.audit.config import CROSS_MODELS, ModelSpec, Workload, check_no_vocab, fit_positions
from attnlab.audit.cost import audit_cost
from attnlab.audit.params import GPT_NORMS
from attnlab.audit.render import ACTIVATION_NAMES
from attnlab.audit.spec import model_spec
from attnlab.models.base import check_memory

# what each step of the attention trace is, in the notes' symbols
TRACE_LABELS = {
    "x_q": "input x",
    "x_kv": "memory (keys/values from)",
    "q": "Q = x W^Q",
    "k": "K = x W^K",
    "v": "V = x W^V",
    "q_heads": "split heads Q",
    "k_heads": "split heads K",
    "v_heads": "split heads V",
    "scores": "scores QKᵀ/√d_k",
    "weights": "weights softmax(scores)",
    "z": "per-head outputs z = AV",
    "concat": "concat(heads)",
    "out": "W^O output",
}
_SKIP = (nn.Dropout, nn.Identity)


def _leaf_label(path: str, module: nn.Module) -> str | None:
    leaf = path.rsplit(".", 1)[-1]
    if isinstance(module, nn.Embedding):
        return f"embedding lookup, table [{module.num_embeddings}, {module.embedding_dim}]"
    if "linear1" in leaf or leaf in ("fc1", "w1", "c_fc"):
        return "FFN x W_1 + b_1" if getattr(module, "bias", None) is not None else "FFN x W_1"
    if "linear3" in leaf or leaf in ("w3", "up_proj"):  # a GLU's up projection
        return "FFN up x W_3 + b_3" if getattr(module, "bias", None) is not None else "FFN up x W_3"
    if "linear2" in leaf or leaf in ("fc2", "w2", "c_proj"):
        return (
            "FFN output (· W_2 + b_2)" if getattr(module, "bias", None) is not None else "FFN output (· W_2)"
        )
    if isinstance(module, (nn.ReLU, nn.GELU)):
        return f"FFN activation {type(module).__name__}"
    if leaf in ("lm_head", "generator", "head"):
        return f"logits = h W_out [{module.in_features} -> {module.out_features}]"
    if isinstance(module, nn.Linear):
        return f"linear [{module.in_features} -> {module.out_features}]"
    return f"{leaf} ({type(module).__name__})"


def _norm_labels(norm: str, leaf: str, decoder: bool, cross: bool = True) -> tuple[str | None, str]:
    """(label of the norm's input, label of its output) for post- or pre-norm layers.

    Post-norm: the input of LN_i is the residual sum X + Sublayer(X) ("add & norm"). Pre-norm: LN_i
    feeds sublayer i, and its input is the running residual stream.
    """
    index = leaf[-1] if leaf[-1].isdigit() else ""
    subs = (
        {"1": "masked self-attention", "2": "cross-attention", "3": "FFN"}
        if decoder
        else {"1": "self-attention", "2": "FFN"}
    )
    name = f"LN_{index}"
    if decoder and not cross:  # a decoder-only block (GPT): norm1 before attention, norm3 before the FFN
        subs["2"] = subs["1"]
        name = dict(zip("13", GPT_NORMS)).get(index, name)  # the course page's ln1, ln2
    sub = subs.get(index, "sublayer")
    if norm == "post":
        return f"add: X + {sub}(X)", f"norm {name} (add & norm)"
    previous = {
        "1": "layer input X (the residual stream)",
        "2": f"add: residual + {subs['1']}",
        "3": f"add: residual + {subs.get('2')}",
    }
    return previous.get(index), f"norm {name} (pre-norm, into {sub})"


_LAYER_NORM_STEP = re.compile(r"norm (LN_\d|ln\d) \(")


def layer_norm_name(step: str) -> str | None:
    """The norm a step label of a layer names (``"norm ln1 (pre-norm, into FFN)"`` -> ``"ln1"``, the
    paper's ``"norm LN_2 (add & norm)"`` -> ``"LN_2"``), ``None`` for any other step: the one reader of
    :func:`_norm_labels`' names for callers (the block grader)."""
    m = _LAYER_NORM_STEP.match(step)
    return m.group(1) if m else None


def audit_shapes(model="encoder-layer", workload: Workload | None = None, *, seed: int = 0) -> dict:
    """Run the attnlab module on random input ``[B, T]`` ids or ``[B, T, d]`` and record every shape.

    ``model``: as for :func:`~attnlab.audit.params.audit_params` (a ``ModelSpec``, a ``BlockConfig``,
    a model config or a preset name); ``workload``: batch B, sequence T and, for decoder-layer and
    transformer, the source (memory) length ``src_seq`` S (default T), so cross-attention scores are
    ``[B, h, T, S]`` (default: B = 5, T = 50).

    Returns a dict: "steps" [{layer, where, module, step, shape}] in the order they ran (``layer``
    the layer's module path, ``module`` the step's full address: a hook point such as
    ``blocks.0.self_attn.q`` or a module path such as ``blocks.0.norm1``), "layer_outputs"
    (one shape per layer), "output" (the model's output shape), "output_numbers" (its entry count,
    e.g. B·T·d = 5·20·64 = 6,400), "per_sequence_output" (the output of one sequence, e.g.
    [T, d] = [50, 512]), "config". Raises ``ValueError`` on bad sizes.
    """
    a = model_spec(model)
    w = Workload(seq=50, batch=5) if workload is None else workload
    if not isinstance(w, Workload):
        raise ValueError(f"workload must be an attnlab.audit.Workload, got {type(w).__name__}")
    seq, batch, src_seq = w.seq, w.batch, w.S
    if src_seq != seq and a.model not in CROSS_MODELS:
        raise ValueError(
            f"src_seq applies to decoder-layer and transformer (cross-attention), not {a.model!r}"
        )
    check_no_vocab(a, "shapes")
    model_cfg = a.to_dict()  # the model's own max_len: never grown in the report
    a, positions_note = fit_positions(a, w)  # learned positions: refused past max_len

    _check_fits(a, w)
    torch.manual_seed(seed)
    module = build(a)
    steps: list[dict] = []
    layer_outputs: list[tuple[str, list[int]]] = []
    layer_names = [
        n for n, m in module.named_modules() if type(m).__name__ in ("EncoderLayer", "DecoderLayer")
    ]
    attn_names = [n for n, m in module.named_modules() if type(m).__name__ == "MultiHeadAttention"]

    def where(path: str) -> tuple[str, str]:
        owner = max((n for n in layer_names if path == n or path.startswith(n + ".")), key=len, default="")
        return owner, path[len(owner) + 1 :] if owner else path

    def add(path: str, step: str, t, point: str | None = None) -> None:
        if isinstance(t, torch.Tensor):
            owner, rel = where(path)
            module_path = f"{path}.{point}" if point else path  # one address: as parameters and hooks
            steps.append(
                {"layer": owner, "where": rel, "module": module_path, "step": step, "shape": list(t.shape)}
            )

    _trace_attention(module, attn_names, add)
    handles = _hook_modules(module, a, layer_names, attn_names, where, add, layer_outputs)
    try:
        with torch.no_grad():
            out = _run(module, a, seq, batch, src_seq)
    finally:
        for h in handles:
            h.remove()
        for name in attn_names:
            module.get_submodule(name).trace = None
    shape = list(out.shape)
    return {
        "model": a.model,
        "config": {**model_cfg, "seq": seq, "batch": batch, "src_seq": src_seq},
        **({"positions_note": positions_note} if positions_note else {}),
        "steps": steps,
        "layer_outputs": [shape for _, shape in layer_outputs],
        "layer_output_names": [name for name, _ in layer_outputs],
        "output": shape,
        "output_numbers": math.prod(shape),
        "per_sequence_output": shape[1:],
    }


def _cross_labels() -> dict[str, str]:
    """Cross-attention: queries from the decoder stream y, keys and values from the encoder memory."""
    return {
        **TRACE_LABELS,
        "x_q": "input y (queries from the decoder)",
        "q": "Q = y W^Q",
        "k": "K = memory W^K",
        "v": "V = memory W^V",
    }


def _check_fits(a: ModelSpec, w: Workload) -> None:
    """Refuse, before building, a run that would not fit in half of this machine's memory: the model's
    weights (counted on the meta device) plus one layer's float32 activations and the logits (the
    cost audit's arithmetic). A ``ValueError`` names the GiB; the arithmetic audits need neither."""

    weights = check_memory(lambda: build(a, device="meta"), f"audit shapes of this {a.model}")
    act = audit_cost(a, w, bytes_per_value=4)["activations"]
    need, have = weights + act["per_layer_bytes"] + act["logits_bytes"], memory_bytes()
    if need > have // 2:
        raise ValueError(
            f"audit shapes at B={w.batch:,}, T={w.seq:,} would need {need / 2**30:,.1f} GiB (the weights and "
            f"one layer's float32 activations); this machine has {have / 2**30:,.1f} GiB: use a smaller "
            "seq= or batch=, or audit params / cost (arithmetic, no memory)"
        )


# the per-head outputs reach the trace as [B, T_q, h, d_k], already transposed for the concat; the notes
# write them [B, h, T, d_k], as A V computes them: shown in that layout, then the transpose as its own arrow
HEADS_SIDE_BY_SIDE = "heads side by side (transpose 1, 2)"


def _trace_attention(module: nn.Module, attn_names: list[str], add) -> None:
    """Set every MultiHeadAttention's ``trace`` hook to record its steps under the notes' names."""
    for name in attn_names:
        labels = _cross_labels() if "cross" in name else TRACE_LABELS
        module.get_submodule(name).trace = lambda step, t, name=name, labels=labels: _record(
            add, name, labels, step, t
        )


def _record(add, name: str, labels: dict[str, str], step: str, t) -> None:
    """One traced step; ``z [B, T_q, h, d_k]`` becomes two arrows: ``A V`` as ``[B, h, T_q, d_k]`` (the
    notes' layout), then the transpose that puts the heads side by side, ``[B, T_q, h, d_k]``."""
    if step == "z" and isinstance(t, torch.Tensor) and t.dim() == 4:
        add(name, labels["z"], t.transpose(1, 2), step)  # [B, h, T_q, d_k]
        add(name, HEADS_SIDE_BY_SIDE, t, step)  # [B, T_q, h, d_k]
        return
    add(name, labels.get(step, step), t, step)


def _hook_modules(module, a: ModelSpec, layer_names, attn_names, where, add, layer_outputs) -> list:
    """Forward hooks on every layer (its output) and every leaf outside attention (norms: input too).
    A norm outside the layers is named by its hook point where the model names it differently."""
    handles, hook_names = [], _hook_names(module)
    for path, m in module.named_modules():
        if any(path == n or path.startswith(n + ".") for n in attn_names) or isinstance(m, _SKIP):
            continue
        if path in layer_names:
            record = lambda _m, _i, out, path=path: layer_outputs.append((path, list(_first(out).shape)))
            handles.append(m.register_forward_hook(record))
            if a.norm == "pre":  # no norm follows the last residual add: drawn as the layer's output
                last, point = _pre_norm_output_label(m), f"{path}.resid_post"
                out_add = lambda _m, _i, out, point=point, last=last: add(point, last, _first(out))
                handles.append(m.register_forward_hook(out_add))
            continue
        if list(m.children()):
            continue
        leaf = path.rsplit(".", 1)[-1]
        if not (isinstance(m, nn.LayerNorm) or "norm" in leaf.lower()):
            label = _leaf_label(path, m)
            parent = module.get_submodule(path.rsplit(".", 1)[0]) if "." in path else None
            if leaf == "linear2" and type(parent).__name__ == "FeedForward":  # what W_2 reads: act(x W_1)
                ffn, act = path.rsplit(".", 1)[0], _activation_label(parent)
                record_in = lambda _m, args, ffn=ffn, act=act: add(f"{ffn}.hidden", act, args[0])
                handles.append(m.register_forward_pre_hook(record_in))
            record = lambda _m, _i, out, path=path, label=label: add(path, label, _first(out))
            handles.append(m.register_forward_hook(record))
            continue
        owner = where(path)[0]
        if owner:
            layer = module.get_submodule(owner)
            decoder = type(layer).__name__ == "DecoderLayer"
            pre, post = _norm_labels(a.norm, leaf, decoder, getattr(layer, "cross_attn", None) is not None)
        else:
            kind = {"layer": "LayerNorm", "rms": "RMSNorm"}[a.block.norm]
            final = f"final {kind} {GPT_NORMS[2] if a.model == 'gpt' else 'LN_f'}"
            pre, post = None, (final if leaf == "norm" else f"norm {leaf}")
            path = hook_names.get(id(m), path)  # GPT's final norm: module norm, hook point final_norm
        if pre:  # the norm's input: the residual sum (post-norm) or the residual stream (pre-norm)
            record_in = lambda _m, args, path=path, pre=pre: add(path, pre, args[0] if args else None)
            handles.append(m.register_forward_pre_hook(record_in))
        handles.append(
            m.register_forward_hook(lambda _m, _i, out, path=path, post=post: add(path, post, out))
        )
    return handles


def _activation_label(ffn: nn.Module) -> str:
    """The step between an attnlab FeedForward's two Linears (its hook point ``hidden [B, T, d_ff]``):
    ``act(x W_1)``, times ``x W_3`` for a GLU, as the activation is named in the tables."""
    act = ACTIVATION_NAMES.get(ffn.activation, ffn.activation)
    if getattr(ffn, "linear3", None) is not None:
        return f"FFN activation {act}(x W_1) ⊙ x W_3"
    return f"FFN activation {act}"


def _pre_norm_output_label(layer: nn.Module) -> str:
    """A pre-norm layer's last residual add, its output: around the FFN, or the last attention when the
    layer has no FFN."""
    if getattr(layer, "ffn", None) is not None:
        last = "FFN"
    elif getattr(layer, "cross_attn", None) is not None:
        last = "cross-attention"
    else:
        last = "masked self-attention" if type(layer).__name__ == "DecoderLayer" else "self-attention"
    return f"add: residual + {last} (the layer's output)"


def _hook_names(module: nn.Module) -> dict[int, str]:
    """``id(submodule) -> its hook name`` for every submodule a model names for its hook points
    (:meth:`attnlab.nn.hooks.HookPoints._hook_children`; GPT calls its final norm ``final_norm``)."""
    names: dict[int, str] = {}
    todo = [(module, "")]
    while todo:
        parent, prefix = todo.pop()
        children = parent._hook_children() if hasattr(parent, "_hook_children") else {}
        for name, child in children.items():
            if child is not None:
                names[id(child)] = prefix + name
                todo.append((child, f"{prefix}{name}."))
    return names


def _first(out):
    """A module's main output tensor (the first of a tuple, ``last_hidden_state`` of BERT's output)."""
    out = getattr(out, "last_hidden_state", out)
    return out[0] if isinstance(out, (tuple, list)) else out


def _run(module: nn.Module, a: ModelSpec, seq: int, batch: int, src_seq: int) -> torch.Tensor:
    """Random input of the right kind through ``module``; returns the output tensor."""
    if a.model == "encoder-layer":
        return module(torch.randn(batch, seq, a.d_model))  # [B, T, d]
    if a.model == "decoder-layer":
        y = torch.randn(batch, seq, a.d_model)  # [B, T, d] decoder input
        memory = torch.randn(batch, src_seq, a.d_model)  # [B, S, d] encoder output
        return module(y, memory, is_causal=True)
    low = 4 if a.vocab > 4 else 0  # ids above the special tokens (PAD, BOS, EOS, UNK) where possible
    ids = torch.randint(low, a.vocab, (batch, seq))  # [B, T]
    if a.model == "transformer":
        src = torch.randint(low, a.vocab, (batch, src_seq))  # [B, S]
        return _first(module(src, ids))  # logits [B, T, V]
    if a.model == "gpt":
        return _first(module(ids))  # logits [B, T, V]
    return _first(module(ids))  # last_hidden_state [B, T, d]


# steps that run side by side with the next one (Q, K, V; their head splits): no arrow between them
_PARALLEL = {TRACE_LABELS[k] for k in ("q", "k", "q_heads", "k_heads")} | {"K = memory W^K", "Q = y W^Q"}


def render_shapes(report: dict) -> str:
    """The block drawn top to bottom with the measured shape on every arrow.

    The first layer of each stack is drawn step by step; every layer's output shape follows.
    """
    c = report["config"]
    d_ff = "no FFN" if c["block"]["ffn"] == "none" else f"d_ff={c['d_ff']}"
    out = [
        f"shapes through {report['model']} (d_model={c['d_model']}, heads={c['heads']}, "
        f"kv_heads={c['kv_heads'] or c['heads']}, {d_ff}, layers={c['layers']}, "
        f"{c['norm']}-norm), input B={c['batch']}, T={c['seq']}"
        + (f", S={c['src_seq']}" if c.get("src_seq", c["seq"]) != c["seq"] else "")
        + "; measured by running the module with hooks",
        *([f"note: {report['positions_note']}"] if "positions_note" in report else []),
        "",
    ]
    drawn: dict[str, str] = {}  # stack -> the one layer drawn in detail
    steps = []
    for s in report["steps"]:
        stack = s["layer"].rsplit(".", 1)[0] if s["layer"] else ""
        if s["layer"] and drawn.setdefault(stack, s["layer"]) != s["layer"]:
            continue
        steps.append(s)
    width = max((len(s["step"]) + len(s.get("module", s["where"])) + 4 for s in steps), default=20)
    current = None
    for i, s in enumerate(steps):
        if s["layer"] != current:
            current = s["layer"]
            if current or out[-1]:  # one blank line before the steps outside the layers, not two
                out.append(f"┌─ {current} (first layer of its stack, step by step)" if current else "")
        bar = "│ " if s["layer"] else ""
        address = s.get("module", s["where"])  # the hook point or module path
        text = s["step"] + (f"  ({address})" if address else "")
        out.append(f"{bar}{text.ljust(width)} {_shape(s['shape'])}")
        last = i + 1 == len(steps) or steps[i + 1]["layer"] != s["layer"]
        if not last and s["step"] not in _PARALLEL:
            out.append(f"{bar}   ↓")
        if last and s["layer"]:
            out.append("└─")
    if report["layer_outputs"]:
        out += ["", "output of each layer (in the order they ran):"]
        names = report.get("layer_output_names") or [""] * len(report["layer_outputs"])
        out += [
            f"  {i + 1:>2}: {_shape(shape)}  {name}"
            for i, (name, shape) in enumerate(zip(names, report["layer_outputs"]))
        ]
    shape = report["output"]
    out += [
        "",
        f"model output: {_shape(shape)} = {' · '.join(map(str, shape))} = "
        f"{report['output_numbers']:,} numbers; one sequence: {_shape(report['per_sequence_output'])}",
    ]
    return "\n".join(out)


def _shape(shape: list[int]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"
