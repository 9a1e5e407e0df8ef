"""Boolean attention masks as torch tensors; the same conventions as :mod:`attnlab.ref.masks`.

``True`` where a query may attend, broadcastable to ``[..., T_q, T_k]`` (the convention of
``torch.nn.functional.scaled_dot_product_attention``). Causal masks are aligned to the lower right:
the ``T_q`` queries are the *last* ``T_q`` of the ``T_k`` positions, which is what decoding over a
KV cache needs. (PyTorch's ``is_causal=True`` is aligned to the upper left; it is only correct when
``T_q == T_k``.)
"""

from __future__ import annotations

import torch

from attnlab._checks import positive_int


def causal_mask(t_q: int, t_k: int | None = None, *, device=None) -> torch.Tensor:
    """Lower-right causal mask, as :func:`attnlab.ref.causal_mask`: query ``i`` sees keys
    ``0 .. t_k - t_q + i``.

    Args:
        t_q: number of queries. t_k: number of keys (default ``t_q``). With ``t_q > t_k`` the first
            ``t_q - t_k`` rows are empty (attention over them needs ``empty_rows="zero"``), as in ``ref``.
    Returns:
        bool ``[t_q, t_k]``.
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    i = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # absolute query positions  [t_q, 1]
    j = torch.arange(t_k, device=device)[None, :]  # [1, t_k]
    return j <= i  # [t_q, t_k]


def sliding_window_mask(t_q: int, t_k: int | None = None, window: int = 1, *, device=None) -> torch.Tensor:
    """Causal sliding window, lower-right aligned: query at position ``p`` sees keys ``p-window+1 .. p``.

    Returns:
        bool ``[t_q, t_k]``.
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    window = positive_int("window", window)
    p = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # [t_q, 1]
    j = torch.arange(t_k, device=device)[None, :]  # [1, t_k]
    return (j <= p) & (j > p - window)  # [t_q, t_k]


def padding_mask(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """Key-padding mask from true lengths: key ``j`` of sequence ``b`` is real iff ``j < lengths[b]``.

    Args:
        lengths: ``[B]`` integer lengths, each in ``1..t``. t: padded length.
    Returns:
        bool ``[B, 1, t]`` (broadcasts over queries; multi-head code adds the head axis).
    """
    t = positive_int("t", t)
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D integer tensor, got shape {list(lengths.shape)} dtype {lengths.dtype}"
        )
    if bool((lengths < 1).any()) or bool((lengths > t).any()):
        raise ValueError(f"lengths must lie in 1..{t} (t), got {lengths.tolist()}")
    j = torch.arange(t, device=lengths.device)[None, :]  # [1, t]
    return (j < lengths[:, None])[:, None, :]  # [B, 1, t]


def padding_mask_from_ids(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Key-padding mask from token ids: True where ``ids != pad_id``.

    Args:
        ids: ``[B, T]`` long.
    Returns:
        bool ``[B, 1, T]``.
    """
    if ids.ndim != 2:
        raise ValueError(f"ids must be [B, T], got shape {list(ids.shape)}")
    return (ids != pad_id)[:, None, :]  # [B, 1, T]


def global_positions(global_tokens, t_k: int, *, device=None) -> torch.Tensor:
    """``global_tokens`` (ints, list or 1-D tensor) -> sorted unique long positions ``[n_global]``,
    each in ``0 .. t_k - 1``."""
    g = torch.as_tensor(global_tokens if global_tokens is not None else [], device=device)
    if g.ndim != 1 or (g.numel() and (g.is_floating_point() or g.dtype == torch.bool)):
        raise ValueError(f"global_tokens must be a 1-D list of integer positions, got {global_tokens!r}")
    g = g.long()
    if g.numel() and (int(g.min()) < 0 or int(g.max()) >= t_k):
        raise ValueError(f"global_tokens must lie in 0..{t_k - 1} (the sequence), got {g.tolist()}")
    return torch.unique(g)


def sparse_pattern_mask(
    t_q: int,
    t_k: int | None = None,
    *,
    causal: bool = False,
    window: int | None = None,
    global_tokens=None,
    stride: int | None = None,
    device=None,
) -> torch.Tensor:
    """Sliding-window, Longformer and strided patterns as one boolean ``[t_q, t_k]`` mask.

    The same rule as :func:`attnlab.ref.masks.sparse_pattern_mask` (read its docstring): with
    ``d = p - j`` (query position ``p``, lower-right aligned), ``causal_ok & (|d| < window |
    d mod stride == 0 | p or j global)``.
    """
    t_q = positive_int("t_q", t_q)
    t_k = t_q if t_k is None else positive_int("t_k", t_k)
    if t_k < t_q:
        raise ValueError(
            f"sparse_pattern_mask needs t_k >= t_q (queries are the last keys), got {t_q}, {t_k}"
        )
    reach = None if window is None else positive_int("window", window)
    if stride is not None:
        stride = positive_int("stride", stride)
        reach = stride if reach is None else reach
    p = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # query positions  [t_q, 1]
    j = torch.arange(t_k, device=device)[None, :]  # key positions  [1, t_k]
    d = p - j  # [t_q, t_k]
    allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=device) if reach is None else d.abs() < reach
    if stride is not None:
        allowed = allowed | (d % stride == 0)
    if global_tokens is not None:
        is_global = torch.zeros(t_k, dtype=torch.bool, device=device)
        is_global[global_positions(global_tokens, t_k, device=device)] = True
        allowed = allowed | is_global[p] | is_global[j]  # [t_q, 1] | [1, t_k]
    if causal:
        allowed = allowed & (d >= 0)
    return allowed  # [t_q, t_k]
