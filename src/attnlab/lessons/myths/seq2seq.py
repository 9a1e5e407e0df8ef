"""Seq2seq, alignment and the fixed-context bottleneck (the Week 1 notes, section 1)."""

from __future__ import annotations

import math

import numpy as np

from attnlab import ref
from attnlab.lessons.myths._helpers import decoder_params, encoder_params, fmt
from attnlab.lessons.myths.registry import COURSE, NOTES, PLAIN, myth


@myth(
    1,
    claim="Seq2seq means exactly two RNNs and one fixed vector.",
    source=f"{NOTES}, section 1, Dangerous Misconception; {PLAIN}, section 1, Mistakes",
    why_false=(
        "Seq2seq names the mapping from one sequence to another. Attention RNNs and Transformer "
        "encoder-decoders are seq2seq too; the two-RNN fixed-context model is only the earliest design."
    ),
)
def _seq2seq_two_rnns():
    rng = np.random.default_rng(0)
    d, f = 8, 16
    src = rng.normal(size=(1, 5, d))  # [B, S=5, d]
    tgt = rng.normal(size=(1, 3, d))  # [B, T=3, d]
    memory = ref.encoder_layer(src, encoder_params(rng, d, f), 2)  # [1, 5, d]
    out = ref.decoder_layer(
        tgt, memory, decoder_params(rng, d, f), 2, self_mask=ref.causal_mask(3)
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


@myth(
    11,
    claim="A good alignment must be diagonal.",
    source=f"{NOTES}, section 1, Bahdanau alignment; {PLAIN}, section 2, Mistakes",
    why_false=(
        "Each row is a distribution over source positions; when word order changes, the mass moves "
        "off the diagonal."
    ),
)
def _diagonal_required():
    t = 4
    h = 3.0 * np.eye(t)  # source states: word i is a one-hot direction
    s = h[::-1]  # the target visits the source words in reverse order
    _, w, _ = ref.luong_attention(s, h, "dot")  # [T_tgt, T_src]
    argmax = w.argmax(axis=-1).tolist()
    diag = float(np.trace(w) / t)
    lines = [
        "Luong dot attention when the target order reverses the source (word order change):",
        *(f"  target {i}: {fmt(row, 3)}" for i, row in enumerate(w)),
        f"  strongest source per target step = {argmax}; mean weight on the diagonal = {diag:.3f}",
        "The rows still sum to one: a valid alignment that is anti-diagonal.",
    ]
    return lines, {"argmax": argmax, "diagonal_mass": diag, "row_sums": w.sum(-1).tolist()}


@myth(
    15,
    claim="Long sentences always translate worse through a fixed context.",
    source=f"{NOTES}, section 1; {PLAIN}, section 1, Mistakes",
    why_false=(
        "The fixed-width c is a stress point, not a law of length: what strains it is how much "
        "information the output needs."
    ),
)
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


@myth(
    16,
    claim="An attention weight explains why the model decided something.",
    source=f"{NOTES}, section 1, Bahdanau alignment; {PLAIN}, section 2, Mistakes; {COURSE}, Bahdanau lesson",
    why_false=(
        "A weight is a learned soft alignment; a token's effect also depends on its value vector and "
        "on everything downstream."
    ),
)
def _weights_explain():
    q = np.array([[1.0]])
    k = np.array([[math.log(0.7)], [math.log(0.3)]])  # scores log 0.7, log 0.3 -> weights 0.7, 0.3
    v = np.array([[0.01, 0.0], [0.0, 10.0]])
    z, w = ref.scaled_dot_product_attention(q, k, v, scale=1.0)
    contrib = np.linalg.norm(w[0][:, None] * v, axis=-1)  # ||alpha_j v_j||
    lines = [
        f"weights alpha = {fmt(w[0], 2)}, value norms = {fmt(np.linalg.norm(v, axis=-1), 2)}",
        f"  contribution ||alpha_j v_j|| = {fmt(contrib)}; output z = {fmt(z[0])}",
        f"  largest weight: token {int(w[0].argmax())}; largest contribution: token {int(contrib.argmax())}",
        "A weight is a learned soft alignment; what a token contributes also depends on its value.",
    ]
    return lines, {
        "weights": w[0].tolist(),
        "contributions": contrib.tolist(),
        "argmax_weight": int(w[0].argmax()),
        "argmax_contribution": int(contrib.argmax()),
    }


@myth(
    17,
    claim="Alignment weights run over all decoder states.",
    source=f"{PLAIN}, section 2, Mistakes; {NOTES}, section 1 (alignment is [T_target, T_source])",
    why_false=("Each decoder step distributes its weight over the encoder states (source positions)."),
)
def _weights_over_decoder():
    rng = np.random.default_rng(10)
    s_prev, h = rng.normal(size=(3, 4)), rng.normal(size=(6, 5))  # T_tgt=3 decoder, T_src=6 encoder
    _, w, ctx = ref.additive_attention(
        s_prev, h, rng.normal(size=(4, 7)), rng.normal(size=(5, 7)), rng.normal(size=7)
    )
    lines = [
        "Additive attention, 3 decoder steps over 6 encoder states:",
        f"  alignment {list(w.shape)} = [T_target, T_source]; row sums {fmt(w.sum(-1), 6)}",
        f"  context {list(ctx.shape)}: a mix of encoder states (width d_h = 5), one per decoder step",
    ]
    return lines, {
        "alignment_shape": list(w.shape),
        "row_sums": w.sum(-1).tolist(),
        "context_shape": list(ctx.shape),
    }
