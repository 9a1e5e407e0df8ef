"""Pruning heads: remove them from the weights, and the importance-ordered pruning curve.

Removing head h of a layer deletes its ``d_k`` rows of W^Q, W^K, W^V (their outputs, and biases) and
its ``d_k`` rows of W^O (inputs; torch stores them as columns of ``out_proj.weight``). The layer then
computes exactly what it computed with the head's output zeroed (``ablate_heads``): the saving per
head is ``4 d_model d_k`` weights and ``3 d_k`` biases (W^O's bias stays). A layer keeps at least one
head: removing all of them is refused (the layer would only add its W^O bias).

:func:`pruning_curve` removes heads least important first (Michel et al. 2019) or in a random
order, and evaluates a metric at 0, 10, ..., 90% of the heads removed. It zeroes the removed heads'
outputs through the hook points (``{layer}.z``, :func:`mask_heads`) — the same outputs as removal,
proven — so it works on every model, GQA included (a key/value head serves several query heads and
cannot be cut with one of them), and counts the parameters removal would leave
(:func:`params_after`: a query head's W^Q rows and W^O columns, plus its key/value head's W^K and
W^V rows once every query head it serves is gone). :func:`decoder_pruning` runs it on a decoder
with a language-model loss (on text, or on the repeated half of ``[BOS, r, r]`` probes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn

from attnlab._checks import positive_int
from attnlab.interp.ablation import _head_position, attention_layers, head_importance, kept_heads, parse_head
from attnlab.interp.attribution import check_decoder, logits_of
from attnlab.interp.composition import repeat_loss
from attnlab.interp.scan import probe_bos
from attnlab.interp.sequences import repeated_tokens
from attnlab.models.capabilities import is_encoder, require_decoder
from attnlab.nn.hooks import patch


def _keep_rows(linear: nn.Linear, rows: torch.Tensor) -> nn.Linear:
    """A new Linear with only output rows ``rows`` of ``linear`` (``weight [out, in]``)."""
    new = nn.Linear(linear.in_features, len(rows), bias=linear.bias is not None)
    with torch.no_grad():
        new.weight.copy_(linear.weight[rows])  # [len(rows), in]
        if linear.bias is not None:
            new.bias.copy_(linear.bias[rows])
    return new.to(linear.weight.device, linear.weight.dtype)


def _keep_cols(linear: nn.Linear, cols: torch.Tensor) -> nn.Linear:
    """A new Linear with only input columns ``cols`` of ``linear`` (bias unchanged)."""
    new = nn.Linear(len(cols), linear.out_features, bias=linear.bias is not None)
    with torch.no_grad():
        new.weight.copy_(linear.weight[:, cols])  # [out, len(cols)]
        if linear.bias is not None:
            new.bias.copy_(linear.bias)
    return new.to(linear.weight.device, linear.weight.dtype)


def _by_layer(layers, heads) -> dict[int, set[int]]:
    """``heads`` (:func:`attnlab.interp.ablation.parse_head`) checked against ``layers``, as each
    layer's positions in its ``z [B, T, h, d_k]``."""
    by_layer: dict[int, set[int]] = {}
    for head in heads:
        layer, _, position = _head_position(layers, head)
        by_layer.setdefault(layer, set()).add(position)
    return by_layer


def prune_heads(model: nn.Module, heads: Sequence, *, stack: str | None = None) -> nn.Module:
    """Remove heads ``(layer, head)`` (or ``"layer.head"``; layers of :func:`attention_layers` of
    ``stack``, heads numbered as in the unpruned model) from ``model``'s weights, in place; returns
    ``model``. GQA layers are refused (a key/value head serves several query heads).

    Each cut layer records the original numbers of the heads it keeps (``kept_heads``): labels and
    indices everywhere stay the unpruned model's (``head 0.3`` is still ``head 0.3``), pruning again
    takes them too, tools that lay heads out as a ``[L, h]`` grid refuse the model, and ``save()``
    refuses it (its config cannot describe the cut)."""
    layers = attention_layers(model, stack)
    for layer, drop in _by_layer(layers, heads).items():
        name, attn = layers[layer]
        if attn.num_kv_heads != attn.num_heads:
            raise ValueError(
                f"layer {layer} ({name}) uses GQA ({attn.num_kv_heads} key/value heads): cannot prune"
            )
        keep = [p for p in range(attn.num_heads) if p not in drop]  # positions left
        if not keep:
            raise ValueError(
                f"cannot remove all {attn.num_heads} heads of layer {layer}: keep at least one "
                f"(the layer would only add its W^O bias)"
            )
        d_k, numbers = attn.d_k, kept_heads(attn)
        index = torch.tensor([p * d_k + i for p in keep for i in range(d_k)])  # [len(keep) d_k]
        attn.q_proj = _keep_rows(attn.q_proj, index)  # [len(keep) d_k, d_model]
        attn.k_proj = _keep_rows(attn.k_proj, index)
        attn.v_proj = _keep_rows(attn.v_proj, index)
        attn.out_proj = _keep_cols(attn.out_proj, index)  # [d_model, len(keep) d_k]
        attn.num_heads = attn.num_kv_heads = len(keep)
        attn.kept_heads = tuple(numbers[p] for p in keep)
    return model


