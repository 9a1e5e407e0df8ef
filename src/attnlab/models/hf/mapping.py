"""Hugging Face tensor names onto an attnlab model's, for any family: one :class:`Rule` per tensor.

A family (``gpt2.py``, ``llama.py``) lists, for its config, every tensor the checkpoint must hold
(name without the family's prefix, and shape) and how it becomes attnlab tensors (a rename, a
transpose of GPT-2's Conv1D ``[d_in, d_out]`` weights into ``nn.Linear``'s ``[d_out, d_in]``, a
split of a fused Q/K/V). :func:`map_state` applies the rules and names, in one line, every tensor
that is missing, extra or of the wrong shape.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import torch
from torch import Tensor

# Buffers some checkpoints carry that are not weights (masks, RoPE tables): ignored.
IGNORED = re.compile(r"(^|\.)(attn\.bias|attn\.masked_bias|rotary_emb\.inv_freq|position_ids)$")


@dataclasses.dataclass(frozen=True)
class Rule:
    """Checkpoint tensor ``name`` of ``shape`` becomes ``convert(tensor) -> {our name: tensor}``."""

    name: str
    shape: tuple[int, ...]
    convert: Callable[[Tensor], dict[str, Tensor]]


def rename(name: str, shape: tuple[int, ...], ours: str) -> Rule:
    """The tensor as it is, under our name."""
    return Rule(name, shape, lambda t: {ours: t})


def transposed(name: str, shape: tuple[int, ...], ours: str) -> Rule:
    """A Conv1D weight ``[d_in, d_out]`` (``x @ W``) becomes ``nn.Linear``'s ``[d_out, d_in]``."""
    return Rule(name, shape, lambda t: {ours: t.t().contiguous()})


def split(
    name: str, shape: tuple[int, ...], ours: list[str], sizes: list[int], dim: int, transpose: bool
) -> Rule:
    """A fused tensor (GPT-2's ``c_attn``: ``[d, 3d]`` = W^Q | W^K | W^V) cut along ``dim`` into
    ``sizes``, each transposed to ``[d_out, d_in]`` when ``transpose``."""

    def convert(t: Tensor) -> dict[str, Tensor]:
        parts = t.split(sizes, dim=dim)
        return {o: (p.t() if transpose else p).contiguous() for o, p in zip(ours, parts)}

    return Rule(name, shape, convert)


def strip_prefix(state: dict[str, Tensor], prefixes: tuple[str, ...], anchor: str) -> NameMap:
    """``{short name: checkpoint name}`` for every tensor of ``state`` and every name a rule may ask
    for: names lose the first of ``prefixes`` under which ``anchor`` (the token embedding) is found
    (``transformer.`` for GPT2LMHeadModel, ``""`` for GPT2Model); ``lm_head.*`` sits outside it."""
    prefix = next((p for p in prefixes if p + anchor in state), prefixes[0])
    names = NameMap(prefix)
    for k in state:
        names[k[len(prefix) :] if prefix and k.startswith(prefix) else k] = k
    return names


class NameMap(dict):
    """``{short name: checkpoint name}``; a short name not in the checkpoint is named with the prefix."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def full(self, short: str) -> str:
        if short in self:
            return self[short]
        return short if short.startswith("lm_head.") else self.prefix + short


def map_state(
    rules: list[Rule],
    state: dict[str, Tensor],
    names: NameMap,
    source: str,
    tied: tuple[str, str] | None = None,
) -> dict[str, Tensor]:
    """Our state dict from a checkpoint's ``state`` by ``rules`` (whose names are the short names
    of ``names = {short: checkpoint name}``, see :func:`strip_prefix`).

    ``tied = (head, embedding)``: the head is tied to the embedding, so the checkpoint stores it
    once; a stored copy is accepted when it equals the embedding. Raises one ``ValueError`` line
    naming the missing, mis-shaped and extra tensors by their checkpoint names."""
    full = names.full
    out: dict[str, Tensor] = {}
    missing, bad = [], []
    used = set()
    for rule in rules:
        t = state.get(full(rule.name)) if rule.name in names else None
        if t is None:
            missing.append(full(rule.name))
        elif tuple(t.shape) != rule.shape:
            bad.append(
                f"tensor {full(rule.name)!r} has shape {list(t.shape)}, the config says {list(rule.shape)}"
            )
        else:
            out.update(rule.convert(t))
        used.add(rule.name)
    if tied is not None and tied[0] in names:
        head, emb = state[full(tied[0])], state.get(full(tied[1]))
        used.add(tied[0])
        if emb is not None and (head.shape != emb.shape or not torch.equal(head, emb)):
            bad.append(f"tensor {full(tied[0])!r} differs from the tied embedding {full(tied[1])!r}")
    extra = sorted(full(k) for k in set(names) - used if not IGNORED.search(k))
    problems = []
    if missing:
        problems.append(
            f"missing tensor(s) {missing[:4]}" + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        )
    problems += bad[:3]
    if extra:
        problems.append(
            f"extra tensor(s) {extra[:4]}" + (f" and {len(extra) - 4} more" if len(extra) > 4 else "")
        )
    if problems:
        raise ValueError(f"{source} does not match its config.json: " + "; ".join(problems))
    return out
