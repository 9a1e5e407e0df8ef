"""Activation patching: restore one clean activation into a corrupted run and see how much of the
clean behaviour comes back (Meng et al. 2022's causal tracing; TransformerLens's ``patching``).

Two prompts of the same length in tokens, ``clean`` and ``corrupt`` (e.g. "The Eiffel Tower is in"
against "The Colosseum is in"), and a metric of the logits at the last position, ``m`` = the logit
of the target token, or target minus a wrong token. For each site the corrupted prompt is run with
that one activation replaced by its value in the clean run:

- the residual stream, layer x position: ``blocks.{l}.resid_pre`` (or ``resid_mid``/``resid_post``)
  at position p — which positions carry the information, at which depth;
- each head's output over all positions, layer x head: head h's slice of ``blocks.{l}.self_attn.z``
  ``[B, T, h, d_k]`` — which heads move it.

``recovered = (m_patched - m_corrupt) / (m_clean - m_corrupt)``: 1 where the site alone restores
the clean answer, 0 where it does nothing. Each layer is one batched forward (one row per position
or head). Restoring every position of ``blocks.0.resid_pre`` gives the clean logits and restoring
nothing the corrupted ones (:func:`restore`; tests hold both).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import Tensor

from attnlab._checks import choice
from attnlab.interp.ablation import as_index, refuse_pruned
from attnlab.interp.attribution import check_decoder, check_position, check_token, logits_of
from attnlab.names import POINTS
from attnlab.nn.hooks import capture, patch

RESID = "blocks.{l}.{point}"  # [B, T, d_model]
Z = "blocks.{l}.self_attn.z"  # [B, T, h, d_k]
ROW_BUDGET = 2**24  # logits entries per batched forward (rows x T x V): chunks keep memory flat
TIE = 1e-6  # |clean - corrupt| below this: the two runs tie, and no share can be recovered

Metric = Callable[[Tensor], Tensor]  # logits [B, T, V] -> [B]


def logit_metric(target: int, wrong: int | None = None, position: int = -1) -> Metric:
    """``logits [B, T, V] -> [B]``: the target's logit at ``position``, minus the wrong token's.

    ``target`` and ``wrong`` are token ids (integers, checked here; their range ``0..V-1`` when the
    metric meets the logits, with :func:`attnlab.interp.attribution.logit_attribution`'s message);
    ``position`` counts from the end when negative (-1: the last token)."""
    as_index("target", target)
    if wrong is not None:
        as_index("wrong", wrong)
    as_index("position", position)

    def metric(logits: Tensor) -> Tensor:
        vocab = logits.shape[-1]
        t_id = check_token("target", target, vocab)
        w_id = None if wrong is None else check_token("wrong", wrong, vocab)
        p = check_position(position, logits.shape[1])
        m = logits[:, p, t_id]
        return m if w_id is None else m - logits[:, p, w_id]

    return metric


def _integer(ids: Tensor) -> bool:
    return not (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool)


def check_pair(clean: Tensor, corrupt: Tensor) -> None:
    """Both ``[1, T]`` id tensors of one length: positions are paired one to one."""
    for name, ids in (("clean", clean), ("corrupt", corrupt)):
        if not isinstance(ids, Tensor) or ids.ndim != 2 or ids.shape[0] != 1 or not _integer(ids):
            raise ValueError(f"{name} must be token ids [1, T], got {getattr(ids, 'shape', type(ids))}")
    if clean.shape != corrupt.shape:
        raise ValueError(
            f"clean has {clean.shape[1]} tokens but corrupt has {corrupt.shape[1]}: patching pairs "
            "positions, so the two prompts must have the same number of tokens"
        )


def clean_run(model, clean: Tensor, point: str = "resid_pre") -> dict[str, Tensor]:
    """The clean run's ``blocks.*.{point}`` and ``blocks.*.self_attn.z`` (what gets restored)."""
    with torch.no_grad(), capture(model, [RESID.format(l="*", point=point), Z.format(l="*")]) as cache:
        model(clean)
    return dict(cache)


def restore(model, corrupt: Tensor, clean_cache: dict[str, Tensor], names, positions=None) -> Tensor:
    """Logits ``[1, T, V]`` of ``corrupt`` with the clean values of the points ``names`` (keys of
    ``clean_cache``) restored at ``positions`` (a list; None: every position)."""

    def put(name):
        def fn(t: Tensor) -> Tensor:
            t = t.clone()
            where = slice(None) if positions is None else list(positions)
            t[:, where] = clean_cache[name][:, where].to(t.dtype)
            return t

        return fn

    with torch.no_grad(), patch(model, {name: put(name) for name in names}):
        return logits_of(model(corrupt))


def _batched(model, corrupt: Tensor, rows: int, name: str, fill, metric: Metric) -> Tensor:
    """``metric`` of ``rows`` copies of ``corrupt``, row i patched at ``name`` by ``fill(t, i0, i1)``
    (rows i0..i1-1 of the chunk), in chunks of at most :data:`ROW_BUDGET` logits: ``[rows]``."""
    t, vocab = corrupt.shape[1], model.lm_head.weight.shape[0]
    step = max(1, ROW_BUDGET // (t * vocab))
    out = []
    for i0 in range(0, rows, step):
        i1 = min(rows, i0 + step)
        with torch.no_grad(), patch(model, {name: lambda x, i0=i0, i1=i1: fill(x.clone(), i0, i1)}):
            out.append(metric(logits_of(model(corrupt.expand(i1 - i0, -1)))))
    return torch.cat(out)  # [rows]


def patch_residual(
    model, corrupt: Tensor, clean_cache, metric: Metric, point: str = "resid_pre", on_layer=None
):
    """``[L, T]``: the metric with the clean ``blocks.{l}.{point}`` restored at position p alone."""
    t = corrupt.shape[1]
    rows = []
    for l in range(len(model.blocks)):
        clean = clean_cache[RESID.format(l=l, point=point)]  # [1, T, d]

        def fill(x: Tensor, i0: int, i1: int, clean=clean) -> Tensor:
            p = torch.arange(i0, i1)  # row i of the chunk patches position i0 + i
            x[p - i0, p] = clean[0, p].to(x.dtype)
            return x

        rows.append(_batched(model, corrupt, t, RESID.format(l=l, point=point), fill, metric))
        if on_layer is not None:
            on_layer(l)
    return torch.stack(rows)  # [L, T]


def patch_heads(model, corrupt: Tensor, clean_cache, metric: Metric, on_layer=None) -> Tensor:
    """``[L, h]``: the metric with head h's clean output ``z`` restored at every position."""
    rows = []
    for l, block in enumerate(model.blocks):
        clean = clean_cache[Z.format(l=l)]  # [1, T, h, d_k]

        def fill(z: Tensor, i0: int, i1: int, clean=clean) -> Tensor:
            h = torch.arange(i0, i1)  # row i of the chunk patches head i0 + i
            z[h - i0, :, h] = clean[0, :, h].transpose(0, 1).to(z.dtype)  # [n, T, d_k]
            return z

        rows.append(_batched(model, corrupt, block.self_attn.num_heads, Z.format(l=l), fill, metric))
        if on_layer is not None:
            on_layer(l)
    return torch.stack(rows)  # [L, h]


@dataclasses.dataclass
class Patching:
    """One patching sweep: the metric on the ``clean`` and ``corrupt`` runs, ``resid [L, T]`` (point
    ``point`` restored at one position) and ``heads [L, h]`` (one head's output restored), with the
    clean prompt's ``tokens`` for the position axis."""

    tokens: list[str]
    point: str
    clean: float
    corrupt: float
    resid: Tensor
    heads: Tensor

    @property
    def tied(self) -> bool:
        """Whether the clean and corrupted runs give the same metric (within :data:`TIE`)."""
        return abs(self.clean - self.corrupt) < TIE

    def recovered(self, grid: Tensor) -> Tensor:
        """``(grid - corrupt) / (clean - corrupt)``; a ``ValueError`` when the two runs tie."""
        if self.tied:
            raise ValueError(
                f"the clean and corrupted runs give the same metric ({self.clean:.4g}): nothing to recover"
            )
        return (grid - self.corrupt) / (self.clean - self.corrupt)

    def to_json(self) -> dict:
        """The same keys every time: ``resid [L, T]``, ``heads [L, h]``, their ``*_recovered`` shares
        (None when the runs tie) and ``tie`` (None, or why they are None)."""
        data = {"tokens": self.tokens, "point": self.point, "clean": self.clean, "corrupt": self.corrupt}
        for name in ("resid", "heads"):
            grid = getattr(self, name)
            data[name] = [[round(float(v), 5) for v in row] for row in grid]
            data[f"{name}_recovered"] = (
                None if self.tied else [[round(float(v), 4) for v in row] for row in self.recovered(grid)]
            )
        data["tie"] = (
            f"clean and corrupt give the same metric ({self.clean:.4g}; they differ by less than "
            f"{TIE:g}): (patched - corrupt) / (clean - corrupt) divides by 0"
            if self.tied
            else None
        )
        return data


def activation_patching(
    model,
    clean: Tensor,
    corrupt: Tensor,
    metric: Metric,
    *,
    point: str = "resid_pre",
    tokens=None,
    on_layer=None,
) -> Patching:
    """Both sweeps (module doc) of ``clean`` against ``corrupt`` (``[1, T]`` ids each) under ``metric``;
    ``on_layer(done)`` is called after each layer of each sweep (progress)."""
    check_decoder(model)
    refuse_pruned(model, "activation_patching")
    check_pair(clean, corrupt)
    choice("point", point, POINTS)
    cache = clean_run(model, clean, point)
    with torch.no_grad():
        m_clean = float(metric(logits_of(model(clean)))[0])
        m_corrupt = float(metric(logits_of(model(corrupt)))[0])
    resid = patch_residual(model, corrupt, cache, metric, point, on_layer)
    heads = patch_heads(model, corrupt, cache, metric, on_layer)
    tokens = [str(i) for i in clean[0].tolist()] if tokens is None else list(tokens)
    return Patching(tokens, point, m_clean, m_corrupt, resid, heads)