def removal_order(importance: torch.Tensor, *, random_seed: int | None = None) -> list[tuple[int, int]]:
    """Heads ``(layer, head)`` of ``importance [L, h]`` least important first, or in a seeded random
    order; each layer's last head is left out (it cannot be removed)."""
    layers, heads = importance.shape
    if random_seed is None:
        order = importance.flatten().argsort().tolist()
    else:
        order = torch.randperm(layers * heads, generator=torch.Generator().manual_seed(random_seed)).tolist()
    left = dict.fromkeys(range(layers), heads)
    out = []
    for i in order:
        layer, head = divmod(i, heads)
        if left[layer] > 1:
            left[layer] -= 1
            out.append((layer, head))
    return out


@contextlib.contextmanager
def mask_heads(model: nn.Module, heads: Sequence, *, stack: str | None = None) -> Iterator[None]:
    """Within the block, heads ``(layer, head)`` (indices of :func:`attention_layers` of ``stack``, as
    :func:`prune_heads` takes them) output zero: their slice of the point ``{layer}.z [B, T, h, d_k]``
    is zeroed (``ablate_heads``' outputs, through :func:`attnlab.nn.patch` instead of the weights)."""
    layers = attention_layers(model, stack)

    def zero(drop: set[int]):
        index = torch.tensor(sorted(drop))
        return lambda z: z.index_fill(2, index.to(z.device), 0.0)  # z [B, T, h, d_k]

    points = {f"{layers[layer][0]}.z": zero(drop) for layer, drop in _by_layer(layers, heads).items()}
    with patch(model, points):
        yield


def params_after(model: nn.Module, heads: Sequence, *, stack: str | None = None) -> int:
    """The parameter count of ``model`` with ``heads`` removed (as :func:`prune_heads` takes them):
    each query head's ``d_k`` rows of W^Q and of W^O (``2 d_model d_k`` weights, and its ``d_k`` query
    biases), each key/value head whose query heads are all removed its rows of W^K and W^V
    (``2 d_model d_k``, and ``2 d_k`` biases)."""
    layers = attention_layers(model, stack)
    total = sum(p.numel() for p in model.parameters())
    for layer, drop in _by_layer(layers, heads).items():
        attn = layers[layer][1]
        d, d_k, bias = attn.d_model, attn.d_k, attn.q_proj.bias is not None
        total -= len(drop) * (2 * d * d_k + bias * d_k)
        group = attn.num_heads // attn.num_kv_heads
        gone_kv = sum(
            all(h in drop for h in range(g * group, (g + 1) * group)) for g in range(attn.num_kv_heads)
        )
        total -= gone_kv * (2 * attn.kv_dim * d_k + 2 * bias * d_k)
    return total


def pruning_curve(
    model: nn.Module,
    order: Sequence[tuple[int, int]],
    metric: Callable[[nn.Module], dict],
    fractions: Sequence[float] = tuple(i / 10 for i in range(10)),
    *,
    stack: str | None = None,
) -> list[dict]:
    """``metric(model)`` with the first ``round(f * total heads)`` heads of ``order`` masked
    (:func:`mask_heads`: the outputs of their removal), for each fraction f; each row also gives
    ``fraction`` (asked for), ``removed`` (how many: fewer than asked when ``order`` is shorter, as
    when every layer keeps a head), ``share`` (``removed`` / total heads), ``heads`` (their names,
    ``"layer.head"``) and ``params`` (:func:`params_after`); heads are layers of ``stack`` when the
    model has several."""
    total = sum(a.num_heads for _, a in attention_layers(model, stack))
    rows = []
    for f in fractions:
        n = min(round(f * total), len(order))
        with mask_heads(model, order[:n], stack=stack):
            values = metric(model)
        named = ["{}.{}".format(*parse_head(head)) for head in order[:n]]
        row = {"fraction": f, "removed": n, "share": n / total, "heads": named}
        rows.append({**row, "params": params_after(model, order[:n], stack=stack), **values})
    return rows


