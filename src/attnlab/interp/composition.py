"""How heads compose (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits").

From the weights alone. Head h reads x through ``W_QK^h = W_Q^h W_K^h^T [d, d]`` (scores ``x_i W_QK
x_j^T``) and writes ``x W_OV^h``, ``W_OV^h = W_V^h W_O^h [d, d]`` (row convention, ``x @ W``). A
later head r can use what an earlier head s wrote in its queries, its keys or its values:

    Q-composition  ||W_OV^s W_QK^r||   / (||W_OV^s|| ||W_QK^r||)
    K-composition  ||W_OV^s W_QK^r^T|| / (||W_OV^s|| ||W_QK^r||)
    V-composition  ||W_OV^s W_OV^r||   / (||W_OV^s|| ||W_OV^r||)          (Frobenius norms)

— TransformerLens's ``all_composition_scores``: each head's norm gain folded into its W_Q, W_K, W_V,
and, under LayerNorm (which removes the mean), those centred over their input and W_O over its
output. Scores are ``[L, h, L, h]`` (sender layer, head, receiver layer, head), 0 unless the
sender's layer is earlier. Random matrices of the
same shapes score well above 0 (:func:`random_baseline`): read a score against that.

Where positions act inside attention (RoPE rotates q and k by their positions) ``W_QK`` is not one
matrix: the score between positions i and j is ``x_i W_Q R_{j-i} W_K^T x_j^T``. The weight-only
scores then miss what the rotation does, and a model trained with RoPE can hide its
previous-token -> induction K-composition from them. What shows the circuit then is an
intervention on the path itself: :func:`path_ablation` removes one earlier head's write from only
the queries, only the keys or only the values of one later head (computed from the residual stream
without it), and measures that head's pattern and the model's loss.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab._checks import choice, positive_int
from attnlab.interp.ablation import parse_head, refuse_pruned
from attnlab.interp.attribution import check_decoder, check_ids, logits_of
from attnlab.interp.detectors import head_score, score_heads
from attnlab.interp.sequences import repeated_tokens
from attnlab.nn.hooks import capture, patch
from attnlab.nn.layers import LayerNorm

KINDS = ("Q", "K", "V")
PATHS = ("q", "k", "v")
RESID_PRE = "blocks.{l}.resid_pre"  # [B, T, d_model]
Z = "blocks.{l}.self_attn.z"  # [B, T, h, d_k]
PROJ = "blocks.{l}.self_attn.{path}"  # q [B, T, h*d_k]; k, v [B, T, h_kv*d_k]
WEIGHTS = "blocks.{l}.self_attn.weights"  # [B, h, T, T]


@dataclasses.dataclass
class HeadMatrices:
    """Per layer (lists of L) and head, the factors ``W_Q, W_K, W_V [h, d, d_k]`` (key/value heads
    expanded to every query head, the norm gain folded in) and ``W_O [h, d_k, d]`` (centred under
    LayerNorm)."""

    W_Q: list[Tensor]
    W_K: list[Tensor]
    W_V: list[Tensor]
    W_O: list[Tensor]


def _per_head(linear, n: int, h: int, gain: Tensor, centre: bool) -> Tensor:
    """``linear``'s ``n`` heads as ``x W_h`` factors ``[h, d, d_k]`` (float64), the norm gain ``g [d]``
    folded in (``diag(g) W``) and, under LayerNorm, centred over ``d`` (the normalised input has mean
    0, so the mean of W's rows is never read), key/value heads repeated for the query heads they serve."""
    d = linear.in_features
    w = gain[:, None] * linear.weight.double().view(n, -1, d).transpose(1, 2)  # [n, d, d_k]
    if centre:
        w = w - w.mean(dim=1, keepdim=True)
    return w.repeat_interleave(h // n, dim=0)  # [h, d, d_k]


@torch.no_grad()
def head_matrices(model) -> HeadMatrices:
    """The factored QK and OV circuits of every head of ``model`` (a decoder), in float64."""
    check_decoder(model)
    refuse_pruned(model, "composition")
    qs, ks, vs, os_ = [], [], [], []
    for block in model.blocks:
        attn = block.self_attn
        h, d = attn.num_heads, attn.d_model
        norm_weight = block.norm1.weight
        gain = torch.ones(d, dtype=torch.float64) if norm_weight is None else norm_weight.double()
        centre = isinstance(block.norm1, LayerNorm)  # LayerNorm reads and passes on only centred vectors
        qs.append(_per_head(attn.q_proj, h, h, gain, centre))
        ks.append(_per_head(attn.k_proj, attn.num_kv_heads, h, gain, centre))
        vs.append(_per_head(attn.v_proj, attn.num_kv_heads, h, gain, centre))
        w_o = attn.out_proj.weight.double().T.reshape(h, attn.d_k, d)  # [h, d_k, d]: rows of W^O
        if centre:
            w_o = w_o - w_o.mean(dim=-1, keepdim=True)
        os_.append(w_o)
    return HeadMatrices(qs, ks, vs, os_)


def _frob(a: Tensor, m: Tensor | None, b: Tensor) -> Tensor:
    """``||A M B^T||_F`` for factors ``a [..., d, k]``, ``m [..., k, k]`` (None: the identity),
    ``b [..., d, k]`` (batch axes broadcast), without the ``d x d`` product:
    ``||A M B^T||^2 = tr(M^T (A^T A) M (B^T B))``."""
    ga = a.transpose(-2, -1) @ a  # [..., k, k]
    gb = b.transpose(-2, -1) @ b  # [..., k, k]
    if m is None:
        return (ga * gb).sum(dim=(-2, -1)).clamp_min(0).sqrt()
    return ((ga @ m) * (m @ gb)).sum(dim=(-2, -1)).clamp_min(0).sqrt()


def _circuits(mats: HeadMatrices, layer: int, kind: str):
    """The receiver's circuit in layer ``layer`` as factors ``(first [h, d, k], second [h, d, k])``
    of ``first @ second^T``: W_QK = W_Q W_K^T, its transpose, or W_OV = W_V (W_O^T)^T."""
    if kind == "Q":
        return mats.W_Q[layer], mats.W_K[layer]
    if kind == "K":
        return mats.W_K[layer], mats.W_Q[layer]
    return mats.W_V[layer], mats.W_O[layer].transpose(1, 2)


@torch.no_grad()
def composition_scores(model, kind: str) -> Tensor:
    """``[L, h, L, h]``: the ``kind`` (Q, K or V) composition of every earlier head into every later
    head (module doc); 0 where the sender is not in an earlier layer."""
    choice("kind", kind, KINDS)
    mats = head_matrices(model)
    n_layers, h = len(mats.W_Q), mats.W_Q[0].shape[0]
    out = torch.zeros(n_layers, h, n_layers, h, dtype=torch.float64)
    for s in range(n_layers):
        v_s, o_s = mats.W_V[s], mats.W_O[s]  # the sender's W_OV = v_s @ o_s
        ov_norm = _frob(v_s, None, o_s.transpose(1, 2))  # [h]
        for r in range(s + 1, n_layers):
            first, second = _circuits(mats, r, kind)  # the receiver's circuit = first @ second^T
            m = o_s[:, None] @ first[None]  # [h_s, h_r, k, k]
            pair = _frob(v_s[:, None], m, second[None])  # [h_s, h_r]
            out[s, :, r] = pair / (ov_norm[:, None] * _frob(first, None, second)[None])
    return out


@torch.no_grad()
def random_baseline(model, *, samples: int = 256, seed: int = 0) -> float:
    """The mean composition score (any kind: the same distribution) of Gaussian factors with the
    model's shapes (``d_model``, ``d_k``): what the score reads when nothing composes."""
    attn = model.blocks[0].self_attn
    g = torch.Generator().manual_seed(seed)
    a, o, first, second = (
        torch.randn(samples, attn.d_model, attn.d_k, generator=g, dtype=torch.float64) for _ in range(4)
    )
    num = _frob(a, o.transpose(1, 2) @ first, second)  # [samples]
    return float((num / (_frob(a, None, o) * _frob(first, None, second))).mean())


def _check_heads(model, sender, receiver) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(sender, receiver)`` parsed (pairs of integers or ``"layer.head"``,
    :func:`attnlab.interp.ablation.parse_head`) and checked: both exist, the sender's layer is earlier."""
    refuse_pruned(model, "path ablation")
    sender, receiver = parse_head(sender, "sender"), parse_head(receiver, "receiver")
    for name, (layer, head) in (("sender", sender), ("receiver", receiver)):
        if not layer < len(model.blocks) or not head < model.blocks[layer].self_attn.num_heads:
            raise ValueError(f"{name} head {layer}.{head} does not exist in this model")
    if sender[0] >= receiver[0]:
        raise ValueError(f"sender {sender[0]}.{sender[1]} must sit in an earlier layer than the receiver")
    return sender, receiver


@torch.no_grad()
def path_ablation(model, ids: Tensor, sender: tuple[int, int], receiver: tuple[int, int], path: str):
    """Run ``ids [B, T]`` with head ``sender``'s write ``z_s W^O_s`` removed from the input of the
    receiver head's ``path`` (q, k or v) only: that projection is recomputed from
    ``norm1(resid_pre - z_s W^O_s)``, every other read of the stream keeps the sender. Returns
    ``(pattern [B, T, T], logits [B, T, V])``: the receiver head's attention and the model's output.
    Heads are pairs of integers ``(layer, head)`` or ``"layer.head"`` strings."""
    check_decoder(model)
    check_ids(ids)
    choice("path", path, PATHS)
    sender, receiver = _check_heads(model, sender, receiver)
    (ls, hs), (lr, hr) = sender, receiver
    block, attn = model.blocks[lr], model.blocks[lr].self_attn
    d_k = attn.d_k
    w_o = model.blocks[ls].self_attn.out_proj.weight[:, hs * d_k : (hs + 1) * d_k]  # [d, d_k]: W^O_s^T
    head = hr if path == "q" else hr // (attn.num_heads // attn.num_kv_heads)  # GQA: the key/value head
    cols = slice(head * d_k, (head + 1) * d_k)
    seen: dict[str, Tensor] = {}

    def replace(t: Tensor) -> Tensor:  # t [B, T, heads*d_k]
        write = seen["z"][:, :, hs] @ w_o.T.to(t.dtype)  # [B, T, d]: the sender's write
        alt = getattr(attn, f"{path}_proj")(block.norm1(seen["x"] - write))  # [B, T, heads*d_k]
        t = t.clone()
        t[..., cols] = alt[..., cols]
        return t

    hooks = {
        Z.format(l=ls): lambda z: seen.__setitem__("z", z),
        RESID_PRE.format(l=lr): lambda x: seen.__setitem__("x", x),
        PROJ.format(l=lr, path=path): replace,
    }
    with patch(model, hooks), capture(model, [WEIGHTS.format(l=lr)]) as cache:
        logits = logits_of(model(ids))
    return cache[WEIGHTS.format(l=lr)][:, hr], logits


MIN_LENGTH = 2  # L = 1 leaves no repeat to score: the loss reads the second copy from its 2nd token


def probe_length(length: int | None, max_len: int, vocab_size: int, name: str = "length") -> int:
    """The ``L`` of ``[BOS, r_1..r_L, r_1..r_L]`` probes for a model of ``max_len`` positions and
    ``vocab_size`` ids: ``length`` checked (``name`` is how the caller calls it, e.g. ``--length``),
    or by default the largest that fits, at most 20. ``2 <= L``: with one token there is no repeat to
    score; ``1 + 2 L <= max_len``; ``L <= vocab_size - 1`` distinct ids besides BOS. A model too
    short (or a vocabulary too small) for ``L = 2`` is a ``ValueError`` that says so."""
    if length is not None:
        positive_int(name, length)
    limit = min((max_len - 1) // 2, vocab_size - 1)  # the longest probe the model can read
    if limit < MIN_LENGTH:
        short = (
            f"reads at most {max_len} positions"
            if (max_len - 1) // 2 < MIN_LENGTH
            else f"has {vocab_size} token ids"
        )
        raise ValueError(
            ("" if length is None else f"{name} {length}: ")
            + f"the model {short}, too few for a [BOS, r_1..r_L, r_1..r_L] probe with a repeat to "
            f"score, which needs L >= {MIN_LENGTH} ({1 + 2 * MIN_LENGTH} positions, "
            f"{MIN_LENGTH + 1} token ids)"
        )
    if length is None:
        return min(20, limit)
    if length < MIN_LENGTH:
        raise ValueError(
            f"{name} {length} leaves no repeat to score (the loss reads the second copy from its "
            f"second token on): give {name} from {MIN_LENGTH} to {limit}, this model's limit"
        )
    if 1 + 2 * length > max_len:
        raise ValueError(
            f"{name} {length} needs 1 + 2*{length} = {1 + 2 * length} positions; the model reads at "
            f"most {max_len}: give {name} from {MIN_LENGTH} to {limit}"
        )
    if length > vocab_size - 1:
        raise ValueError(
            f"{name} {length} needs {length} distinct ids besides BOS; the vocabulary has {vocab_size}: "
            f"give {name} from {MIN_LENGTH} to {limit}"
        )
    return length


def repeat_loss(logits: Tensor, probe: Tensor) -> Tensor:
    """Mean next-token loss on the predictable half of ``[BOS, r_1..r_L, r_1..r_L]`` probes (the
    second copy from its second token on: only an induction circuit predicts it): ``logits
    [B, 1 + 2L, V]``, ``probe [B, 1 + 2L]`` -> a scalar. ``L >= 2`` (else no token is predictable)."""
    length = (probe.shape[1] - 1) // 2
    if length < MIN_LENGTH:
        raise ValueError(
            f"probe [B, {probe.shape[1]}] has L = {length}: a repeat loss needs L >= {MIN_LENGTH}"
        )
    t = torch.arange(length + 1, 2 * length)  # input positions whose next token is a predictable repeat
    return F.cross_entropy(logits[:, t].flatten(0, 1), probe[:, t + 1].flatten())


@dataclasses.dataclass
class PathResult:
    """The receiver head's ``detector`` score and the repeat loss unablated (``score``, ``loss``)
    and with each earlier head's write removed from each path: ``rows`` of ``(sender "l.h", path,
    score, loss)``."""

    receiver: tuple[int, int]
    detector: str
    score: float
    loss: float
    rows: list[tuple[str, str, float, float]]


@torch.no_grad()
def path_scores(model, probe: Tensor, receiver: tuple[int, int], detector: str = "induction") -> PathResult:
    """:func:`path_ablation` of every head of every earlier layer into ``receiver``, on every path,
    on repeat probes ``probe [B, 1 + 2L]`` (:func:`attnlab.interp.repeated_tokens`); scores with
    ``exclude_first`` (heads park spare attention on BOS)."""
    check_decoder(model)
    receiver = parse_head(receiver, "receiver")
    if receiver[0] == 0:
        raise ValueError(
            f"receiver {receiver[0]}.{receiver[1]} is in layer 0: no earlier head can compose into it"
        )
    _check_heads(model, (0, 0), receiver)

    def score(pattern: Tensor) -> float:
        return float(head_score(pattern[:, None], probe, detector, exclude_first=True)[0])

    with capture(model, [WEIGHTS.format(l=receiver[0])]) as cache:
        logits = logits_of(model(probe))
    base = cache[WEIGHTS.format(l=receiver[0])][:, receiver[1]]
    rows = []
    for ls in range(receiver[0]):
        for hs in range(model.blocks[ls].self_attn.num_heads):
            for path in PATHS:
                pattern, out = path_ablation(model, probe, (ls, hs), receiver, path)
                rows.append((f"{ls}.{hs}", path, score(pattern), float(repeat_loss(out, probe))))
    return PathResult(receiver, detector, score(base), float(repeat_loss(logits, probe)), rows)


def _grid_lines(kind: str, scores: Tensor, shown: int = 12) -> list[str]:
    """``kind``'s scores as a sender x receiver table (heads ``l.h``), or its ``shown`` largest
    pairs when the table would be wider than ``shown`` columns."""
    n_layers, h = scores.shape[:2]
    senders = [(l, j) for l in range(n_layers - 1) for j in range(h)]
    receivers = [(l, j) for l in range(1, n_layers) for j in range(h)]
    lines = [f"{kind}-composition (sender head down, receiver head across; 0 where not earlier)"]
    if len(receivers) <= shown:
        lines.append("sender" + "".join(f"{l}.{j}".rjust(7) for l, j in receivers))
        for ls, hs in senders:
            cells = [scores[ls, hs, lr, hr] for lr, hr in receivers]
            lines.append(f"{ls}.{hs}".rjust(6) + "".join(f"{float(v):7.3f}" for v in cells))
        return lines
    flat = scores.flatten().argsort(descending=True)[:shown]
    for i in flat.tolist():
        ls, hs, lr, hr = (int(x) for x in torch.unravel_index(torch.tensor(i), scores.shape))
        lines.append(f"  {ls}.{hs} -> {lr}.{hr}  {float(scores[ls, hs, lr, hr]):.3f}")
    return lines


@dataclasses.dataclass
class CircuitReport:
    """The three composition grids ``scores[kind] [L, h, L, h]``, the ``baseline`` of random
    matrices, and the path ablations into one receiver head (:class:`PathResult`)."""

    scores: dict[str, Tensor]
    baseline: float
    paths: PathResult

    def lines(self) -> list[str]:
        """The report as text lines."""
        out = []
        for kind, scores in self.scores.items():
            out += _grid_lines(kind, scores) + [""]
        out.append(
            f"random matrices of these shapes score {self.baseline:.3f} on average: "
            "read the grids against that\n"
        )
        p = self.paths
        r = f"{p.receiver[0]}.{p.receiver[1]}"
        out.append(
            f"path ablation into head {r}: its {p.detector} score {p.score:.3f} and the repeat loss "
            f"{p.loss:.3f} nats with nothing removed; with one earlier head's write removed from one path:"
        )
        out.append(f"{'sender':>8} {'path':>5} {p.detector + ' score':>16} {'repeat loss':>12}")
        for sender, path, score, loss in p.rows:
            out.append(f"{sender:>8} {path:>5} {score:16.3f} {loss:12.3f}")
        return out

    def to_json(self) -> dict:
        """The grids ``[L, h, L, h]`` as nested lists and the path ablations; every head is named
        ``"layer.head"`` (the receiver's layer and head also as integers)."""

        def rounded(t: Tensor):
            return [[[[round(float(v), 4) for v in c] for c in b] for b in a] for a in t]

        p = self.paths
        return {
            "scores": {k: rounded(v) for k, v in self.scores.items()},
            "baseline": round(self.baseline, 4),
            "receiver": f"{p.receiver[0]}.{p.receiver[1]}",
            "receiver_layer": p.receiver[0],
            "receiver_head": p.receiver[1],
            "detector": p.detector,
            "score": round(p.score, 4),
            "loss": round(p.loss, 4),
            "paths": [
                {"sender": s, "path": path, "score": round(sc, 4), "loss": round(lo, 4)}
                for s, path, sc, lo in p.rows
            ],
        }


@torch.no_grad()
def circuit_report(
    model,
    *,
    receiver: tuple[int, int] | None = None,
    length: int | None = None,
    batch: int = 16,
    seed: int = 0,
    bos: int = 0,
) -> CircuitReport:
    """Composition scores of ``model`` and :func:`path_scores` into ``receiver`` (default: the head
    of layer >= 1 with the best induction score) on ``batch`` probes ``[bos, r_1..r_L, r_1..r_L]``
    (``L``: :func:`probe_length`, by default the largest that fits, at most 20)."""
    check_decoder(model)
    if len(model.blocks) < 2:
        raise ValueError("composition needs at least two layers: this model has one")
    c = model.config
    length = probe_length(length, c.max_len, c.vocab_size)
    probe = repeated_tokens(batch, length, c.vocab_size, bos=bos, seed=seed)  # [B, 1 + 2L]
    if receiver is None:
        with capture(model, ["blocks.*.self_attn.weights"]) as cache:
            model(probe)
        induction = score_heads(list(cache.values()), probe, ["induction"], exclude_first=True)["induction"]
        induction[0] = -1.0  # a receiver needs an earlier layer
        flat = int(induction.argmax())
        receiver = divmod(flat, induction.shape[1])
    scores = {kind: composition_scores(model, kind) for kind in KINDS}
    return CircuitReport(scores, random_baseline(model), path_scores(model, probe, receiver))
