"""Layer-by-layer comparison of an attnlab GPT with the Hugging Face model it was loaded from.

The other model is anything called like a transformers causal LM: ``other(ids,
output_hidden_states=True, output_attentions=True)`` returning ``hidden_states`` (the embeddings,
then each layer's output, the last one after the final norm) and ``attentions`` (``[B, h, T, T]``
per layer). attnlab does not import transformers; the tests and the docs pass its model in.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def layer_outputs(model, ids: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``(hidden, weights)`` of a :class:`attnlab.models.GPT` on ``ids [B, T]``: ``hidden`` holds
    ``h_0`` (embeddings) ... ``h_L`` ``[B, T, d]`` with the last one after the final norm (as
    Hugging Face reports it); ``weights`` holds each block's attention weights ``[B, h, T, T]``."""
    logits, weights, hidden = model(ids, return_attention=True, return_hidden=True)
    hidden = list(hidden)
    hidden[-1] = model.norm(hidden[-1])  # [B, T, d]
    return hidden, list(weights)


@torch.no_grad()
def compare_layers(model, other, ids: torch.Tensor) -> list[dict]:
    """One row per layer ``l = 0..L`` (0: the embeddings): ``{"layer", "hidden", "weights"}`` with the
    largest absolute difference of the hidden state ``[B, T, d]`` and of the attention weights
    ``[B, h, T, T]`` of the block that produced it (``None`` for the embeddings)."""
    hidden, weights = layer_outputs(model, ids)
    out = other(ids, output_hidden_states=True, output_attentions=True)
    theirs_h, theirs_w = out.hidden_states, out.attentions
    if len(theirs_h) != len(hidden) or len(theirs_w) != len(weights):
        raise ValueError(
            f"the other model reports {len(theirs_h)} hidden states and {len(theirs_w)} attention maps; "
            f"this GPT has {len(hidden)} and {len(weights)}"
        )
    rows = []
    for layer, (ours, theirs) in enumerate(zip(hidden, theirs_h)):
        w = None if layer == 0 else float((weights[layer - 1] - theirs_w[layer - 1]).abs().max())
        rows.append({"layer": layer, "hidden": float((ours - theirs).abs().max()), "weights": w})
    return rows
