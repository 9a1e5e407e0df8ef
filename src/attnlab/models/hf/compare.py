"""Layer-by-layer comparison of an attnlab GPT with the Hugging Face model it was loaded from.

The other model is anything called like a transformers causal LM: ``other(ids,
output_hidden_states=True, output_attentions=True)`` returning ``hidden_states`` (the embeddings,
then each layer's output, the last one after the final norm) and ``attentions`` (``[B, h, T, T]``
per layer). attnlab does not import transformers; the tests and the docs pass its model in.
"""

from __future__ import annotations

import torch

from attnlab.nn.hooks import capture


@torch.no_grad()
def layer_outputs(model, ids: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``(hidden, weights)`` of a :class:`attnlab.models.GPT` on ``ids [B, T]``: ``hidden`` holds
    ``h_0`` (embeddings) ... ``h_L`` ``[B, T, d]`` with the last one after the final norm (as
    Hugging Face reports it); ``weights`` holds each block's attention weights ``[B, h, T, T]``.
    Both are read at the hook points ``embed``, ``blocks.{i}.resid_post``, ``final_norm`` and
    ``blocks.{i}.self_attn.weights``."""
    n = len(model.blocks)
    with capture(
        model, ["embed", "final_norm", "blocks.*.resid_post", "blocks.*.self_attn.weights"]
    ) as cache:
        model(ids)
    hidden = (
        [cache["embed"]] + [cache[f"blocks.{i}.resid_post"] for i in range(n - 1)] + [cache["final_norm"]]
    )
    return hidden, [cache[f"blocks.{i}.self_attn.weights"] for i in range(n)]


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
