"""What a caller asks a model instead of its family: callers ask the model, never its ``kind``.

Every :class:`~attnlab.models.base.SavableModel` declares, as class constants, what the tools need
to know of it (the families set them in their own file; :mod:`attnlab.models.registry` lists the
families):

=================  ===========================================================================
``DECODER_ONLY``   one causal sequence: ``forward(ids [B, T]) -> logits [B, T, V]``, decoding
                   from a prompt (:func:`is_decoder`, :func:`require_decoder`)
``ENCODER_ONLY``   one bidirectional sequence read whole: ``encode(ids [B, T]) -> [B, T, d_model]``,
                   no logits (:func:`is_encoder`, :func:`require_encoder`)
``STACK``          the name of its one stack of self-attention layers as its hook points spell it
                   (``"blocks"``: ``blocks.{layer}.self_attn.weights [B, h, T, T]``); None for a
                   model without one (source -> target) (:func:`layer_point`,
                   :func:`attention_points`)
``TOKEN_TEXT``     how its ids read as text: ``"decoded"`` (each id decoded) or ``"pieces"`` (the
                   vocabulary's own pieces, WordPiece's ``##ing``) (:func:`token_texts`)
=================  ===========================================================================

The logits of a forward's result are :func:`logits_of`; the end-of-sequence ids a loaded model stops
at are ``Loaded.eos_ids`` (:func:`attnlab.models.load.end_of_sequence`, the one place they are read).
A module that declares nothing (not an attnlab model) is neither a decoder nor an encoder and has no
stack. Light: nothing here imports torch's modules or a family.
"""

from __future__ import annotations

from typing import Any

# the points of one layer of a self-attention stack the tools read, by what they hold
LAYER_POINTS = {
    "weights": "self_attn.weights",  # A = softmax(QK^T / sqrt(d_k) + M), [B, h, T, T]
    "z": "self_attn.z",  # every head's output A V before W^O, [B, T_q, h, d_k]
    "resid_post": "resid_post",  # the layer's output, [B, T, d_model]
}
DECODER_HINT = "a causal language model such as GPT-2 or Llama"
ENCODER_HINT = "minilm or a BERT folder"


def is_decoder(model: Any) -> bool:
    """Whether ``model`` reads one causal sequence and gives logits ``[B, T, V]`` (``DECODER_ONLY``)."""
    return bool(getattr(model, "DECODER_ONLY", False))


def is_encoder(model: Any) -> bool:
    """Whether ``model`` reads one bidirectional sequence into ``[B, T, d_model]`` (``ENCODER_ONLY``)."""
    return bool(getattr(model, "ENCODER_ONLY", False))


def named(model: Any) -> str:
    """``"a bert model (BertEncoder)"``: what ``model`` is, for a message (its class alone without a kind)."""
    kind = getattr(model, "kind", "")
    return f"a {kind} model ({type(model).__name__})" if kind else f"a {type(model).__name__}"


def _refuse(need: str, hint: str, model: Any, what: str, source: Any, instead: str) -> ValueError:
    where = f"; {source} holds" if source is not None else ", got"
    return ValueError(
        f"{what} needs {need} ({hint}){where} {named(model)}" + (f"; {instead}" if instead else "")
    )


def require_decoder(model: Any, what: str, source: Any = None, instead: str = "") -> None:
    """The one answer to "is it a decoder?": a ``ValueError`` naming ``what`` needs one and what
    ``model`` is (``source``: where it was loaded from, named too; ``instead``: the way out, appended)
    unless :func:`is_decoder`."""
    if not is_decoder(model):
        raise _refuse("a decoder-only model", DECODER_HINT, model, what, source, instead)


def require_encoder(model: Any, what: str, source: Any = None, instead: str = "") -> None:
    """As :func:`require_decoder`, for an encoder-only model (:func:`is_encoder`)."""
    if not is_encoder(model):
        raise _refuse("an encoder-only model", ENCODER_HINT, model, what, source, instead)


def stack(model: Any) -> str | None:
    """The name of ``model``'s self-attention stack in its hook points (``STACK``), None without one."""
    return getattr(model, "STACK", None)


def layer_point(model: Any, point: str, layer: int | str = "{layer}") -> str:
    """The hook point ``point`` (a key of :data:`LAYER_POINTS`, or a point's own name such as
    ``"ffn.out"``) of layer ``layer`` of ``model``'s stack: ``blocks.3.self_attn.weights``; the
    default ``layer`` leaves a ``str.format`` pattern of ``layer``. A ``ValueError`` for a model
    without a stack."""
    name = stack(model)
    if name is None:
        raise ValueError(f"{named(model)} has no single self-attention stack to read point {point!r} of")
    return f"{name}.{layer}.{LAYER_POINTS.get(point, point)}"


def attention_points(model: Any) -> dict[str, str]:
    """Every hook point of one layer of ``model``'s stack, as ``str.format`` patterns of ``layer``,
    with the shape its module declares (:meth:`attnlab.nn.hooks.HookPoints.hook_points`):
    ``{"blocks.{layer}.self_attn.weights": "[B, h, T_q, T_k]", ...}``; ``{}`` without a stack."""
    name = stack(model)
    if name is None or not hasattr(model, "hook_points"):
        return {}
    first = f"{name}.0."
    return {
        f"{name}.{{layer}}." + point.removeprefix(first): shape
        for point, shape in model.hook_points().items()
        if point.startswith(first)
    }


def attention_view(model: Any) -> tuple[str, str] | None:
    """``(name, kind)`` of the self-attention a head scan reads through ``model``'s stack:
    ``("decoder causal self-attention", "causal")``, ``("encoder self-attention", "self")``, or None
    (no stack: the views of :func:`attnlab.viz.attention_views`)."""
    if stack(model) is None:
        return None
    if is_decoder(model):
        return "decoder causal self-attention", "causal"
    return ("encoder self-attention", "self") if is_encoder(model) else None


def logits_of(model: Any, out: Any):
    """The logits ``[B, T, V]`` of ``model``'s forward result ``out`` (a tensor, or an output object
    holding ``logits``); a ``ValueError`` for a model whose output holds none (an encoder's states)."""
    if hasattr(out, "logits"):
        return out.logits
    if hasattr(out, "last_hidden_state") or is_encoder(model):
        raise ValueError(f"{named(model)} gives hidden states, not logits (it has no language-model head)")
    return out


def token_texts(model: Any, tokenizer: Any, row: list[int]) -> list[str]:
    """The display text of the ids ``row``: the vocabulary's pieces as they are (``##ing``) for a
    model whose ``TOKEN_TEXT`` is ``"pieces"`` and a tokenizer that has them, else each id decoded
    (``tokenizer.tokens``); the ids themselves without a tokenizer."""
    if tokenizer is None:
        return [str(i) for i in row]
    backend = getattr(tokenizer, "backend", None)
    if getattr(model, "TOKEN_TEXT", "decoded") == "pieces" and backend is not None:
        return [backend.id_to_token(i) for i in row]
    return tokenizer.tokens(row)
