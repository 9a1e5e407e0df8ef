"""Lesson 05 (notes section 5.5): additive (Bahdanau) attention of one decoder query over four
encoder states."""

from __future__ import annotations

from attnlab.lessons.base import Lesson


def additive_attention() -> list[str]:
    import numpy as np

    from attnlab import ref

    rng = np.random.default_rng(42)
    enc = rng.normal(size=(4, 3))  # encoder states h_i: [T_src, d_h]
    dec = rng.normal(size=3)  # decoder state s_{t-1}: [d_s]
    W, U, v = rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), rng.normal(size=5)

    # the notes' NumPy lines: W multiplies the encoder states, U the decoder state
    score_notes = np.tanh(enc @ W + dec @ U) @ v
    z = score_notes - score_notes.max()
    alpha_notes = np.exp(z) / np.exp(z).sum()
    context_notes = alpha_notes @ enc

    # attnlab: e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i), so W_a (decoder side) is the notes' U and
    # U_a (encoder side) is the notes' W
    scores, alpha, context = ref.additive_attention(dec[None, :], enc, W_a=U, U_a=W, v_a=v)
    score, alpha, context = scores[0], alpha[0], context[0]  # one decoder step: [4], [4], [3]

    worst = max(np.max(np.abs(score - score_notes)), np.max(np.abs(alpha - alpha_notes)),
                np.max(np.abs(context - context_notes)))
    return [
        "alignment scores=" + np.array2string(score, precision=3),
        "alpha=" + np.array2string(alpha, precision=3) + f"; sum={alpha.sum():.6f}",
        "context=" + np.array2string(context, precision=3),
        "attnlab check: computed by attnlab.ref.additive_attention(s_prev=dec, h=enc, W_a=U, U_a=W, v_a=v)",
        f"attnlab check: max |attnlab.ref - notes' NumPy| over scores, alpha, context={worst:.2e}",
    ]


LESSON = Lesson(
    number="05",
    title="Additive Attention",
    concept="A decoder query scores encoder states and forms a normalized context.",
    interpretation=(
        "The alignment weights sum to one at the printed precision, producing the displayed weighted "
        "context. Mind the names: the code block multiplies the encoder states by W and the decoder "
        "state by U, the opposite of the formula e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i) that "
        "attnlab.ref.additive_attention implements. So the block's U is attnlab's W_a (decoder side) "
        "and its W is attnlab's U_a (encoder side); the sum inside tanh, and every number, is the same."
    ),
    func=additive_attention,
)
