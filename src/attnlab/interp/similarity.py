"""Why two sentences are similar: a mean-pooled cosine split exactly into token-pair terms.

With mean pooling, ā = (1/n) Σ_i a_i and b̄ = (1/m) Σ_j b_j (the last hidden states of the n and m
tokens of sentences A and B, special tokens included, as MiniLM pools them), so

    cos(ā, b̄) = ā · b̄ / (‖ā‖ ‖b̄‖) = Σ_i Σ_j  a_i · b_j / (n m ‖ā‖ ‖b̄‖)  =  Σ_i Σ_j C_ij.

Each term ``C_ij`` is what the pair (token i of A, token j of B) adds to the cosine; the terms sum
to it exactly (L2-normalising the pooled vectors does not change a cosine). A term can be negative.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from attnlab.models.sentence import sentence_tokenizer


@dataclasses.dataclass
class PairTerms:
    """``terms [n, m]`` (float64): C_ij for token i of A and token j of B; ``cosine``: their sum."""

    tokens_a: list[str]
    tokens_b: list[str]
    terms: Tensor

    @property
    def cosine(self) -> float:
        """Σ_ij C_ij, the cosine of the two mean-pooled sentence vectors."""
        return float(self.terms.sum())

    def top(self, k: int = 10) -> list[tuple[str, str, float, float]]:
        """The ``k`` largest terms: ``(token of A, token of B, C_ij, C_ij / cos)``, largest first."""
        flat = self.terms.flatten()  # [n m]
        order = flat.argsort(descending=True)[:k]
        m, cos = self.terms.shape[1], self.cosine
        return [
            (self.tokens_a[i // m], self.tokens_b[i % m], float(flat[i]), float(flat[i]) / cos)
            for i in order.tolist()
        ]


def pair_terms(a: Tensor, b: Tensor) -> Tensor:
    """C_ij = a_i · b_j / (n m ‖ā‖ ‖b̄‖) for token vectors ``a [n, d]`` and ``b [m, d]`` -> ``[n, m]``
    (computed in float64; Σ_ij C_ij = cos(mean_i a_i, mean_j b_j))."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise ValueError(
            f"a and b must be [n, d] and [m, d] with n, m >= 1, got {list(a.shape)} and {list(b.shape)}"
        )
    a, b = a.double(), b.double()
    mean_a, mean_b = a.mean(dim=0), b.mean(dim=0)  # [d], [d]
    scale = len(a) * len(b) * mean_a.norm() * mean_b.norm()
    if scale == 0:
        raise ValueError("a sentence's mean vector is zero: its cosine is undefined")
    return (a @ b.T) / scale  # [n, m]


def explain_similarity(model, tokenizer, text_a: str, text_b: str) -> PairTerms:
    """MiniLM's (any mean-pooling BERT's) similarity of ``text_a`` and ``text_b`` as token-pair terms.

    Each sentence is tokenised as :func:`attnlab.models.sentence.embed` does and run alone (no
    padding); ``terms [n, m]`` sum to the cosine of the two sentence embeddings.
    """
    pools = getattr(getattr(model, "config", None), "pooling", None)
    if not hasattr(getattr(model, "config", None), "pooling"):
        raise ValueError(
            f"explain_similarity needs a sentence encoder (a mean-pooling BERT such as MiniLM), got "
            f"{type(model).__name__}: it splits the cosine of two sentence embeddings"
        )
    if pools != "mean":
        raise ValueError(
            f"the token-pair split needs mean pooling, but the model pools with {model.config.pooling!r}"
        )
    tokenizer = sentence_tokenizer(model, tokenizer)  # the one load() gives, or its tokenizers backend
    vectors, tokens = [], []
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for name, text in (("text_a", text_a), ("text_b", text_b)):
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"{name} must be a non-empty string, got {text!r}")
                enc = tokenizer.encode(text)
                ids = torch.tensor([enc.ids], device=next(model.parameters()).device)  # [1, n]
                vectors.append(model(ids).last_hidden_state[0])  # [n, d]
                tokens.append(list(enc.tokens))
    finally:
        model.train(was_training)
    return PairTerms(tokens[0], tokens[1], pair_terms(vectors[0], vectors[1]))
