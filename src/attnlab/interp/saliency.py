"""Which input positions a GPT's prediction depends on, three ways, and how alike their rankings are.

For a sequence ``x [T]``, a query position ``q`` and the token ``y`` that follows it, each input
position ``j <= q`` gets a score:

- attention received, layer l: ``a_l[j] = (1/h) Σ_heads A_l[q, j]``, the weight the query gives
  key ``j``, averaged over the layer's heads (read through the ``weights`` hook point);
- occlusion: ``|log p(y | x) - log p(y | x without token j)|``, where "without token j" zeroes
  the token embedding ``e_j = W_E[x_j]`` in ``h_0`` (its position embedding stays);
- gradient x input: ``|g_j · e_j|`` with ``g_j = ∂ log p(y | x) / ∂h_0[j]``: the first-order
  (Taylor) estimate of the same occlusion, ``log p(x - e_j) ≈ log p(x) - g_j · e_j``.

Occlusion and gradient x input measure what the prediction depends on; attention is what the
notes warn is only tempting as an explanation. :func:`spearman` compares two rankings (Spearman's
ρ, ties ranked by their mean rank). Caveat built into the comparison: from layer 1 on, the key
``j`` that a head reads is a residual stream that already mixes earlier positions, so its weight
need not point at token ``j`` itself (why attention can rank positions unlike occlusion).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnlab.models.capabilities import require_decoder
from attnlab.nn.hooks import capture, patch

EMBED = "embed"  # h_0 = token + position embeddings  [B, T, d_model]


def attention_point(layer: int) -> str:
    """The hook point of layer ``layer``'s attention weights ``[B, h, T_q, T_k]`` in a GPT."""
    return f"blocks.{layer}.self_attn.weights"


def _check(model, ids: Tensor, targets: Tensor) -> int:
    """The number of layers; ``ids [B, T]`` and ``targets [B]`` checked."""
    require_decoder(model, "attribution")
    if ids.ndim != 2 or targets.shape != (ids.shape[0],):
        raise ValueError(
            f"ids must be [B, T] and targets [B], got {list(ids.shape)} and {list(targets.shape)}"
        )
    return int(model.config.num_layers)


def attention_received(model, ids: Tensor) -> Tensor:
    """``[L, B, T]``: per layer, the last position's attention to each position, averaged over heads."""
    layers = int(model.config.num_layers)
    names = [attention_point(i) for i in range(layers)]
    with torch.no_grad(), capture(model, names) as cache:
        model(ids)
    return torch.stack([cache[n][:, :, -1, :].mean(dim=1) for n in names])  # [L, B, T]


def _target_log_prob(model, ids: Tensor, targets: Tensor) -> Tensor:
    """``[B]``: log p(targets | ids), the prediction at the last position (in float64: occlusion takes
    differences of these)."""
    return model(ids)[:, -1].double().log_softmax(dim=-1).gather(-1, targets[:, None])[:, 0]


def occlusion(model, ids: Tensor, targets: Tensor) -> Tensor:
    """``[B, T]``: |change of log p(targets) at the last position| when position j's token embedding
    is zeroed, for every j (one forward pass of T copies per row)."""
    _check(model, ids, targets)
    b, t = ids.shape
    out = torch.empty(b, t, dtype=torch.float64)
    eye = torch.eye(t)[:, :, None]  # [T (copy j), T (position), 1]: 1 where copy j occludes
    with torch.no_grad():
        base = _target_log_prob(model, ids, targets)  # [B]
        for row in range(b):
            copies = ids[row].expand(t, t)  # [T, T]: copy j of the row
            token = model.tok_embed(copies)  # [T, T, d]

            def remove(h0: Tensor, token: Tensor = token) -> Tensor:
                return h0 - eye.to(h0.dtype) * token  # [T, T, d]: e_j taken out of copy j

            with patch(model, {EMBED: remove}):
                occluded = _target_log_prob(model, copies, targets[row].expand(t))  # [T]
            out[row] = (base[row] - occluded).abs()
    return out


def gradient_x_input(model, ids: Tensor, targets: Tensor) -> Tensor:
    """``[B, T]``: ``|g_j · e_j|``, ``g_j`` the gradient of log p(targets) with respect to ``h_0[j]``
    and ``e_j`` position j's token embedding (one backward pass)."""
    _check(model, ids, targets)
    with torch.enable_grad(), capture(model, [EMBED], detach=False) as cache:
        logp = _target_log_prob(model, ids, targets)  # [B]
        (grad,) = torch.autograd.grad(logp.sum(), cache[EMBED])  # [B, T, d]: rows are independent
    with torch.no_grad():
        return (grad * model.tok_embed(ids)).sum(dim=-1).abs().double()  # [B, T]


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks ``0 .. n-1`` of ``x [n]`` (ascending), tied values sharing their mean rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=r) / counts)[group]


def spearman(a, b) -> float:
    """Spearman's ρ of ``a [n]`` and ``b [n]``: the Pearson correlation of their ranks, in [-1, 1].
    A constant input (no ranking to compare) is a ``ValueError``."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError(f"spearman needs two sequences of the same length >= 2, got {a.size} and {b.size}")
    ra, rb = ranks(a) - (a.size - 1) / 2, ranks(b) - (b.size - 1) / 2  # centred ranks
    denom = float(np.sqrt((ra**2).sum() * (rb**2).sum()))
    if denom == 0:
        raise ValueError("spearman of a constant sequence is undefined (every value ties)")
    return float((ra * rb).sum() / denom)