def decoder_pruning(
    model: nn.Module, calibration: Sequence, held_out: Sequence, loss, *, random_seed: int = 0
) -> dict:
    """Michel et al.'s importance of a decoder's heads under ``loss(model, batch)`` (a scalar tensor)
    on the ``calibration`` batches, and the mean loss on the ``held_out`` batches with 0..90% of the
    heads removed, least important first and in a seeded random order.

    Returns ``{"importance": [L][h], "importance_order": rows, "random_order": rows}``; each row:
    ``fraction``, ``removed``, ``params``, ``loss``.
    """
    model.eval()
    importance = head_importance(model, loss, calibration)

    def metric(m) -> dict:
        with torch.no_grad():
            return {"loss": sum(float(loss(m, b)) for b in held_out) / len(held_out)}

    return {
        "importance": [[round(v, 4) for v in row] for row in importance.tolist()],
        "importance_order": pruning_curve(model, removal_order(importance), metric),
        "random_order": pruning_curve(model, removal_order(importance, random_seed=random_seed), metric),
    }


def lm_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of a decoder on ``ids [B, T]`` (every position but the last)."""
    logits = logits_of(model(ids[:, :-1]))  # [B, T-1, V]
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:])


def repeat_probe_loss(model: nn.Module, probe: torch.Tensor) -> torch.Tensor:
    """:func:`attnlab.interp.composition.repeat_loss` of ``model`` on probes ``[B, 1 + 2L]``."""
    return repeat_loss(logits_of(model(probe)), probe)


def text_windows(ids: Sequence[int], max_len: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A text's ids cut into windows of ``min(max_len, len / 2)`` tokens, alternately calibration and
    held-out: ``(calibration, held_out)``, lists of ``[1, W]``. At least 16 tokens."""
    if len(ids) < 16:
        raise ValueError(f"the text is {len(ids)} tokens; pruning by its loss needs at least 16")
    width = min(max_len, len(ids) // 2)
    windows = [torch.tensor([ids[i : i + width]]) for i in range(0, len(ids) - width + 1, width)]
    return windows[0::2], windows[1::2]


def prune_decoder(
    loaded, *, text: str | None = None, length: int | None = None, batch: int = 16, seed: int = 0
) -> dict:
    """:func:`decoder_pruning` of a loaded decoder (:func:`attnlab.models.load`): by the language-model
    loss on ``text`` (:func:`text_windows`; needs the model's tokenizer), or by
    :func:`repeat_probe_loss` on ``batch`` probes ``[BOS, r, r] [batch, 1 + 2 L]`` of length ``length``
    (default ``min(20, (max_len - 1) // 2, vocab_size - 1)``: what fits the context and the ids there
    are to draw from; ranked on seed ``seed``, judged on ``seed + 1``). Adds ``judged_on``, a line.
    A model that is not a decoder (MiniLM: :mod:`attnlab.interp.minilm_pruning`) is a ``ValueError``."""
    model = loaded.model
    instead = "an encoder's heads: attnlab.interp.minilm_pruning" if is_encoder(model) else ""
    require_decoder(model, "prune_decoder", loaded.source, instead)
    check_decoder(model)
    c = model.config
    if text is not None:
        if loaded.tokenizer is None:
            raise ValueError(
                f"{loaded.source} has no tokenizer (no tokenizer.json): it cannot read a text; judge it on "
                "the repeat probes instead, which need none"
            )
        ids = loaded.tokenizer.encode(text)
        calibration, held_out = text_windows(ids, c.max_len)
        judged = (
            f"the language-model loss on the text ({len(ids)} tokens in windows of {held_out[0].shape[1]}"
        )
        judged += f": {len(calibration)} rank the heads, {len(held_out)} judge the pruned model)"
        result = decoder_pruning(model, calibration, held_out, lm_loss, random_seed=seed)
    else:
        length = _probe_length(length, c.max_len, c.vocab_size)
        bos = probe_bos(loaded)
        calibration = [repeated_tokens(batch, length, c.vocab_size, bos=bos, seed=seed)]  # [B, 1 + 2L]
        held_out = [repeated_tokens(batch, length, c.vocab_size, bos=bos, seed=seed + 1)]
        judged = f"the loss on the repeated half of {batch} [BOS, r, r] probes of L = {length} (ranked on one"
        judged += " seed, judged on another)"
        result = decoder_pruning(model, calibration, held_out, repeat_probe_loss, random_seed=seed)
    return {"judged_on": judged, **result}


def _probe_length(length: int | None, max_len: int, vocab: int) -> int:
    """The repeat probes' ``L``: ``length`` checked, or the default that fits ``max_len`` positions
    (``1 + 2 L``) and ``vocab - 1`` distinct ids besides BOS."""
    if length is None:
        length = min(20, (max_len - 1) // 2, vocab - 1)
    positive_int("length", length)
    if length < 2 or 1 + 2 * length > max_len:
        raise ValueError(f"probes of length {length} need 2 <= L and 1 + 2 L <= {max_len} positions")
    if length > vocab - 1:
        raise ValueError(
            f"probes of length {length} need {length} distinct ids besides BOS; the vocabulary has "
            f"{vocab - 1} ({vocab} ids)"
        )
    return length
