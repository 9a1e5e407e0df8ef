"""The course documents' own conceptual questions, as multiple choice with an explanation.

The Week 19 course page's "Check yourself" (five questions) and "Interview prep" (three), and the
conceptual questions the plain-language notes point to (its "Check yourself" and the exam questions
of its "Where the exam asks this"). Each :class:`Concept` quotes its question as the document words
it (``quote``, a test finds it there), names the document, and carries the right option first, the
wrong ones after (``attnlab quiz --topic concepts`` shuffles them) and the explanation shown once
the question is answered. Unlike the numeric topics these answers are stored: they are the
documents' own statements, cited in ``explanation``.
"""

from __future__ import annotations

from dataclasses import dataclass

PAGE, PLAIN = "the Week 19 course page", "the plain-language notes"


@dataclass(frozen=True)
class Concept:
    """One question: ``document`` (as the pages name it), ``where`` in it, the ``quote`` (verbatim),
    ``ask`` (what to choose, when the quote is not itself a question), ``right`` and ``wrong``
    options, and the ``explanation`` (lines)."""

    key: str
    document: str
    where: str
    quote: str
    ask: str
    right: str
    wrong: tuple[str, ...]
    explanation: tuple[str, ...]


BANK: tuple[Concept, ...] = (
    Concept(
        "page-scale",
        PAGE,
        "Check yourself, 1",
        "Why divide attention scores by √d_k?",
        "",
        "dot products grow with dimension; large scores saturate the softmax and its gradients vanish",
        (
            "so that every row of weights sums to 1",
            "so that the weights of a row come out uniform",
            "to cut the number of parameters of each head",
        ),
        (
            "The page's interview outline: dot products grow with dimension, large scores saturate "
            "softmax (tiny gradients), and scaling keeps the variance roughly constant.",
            "The softmax, not the scaling, makes rows sum to 1; scaling keeps the scores' order, so rows "
            "are not made uniform, and it adds no parameters (the plain-language notes' mistakes list).",
            "attnlab lesson 02 measures it: Var(q.k) tracks d_k (4.04, 15.87, 63.83, 253.99), about 1 "
            "after dividing by sqrt(d_k).",
        ),
    ),
    Concept(
        "page-causal",
        PAGE,
        "Check yourself, 2",
        "What does the causal mask do?",
        "",
        "it sets the scores of future positions to −∞, so each token attends only to itself and earlier "
        "tokens",
        (
            "it hides the padding tokens of shorter sentences",
            "it removes each token's attention to itself (the diagonal)",
            "it makes attention cost grow linearly with the context",
        ),
        (
            "The page: 'a causal mask sets scores for future positions to −∞ so each token attends only "
            "to itself and earlier tokens' (the M in softmax(QKᵀ/√d_k + M)V).",
            "A padding mask is another mask; the diagonal stays (a token sees itself); the cost stays "
            "quadratic (about half the scores are used).",
        ),
    ),
    Concept(
        "page-positions",
        PAGE,
        "Check yourself, 3",
        "Without positional information, self-attention…",
        "How does the sentence go on?",
        "treats its input as a set: shuffle the tokens and each token's output is unchanged apart from "
        "the reordering",
        (
            "attends only to the previous token",
            "gives every token the same output vector",
            "cannot be computed for more than one token",
        ),
        (
            "The page: 'Self-attention treats its input as a set: shuffle the tokens and each token's "
            "output is unchanged apart from the reordering. Word order must be added.'",
            "Tokens still differ by content, so their outputs differ; attnlab's tests check this "
            "permutation equivariance in tests/ref/test_invariants.py.",
        ),
    ),
    Concept(
        "page-roles",
        PAGE,
        "Check yourself, 4",
        "In a transformer block, which part moves information between positions?",
        "",
        "attention",
        ("the MLP", "layer norm", "the residual connection"),
        (
            "The page's roles: attention moves information between positions (communication); the MLP "
            "processes each position independently (computation); residuals keep a clean gradient path; "
            "layer norm keeps scales stable.",
            "attnlab lesson w19-1 runs the page's class Block: '# communicate' is the attention line.",
        ),
    ),
    Concept(
        "page-gpt",
        PAGE,
        "Check yourself, 5",
        "GPT is…",
        "How does the sentence go on?",
        "decoder-only (generation)",
        (
            "encoder-only (understanding)",
            "encoder–decoder, like the original transformer",
            "a recurrent network",
        ),
        (
            "The page: 'The original transformer was encoder–decoder (like T5 today). BERT is "
            "encoder-only (understanding), GPT is decoder-only (generation).'",
        ),
    ),
    Concept(
        "page-qkv",
        PAGE,
        "Interview prep",
        "Explain self-attention with queries, keys and values.",
        "Which is token i's output?",
        "a weighted sum of the values, weighted by softmax of q_i · k_j / √d_k over the keys j (masked "
        "for causality in decoders)",
        (
            "a weighted sum of the keys, weighted by softmax of q_i · k_j",
            "a weighted sum of the values, with the softmax taken over the queries",
            "the concatenation of q_i, k_i and v_i",
        ),
        (
            "The page's outline: each token projects to Q, K, V; scores = QKᵀ/√d, softmax → weights; "
            "output = weighted sum of V; masked for causality in decoders.",
            "The plain-language notes: the weighted sum is over values, not keys, and softmax runs over "
            "the keys for each query, not over queries.",
        ),
    ),
    Concept(
        "page-variance",
        PAGE,
        "Interview prep",
        "Why scale by √d_k?",
        "If q and k have d_k independent entries of mean 0 and variance 1, what does doubling d_k do to "
        "the variance of q · k?",
        "it doubles it (the variance is d_k), which is why the scores are divided by √d_k",
        ("it leaves it at 1", "it halves it", "it quadruples it"),
        (
            "A dot product adds d_k products of variance 1, so Var(q · k) = d_k; dividing by √d_k divides "
            "the variance by d_k, back to about 1 (the page: 'Scaling keeps variance roughly constant').",
            "attnlab lesson 02: Var(q.k) 15.87 at d_k = 16, 63.83 at 64; scaled 0.992 and 0.997.",
        ),
    ),
    Concept(
        "page-cost",
        PAGE,
        "Interview prep",
        "What's the computational complexity of attention, and how is long context handled?",
        "",
        "O(n²·d) compute and O(n²) naive memory; FlashAttention (exact, tiled), sliding-window, sparse or "
        "linear attention, and a KV cache for generation",
        (
            "O(n·d) compute, so long context needs nothing special",
            "O(n²) memory that no exact method can avoid",
            "O(n³) compute, which only approximate attention avoids",
        ),
        (
            "The page's outline: O(n²·d) compute, O(n²) naive memory; FlashAttention is exact and "
            "memory-efficient by tiling; sliding window, sparse, linear attention; KV cache for generation.",
            "attnlab audit cost counts the n² score entries and the 4n²d FLOPs.",
        ),
    ),
    Concept(
        "plain-bottleneck",
        PLAIN,
        "Check yourself, 1",
        "Why is one fixed context vector a problem?",
        "",
        "it is the only source-dependent channel the decoder has, so it must carry everything needed for "
        "every output word",
        (
            "long sentences always translate worse, whatever the model",
            "it makes the encoder's RNN run one word at a time",
            "it holds more parameters than attention",
        ),
        (
            "The plain-language notes' answer: it is the only source-dependent channel the decoder has; "
            "attention instead builds a new weighted context for each step.",
            "They add: this is a strain, not a law that long sentences always translate worse (attnlab "
            "experiment bottleneck measures it).",
        ),
    ),
    Concept(
        "plain-long",
        PLAIN,
        "section 1, where the exam asks this",
        "which models struggle to encode context for long sentences",
        "Which model is it?",
        "the plain RNN encoder-decoder with one fixed context vector",
        (
            "the Transformer encoder",
            "an RNN with Bahdanau attention",
            "a Transformer encoder-decoder",
        ),
        (
            "The notes' derived answer is the plain RNN: its one vector c must carry the whole source, and "
            "information from far-apart words travels through about T steps.",
            "Attention gives each decoder step a fresh context; a Transformer connects any two positions "
            "in one layer (path length O(1)).",
        ),
    ),
    Concept(
        "plain-softmax",
        PLAIN,
        "section 4, where the exam asks this",
        "purpose of softmax",
        "What is it?",
        "to normalise the scores into a probability distribution (positive weights summing to 1)",
        (
            "to keep the scores' variance near 1",
            "to choose exactly one key per query",
            "to add the positional information",
        ),
        (
            "The notes' derived answer: normalise scores to a probability distribution. The weights are "
            "positive and each row sums to 1, 'like percentages of attention'.",
            "Keeping the variance near 1 is the √d_k scaling's job; softmax is soft, not a hard choice.",
        ),
    ),
    Concept(
        "plain-heads",
        PLAIN,
        "section 5, where the exam asks this",
        "motivation for multi-head attention",
        "Which of these is NOT one?",
        "it cuts the number of parameters",
        (
            "several heads can look for different relationships at once",
            "each head has its own W^Q, W^K, W^V, so it can attend in its own way",
            "one attention pattern alone must average over everything a token cares about",
        ),
        (
            "The notes: 'C is false: it does not cut parameters'. With head width d/h each projection "
            "still totals h · d · (d/h) = d².",
            "attnlab quiz --topic params and attnlab audit params count it: the same 4d² for any h.",
        ),
    ),
    Concept(
        "plain-parallel",
        PLAIN,
        "section 6, where the exam asks this",
        "how Transformers process tokens",
        "How?",
        "all positions at once, in parallel",
        (
            "one after another, each waiting for the previous state",
            "in pairs of neighbouring tokens",
            "from the last token back to the first",
        ),
        (
            "The notes' derived answer: all in parallel. In matrix form all positions are computed at "
            "once, 'the parallelism RNNs lacked' (the Week 19 course page).",
        ),
    ),
    Concept(
        "plain-encoder",
        PLAIN,
        "section 6, where the exam asks this",
        "components of a standard encoder layer",
        "Which are they?",
        "unmasked self-attention and a position-wise FFN, each with a residual add and LayerNorm",
        (
            "masked self-attention and cross-attention",
            "cross-attention and a position-wise FFN",
            "an RNN followed by additive attention",
        ),
        (
            "The notes: the standard encoder has unmasked self-attention and an FFN; cross-attention and "
            "masked self-attention belong to the decoder.",
            "U = LN_1(X + MHA(X)), Y = LN_2(U + FFN(U)): attnlab audit shapes draws each arrow.",
        ),
    ),
    Concept(
        "plain-ffn",
        PLAIN,
        "section 6, mistakes people make",
        "The FFN looks at neighbouring tokens.",
        "Is it right?",
        "no: the same FFN weights are applied to each position separately; mixing across tokens comes "
        "from attention",
        (
            "yes: it reads a window of three tokens",
            "yes: it reads every token, as attention does",
            "no: it only reads the first token",
        ),
        (
            "The notes: 'No; it works on each position separately. Mixing across tokens comes from "
            "attention.' FFN(x) = ReLU(x W_1 + b_1) W_2 + b_2, the same weights at every position.",
        ),
    ),
)
