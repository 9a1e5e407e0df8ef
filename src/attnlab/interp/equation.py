"""One query of one head written as the notes' equations, with the numbers of the model's own forward.

  q = x_i W^Q_h,  K = X W^K_g,  V = X W^V_g       g: the key/value head of h (one per GQA group)
  RoPE (where the model rotates): q and every row of K turned by their positions first
  s = K q  [T],   a = softmax(s / sqrt(d_k) + b + M)  [T],   z = a V  [d_k]
  o = Concat(z_0, ..., z_{h-1}) W^O  [d_model], then the residual, the norm and the FFN of the layer

Every tensor is read through the hook points (:mod:`attnlab.nn.hooks`) of one forward: q and K
before (``q``, ``k``) and after RoPE (``q_heads``, ``k_heads``), V, the scores, the weights, z,
Concat, W^O's output, the residual stream and the FFN's output. The weights are captured in every
layer up to this one, as ``attnlab serve``'s attention view captures them, so those layers run the
same path and the row ``a`` is bit for bit that view's (the layers above cannot change it). The
recomputations (``softmax``, ``a V`` and the what-ifs: no 1/sqrt(d_k), no causal mask, a
temperature on the next token) are :mod:`attnlab.ref`'s, in float64.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import torch
from torch import Tensor

from attnlab import ref
from attnlab._checks import int_in
from attnlab.models.capabilities import is_decoder
from attnlab.nn.hooks import capture, patch

TEMPERATURES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)  # the next-token slider's stops
TOP = 8  # keys listed by weight; tokens per temperature: 5


@dataclasses.dataclass
class QueryMath:
    """The numbers of one query ``position`` of head ``layer.head`` (float64 CPU tensors; T tokens).

    ``q_pre``/``q [d_k]`` and ``k_pre``/``k [T, d_k]``: before and after RoPE (equal without it);
    ``v [T, d_k]``; ``heads``: the layer's h; ``kv_head`` g and ``group``, the query heads sharing it;
    ``raw = K q [T]``; ``scale = 1/sqrt(d_k)``; ``bias [T]`` (ALiBi, else 0);
    ``mask [T]`` bool (True = may attend); ``weights [T]`` as the forward computed them and
    ``softmax``, ``ref.masked_softmax(raw * scale + bias, mask)``; ``z`` (the forward's) and ``av``
    (``weights @ v``) ``[d_k]``. The layer at this position: ``concat [h d_k]``, ``attn_out``,
    ``resid_pre``, ``attn_in`` (what attention read: N_1(x) pre-norm, x post-norm), ``resid_mid``,
    ``ffn_in``, ``ffn_out`` (None without an FFN), ``resid_post`` ``[d_model]``. ``logits [V]`` of a
    language model at this position (None for an encoder)."""

    layer: int
    head: int
    position: int
    heads: int
    kv_head: int
    group: list[int]
    positions: str
    norm: str
    norm_place: str
    causal: bool
    window: int | None
    scale: float
    q_pre: Tensor
    q: Tensor
    k_pre: Tensor
    k: Tensor
    v: Tensor
    raw: Tensor
    bias: Tensor
    mask: Tensor
    scores: Tensor
    weights: Tensor
    softmax: Tensor
    z: Tensor
    av: Tensor
    concat: Tensor
    attn_out: Tensor
    resid_pre: Tensor
    attn_in: Tensor
    resid_mid: Tensor
    ffn_in: Tensor
    ffn_out: Tensor | None
    resid_post: Tensor
    logits: Tensor | None

    @property
    def rotated(self) -> bool:
        """Whether the model turns q and k by their positions (RoPE) before the dot product."""
        return self.positions == "rope"

    def checks(self) -> dict[str, float]:
        """The largest gaps between the forward and the equations: ``softmax`` (``ref.masked_softmax``
        of the scores vs the weights), ``av`` (``a V`` vs z), ``scores`` (``raw * scale + bias`` vs the
        forward's scores point)."""
        return {
            "softmax": float((self.softmax - self.weights).abs().max()),
            "av": float((self.av - self.z).abs().max()),
            "scores": float((self.raw * self.scale + self.bias - self.scores).abs().max()),
        }

    def top_keys(self, n: int = TOP) -> list[dict]:
        """The ``n`` keys of largest weight, largest first: ``{key, raw (q.k), score, weight}``
        (``score = q.k / sqrt(d_k) + b``)."""
        order = sorted(range(len(self.weights)), key=lambda j: (-float(self.weights[j]), j))[:n]
        return [
            {
                "key": j,
                "raw": float(self.raw[j]),
                "score": float(self.raw[j] * self.scale + self.bias[j]),
                "weight": float(self.weights[j]),
            }
            for j in order
        ]

    def unscaled(self) -> dict:
        """The weights without the 1/sqrt(d_k): ``softmax(K q + b + M)``, beside the weights with it:
        entropy (nats) and largest weight of each, and the variance of the raw and the scaled scores
        over the keys the mask keeps (the notes' argument: Var(q.k) = d_k for independent unit-variance
        entries, so dividing by sqrt(d_k) brings it to about 1)."""
        without = _masked_softmax(self.raw + self.bias, self.mask)  # [T]
        kept = self.raw[self.mask]  # [T_kept]
        var = float(kept.var(unbiased=False)) if len(kept) > 1 else 0.0
        return {
            "weights": without,
            "entropy": [entropy(self.weights), entropy(without)],
            "max": [float(self.weights.max()), float(without.max())],
            "var_raw": var,
            "var_scaled": var * self.scale**2,
            "d_k": len(self.q),
        }

    def unmasked(self) -> dict | None:
        """A decoder's weights with no causal (or window) mask, ``softmax(K q / sqrt(d_k) + b)`` over
        every key, and the future keys (after ``position``) that would take weight: ``future``
        ``[{key, weight}]`` largest first, ``future_share`` their total. None for an encoder."""
        if not self.causal:
            return None
        bias = self.bias
        if self.positions == "alibi":  # the bias of every key, the future ones included
            bias = _alibi_row(self.heads, self.head, self.position, len(self.raw))
        full = _masked_softmax(self.raw * self.scale + bias, None)  # [T]
        future = range(self.position + 1, len(full))
        ranked = sorted(future, key=lambda j: (-float(full[j]), j))
        return {
            "weights": full,
            "future": [{"key": j, "weight": float(full[j])} for j in ranked[:TOP]],
            "future_share": float(full[self.position + 1 :].sum()),
            "entropy": [entropy(self.weights), entropy(full)],
            "max": [float(self.weights.max()), float(full.max())],
        }

    def temperatures(self, k: int = 5) -> list[dict] | None:
        """The next-token distribution ``softmax(logits / tau)`` at each of :data:`TEMPERATURES`:
        ``{temperature, entropy, top: [{id, p}]}`` (the ``k`` most likely). None for an encoder."""
        if self.logits is None:
            return None
        out = []
        for tau in TEMPERATURES:
            p = torch.from_numpy(ref.softmax(self.logits.numpy() / tau))  # [V]
            top = p.topk(min(k, len(p)))
            out.append(
                {
                    "temperature": tau,
                    "entropy": entropy(p),
                    "top": [{"id": int(i), "p": float(q)} for q, i in zip(top.values, top.indices)],
                }
            )
        return out


def entropy(p: Tensor) -> float:
    """H(p) = -sum_j p_j log p_j in nats (0 log 0 = 0): ``p [T]``."""
    p = p[p > 0]
    return float(-(p * p.log()).sum())


class _Done(Exception):
    """Raised at the last point an analysis reads, to skip the layers above it."""


def _done(t: Tensor) -> None:
    raise _Done


def _masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """``ref.masked_softmax`` of ``scores [T]`` with ``mask [T]`` (None: every key), as a tensor."""
    m = None if mask is None else mask.numpy()
    return torch.from_numpy(ref.masked_softmax(scores.numpy(), m))


def _alibi_row(num_heads: int, head: int, position: int, t: int) -> Tensor:
    """Row ``position`` of head ``head``'s ALiBi bias ``[T]`` (:func:`attnlab.ref.alibi_bias`)."""
    return torch.from_numpy(ref.alibi_bias(num_heads, t)[head, position])


def _stack(model) -> tuple[str, torch.nn.ModuleList]:
    """The model's layers and the prefix of their hook points: a GPT's ``blocks``, BERT's ``layers``."""
    for prefix in ("blocks", "layers"):
        layers = getattr(model, prefix, None)
        if isinstance(layers, torch.nn.ModuleList):
            return prefix, layers
    raise ValueError(
        f"{type(model).__name__} has no single stack of attention layers (blocks or layers): the "
        "equation view reads a GPT or a BERT"
    )


def _checked(model, ids: Tensor, layer: int, head: int, position: int):
    """``(prefix, block, layer, head, position)`` once the arguments of :func:`query_math` are checked."""
    prefix, layers = _stack(model)
    if not isinstance(ids, Tensor) or ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] == 0:
        raise ValueError(f"ids must be a [1, T] tensor of token ids, got {getattr(ids, 'shape', ids)!r}")
    layer = int_in("layer", layer, 0, len(layers) - 1)
    block = layers[layer]
    attn = block.self_attn
    if getattr(attn, "attention", None) in ("linear", "ssm") or not hasattr(attn, "num_kv_heads"):
        raise ValueError(f"layer {layer}'s attention is not a softmax over keys: no equation to show")
    if attn.kept_heads is not None:
        raise ValueError("this model's heads were pruned: the equation view reads whole layers")
    head = int_in("head", head, 0, attn.num_heads - 1)
    position = int_in("position", position, 0, ids.shape[1] - 1)
    return prefix, block, layer, head, position


def _forward(model, ids: Tensor, prefix: str, layer: int, block, decoder: bool):
    """One forward of ``ids [1, T]`` capturing layer ``layer``'s points: ``(points, cache, logits)``
    with ``points`` keyed without the ``prefix.layer.`` (float64, batch dropped), ``logits
    [1, T, V]`` for a decoder, else None (an encoder stops after this layer: nothing above is read)."""
    at = f"{prefix}.{layer}."
    # the weights of every layer up to this one: they run the path the attention view runs (which
    # captures all), so this row is that view's bit for bit; the layers above cannot change it
    names = [f"{prefix}.{i}.self_attn.weights" for i in range(layer)] + [
        at + p for p in ("resid_pre", "resid_mid", "resid_post", "self_attn.*")
    ]
    if block.ffn is not None:
        names.append(at + "ffn.out")
    out = None
    with torch.inference_mode(), capture(model, names) as cache:
        if decoder:
            out = model(ids)
        else:
            with contextlib.suppress(_Done), patch(model, {at + "resid_post": _done}):
                model.encode(ids)
    points = {k.removeprefix(at): v[0].double().cpu() for k, v in cache.items() if k.startswith(at)}
    return points, cache, out


def _key_row(attn, decoder: bool, heads: int, head: int, position: int, t: int) -> tuple[Tensor, Tensor]:
    """``(mask [T] bool, bias [T] float64)`` of query ``position``'s row: causal (or the sliding
    window) on a decoder, all keys on an encoder; ALiBi's bias where the model uses it, else 0."""
    mask = torch.ones(t, dtype=torch.bool)  # [T]
    if decoder:
        rows = ref.causal_mask(t) if attn.window is None else ref.sliding_window_mask(t, t, attn.window)
        mask = torch.from_numpy(rows[position])
    bias = (
        _alibi_row(heads, head, position, t)
        if attn.positions == "alibi"
        else torch.zeros(t, dtype=torch.float64)
    )
    return mask, bias


def _ffn_input(block, resid_mid: Tensor, stream: Tensor) -> Tensor:
    """What the FFN read at the query: ``resid_mid [d]`` itself (post-norm, or no FFN), else the
    second norm of the row ``stream [d]`` as the model holds it (no hook point holds N_2's output)."""
    if block.ffn is None or not block.norm_first:
        return resid_mid
    ffn_norm = block.norm3 if hasattr(block, "norm3") else block.norm2
    with torch.inference_mode():
        return ffn_norm(stream).double().cpu()


def query_math(model, ids: Tensor, layer: int, head: int, position: int) -> QueryMath:
    """The numbers of the equations for query ``position`` of head ``layer.head`` (both from 0) of
    ``model`` (a GPT or a BERT) on ``ids [1, T]``, read from one forward through the hook points.

    A ``ValueError`` names ``layer``, ``head`` or ``position`` when it is not an integer of the
    model's range, and refuses attention that is not a softmax (linear, state-space) or pruned heads.
    """
    prefix, block, layer, head, position = _checked(model, ids, layer, head, position)
    attn, decoder, t = block.self_attn, is_decoder(model), ids.shape[1]
    c, cache, out = _forward(model, ids, prefix, layer, block, decoder)
    h, d_k = attn.num_heads, attn.d_k
    group = h // attn.num_kv_heads
    g = head // group
    span, kv_span = slice(head * d_k, (head + 1) * d_k), slice(g * d_k, (g + 1) * d_k)
    q, k, v = c["self_attn.q_heads"][head, position], c["self_attn.k_heads"][g], c["self_attn.v_heads"][g]
    mask, bias = _key_row(attn, decoder, h, head, position, t)
    raw = k @ q  # [T]
    scale = 1.0 / math.sqrt(d_k)
    weights = c["self_attn.weights"][head, position]  # [T]
    resid_mid = c["resid_mid"][position]
    return QueryMath(
        layer=layer,
        head=head,
        position=position,
        heads=h,
        kv_head=g,
        group=list(range(g * group, (g + 1) * group)),
        positions=str(attn.config.positions),
        norm=str(attn.config.norm),
        norm_place="pre" if block.norm_first else "post",
        causal=decoder,
        window=attn.window if decoder else None,
        scale=scale,
        q_pre=c["self_attn.q"][position, span],
        q=q,
        k_pre=c["self_attn.k"][:, kv_span],
        k=k,
        v=v,
        raw=raw,
        bias=bias,
        mask=mask,
        scores=c["self_attn.scores"][head, position],
        weights=weights,
        softmax=_masked_softmax(raw * scale + bias, mask),
        z=c["self_attn.z"][position, head],
        av=weights @ v,
        concat=c["self_attn.concat"][position],
        attn_out=c["self_attn.out"][position],
        resid_pre=c["resid_pre"][position],
        attn_in=c["self_attn.x_q"][position],
        resid_mid=resid_mid,
        ffn_in=_ffn_input(block, resid_mid, cache[f"{prefix}.{layer}.resid_mid"][0, position]),
        ffn_out=c["ffn.out"][position] if block.ffn is not None else None,
        resid_post=c["resid_post"][position],
        logits=out[0, position].double().cpu() if decoder else None,
    )
