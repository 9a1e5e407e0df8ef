"""Projections, heads, layers, positions and norms: what the block is made of."""

from __future__ import annotations

import numpy as np

from attnlab import ref
from attnlab.lessons.myths._helpers import (
    decoder_params,
    encoder_params,
    ffn_params,
    fmt,
    mha_params,
    minilm_tensors,
    module_count,
    rel,
)
from attnlab.lessons.myths.registry import COURSE, NOTES, PLAIN, myth


@myth(
    5,
    claim="W^Q = W^K = W^V: the three projections are one matrix.",
    source=f"{NOTES}, section 6, Dangerous Misconception; {PLAIN}, section 3, Mistakes",
    why_false=(
        "The standard architecture learns three separate matrices; sharing them is a separate design "
        "choice (and tying W^Q = W^K would force symmetric scores)."
    ),
)
def _shared_qkv():
    layers = range(6)
    t = minilm_tensors(
        [f"encoder.layer.{i}.attention.self.{n}.weight" for i in layers for n in ("query", "key", "value")]
    )
    rel_qk, rel_qv, rel_kv = [], [], []
    for i in layers:
        wq, wk, wv = (t[f"encoder.layer.{i}.attention.self.{n}.weight"] for n in ("query", "key", "value"))
        rel_qk.append(rel(wq, wk))
        rel_qv.append(rel(wq, wv))
        rel_kv.append(rel(wk, wv))
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


@myth(
    6,
    claim="Attention exists only in the decoder.",
    source=f"{NOTES}, section 6, Dangerous Misconception; {PLAIN}, section 3, Mistakes",
    why_false=(
        "The encoder's first sub-layer is self-attention: each encoder output mixes every source token."
    ),
)
def _only_decoder():
    rng = np.random.default_rng(4)
    d = 8
    params = encoder_params(rng, d, 16)
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


@myth(
    7,
    claim="The FFN attends to neighbouring tokens.",
    source=f"{NOTES}, section 3, Dangerous Misconception; {PLAIN}, section 6, Mistakes",
    why_false=(
        "The FFN is applied to each position independently (x W_1, never W_1 x for a row x); "
        "cross-token interaction comes from attention."
    ),
)
def _ffn_neighbours():
    rng = np.random.default_rng(5)
    d, f = 8, 32
    ffn, attn = ffn_params(rng, d, f), mha_params(rng, d)
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


@myth(
    8,
    claim="Identical encoder layers share their weights.",
    source=f"{PLAIN}, section 6, Mistakes; {NOTES}, section 3 (six separately parameterized layers)",
    why_false=(
        "The layers share an architecture, not parameters: six base layers hold six times one layer's "
        "count, and a trained model's layers hold different matrices."
    ),
)
def _layers_share_weights():
    import torch

    from attnlab.nn import BlockConfig, Encoder, EncoderLayer

    torch.manual_seed(0)
    per_layer = module_count(EncoderLayer(BlockConfig(512, 8, 2048)))
    stack = Encoder(6, BlockConfig(512, 8, 2048))  # six post-norm base layers
    total = module_count(stack)
    storages = {p.data_ptr() for p in stack.parameters()}
    q = [layer.self_attn.q_proj.weight.detach().numpy() for layer in stack.layers]
    init_pair = min(rel(q[i], q[j]) for i in range(6) for j in range(6) if i < j)
    t = minilm_tensors([f"encoder.layer.{i}.attention.self.query.weight" for i in range(6)])
    ws = [t[f"encoder.layer.{i}.attention.self.query.weight"] for i in range(6)]
    pair = min(rel(ws[i], ws[j]) for i in range(6) for j in range(6) if i < j)
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


@myth(
    14,
    claim="With row-vector head outputs, W^O multiplies on the left.",
    source=f"{NOTES}, section 3, Dangerous Misconception; {PLAIN}, section 5, Mistakes",
    why_false=(
        "Concat(H_1..H_h) is a row [1, h*d_v]; it is multiplied on the right by W^O [h*d_v, d_model]. "
        "Left multiplication needs a consistently transposed, column-oriented layout."
    ),
)
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
        f"Heads [1, 2] and [3, 4] -> Concat = {fmt(concat[0, 0], 0)}, W^O [4, 2]",
        f"  Concat W^O (on the right)     = {fmt(right[0, 0], 0)}",
        f"  W^O Concat (on the left)      : {left} ([4, 2] @ [1, 4])",
        f"  column form (W^O)^T Concat^T  = {fmt(column[:, 0], 0)} (a column; both transposed)",
    ]
    return lines, {
        "concat": concat[0, 0].tolist(),
        "right": right[0, 0].tolist(),
        "left": left,
        "column": column[:, 0].tolist(),
    }


@myth(
    19,
    claim="Self-attention knows word order by itself.",
    source=f"{NOTES}, section 2; {PLAIN}, section 3, Mistakes; {COURSE}, positional encoding lesson",
    why_false=(
        "Without positions or an order-dependent mask self-attention is permutation equivariant: "
        "permuting the tokens only permutes the outputs."
    ),
)
def _order_from_content():
    rng = np.random.default_rng(11)
    d, t = 8, 5
    params = mha_params(rng, d)
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


@myth(
    20,
    claim="Heads are guaranteed to learn distinct, interpretable roles.",
    source=f"{NOTES}, section 3; {PLAIN}, section 5, Mistakes",
    why_false=(
        "Separate projections make specialisation possible, not guaranteed: in a trained model many "
        "heads are near-duplicates or park their weight on special tokens."
    ),
)
def _heads_specialise():
    import torch

    from attnlab.interp.read import attention
    from attnlab.models import load_pretrained

    model, tokenizer = load_pretrained("minilm")
    enc = tokenizer.encode("The animal didn't cross the street because it was too tired.")
    a = attention(model, torch.tensor([enc.ids]))[:, 0].double().numpy()  # [L, B, h, T, T] -> [L, h, T, T]
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
        f"  closest pair: heads {i // h}.{i % h} and {j // h}.{j % h}, "
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


@myth(
    24,
    claim="Every Transformer layer is causally masked and has cross-attention.",
    source=f"{PLAIN}, section 6, Mistakes; {NOTES}, sections 2-3",
    why_false=(
        "The standard encoder has unmasked self-attention and an FFN; masked self-attention and "
        "cross-attention belong to the decoder."
    ),
)
def _every_layer_masked():
    rng = np.random.default_rng(13)
    d, t = 8, 5
    enc, dec = encoder_params(rng, d, 16), decoder_params(rng, d, 16)
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


@myth(
    25,
    claim="The original Transformer normalises before the residual branch (pre-norm).",
    source=f"{PLAIN}, section 6, Mistakes; {NOTES}, section 3",
    why_false=("The paper applies LayerNorm after the residual addition: LN(x + Sublayer(x))."),
)
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
