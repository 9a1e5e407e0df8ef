"""Multi-head attention for the engine, with a KV cache.

MultiHead(X_q, X_kv) = Concat(H_1, ..., H_h) W^O,  H_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i,
Q = X_q W^Q, K = X_kv W^K, V = X_kv W^V  (the notes' row convention; torch's ``nn.Linear`` stores
each W transposed, ``[d_out, d_in]``).

``forward`` is four named steps: project (Q, K, V, heads, RoPE, the cache), mask (the boolean
mask, ALiBi's bias, and whether PyTorch's ``is_causal`` is exactly the lower-right mask), attend,
merge (heads back together, W^O). Attend has paths side by side, and tests prove they agree:
- the fast path, ``F.scaled_dot_product_attention`` (fused; no weights come back), or the tiled
  :func:`attnlab.nn.flash_attention`;
- the explicit path, written out step by step, which returns the weights ``[B, h, T_q, T_k]``.
The tensors between the steps are the hook points ``MultiHeadAttention.POINTS`` (declared once,
with their shapes): ``trace``, :func:`attnlab.nn.capture`/:func:`~attnlab.nn.patch` and
``attnlab audit shapes`` all use them.
GQA/MQA: ``num_kv_heads`` key/value heads, each shared by ``num_heads / num_kv_heads`` consecutive
query heads. Causal masking with a cache is aligned to the lower right (the new queries are the
last positions), unlike ``is_causal=True`` of PyTorch, which is aligned to the upper left.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attnlab._checks import EMPTY_ROWS, choice, empty_row_error, positive_int
from attnlab.nn.config import BlockConfig
from attnlab.nn.flash import flash_attention
from attnlab.nn.hooks import HookPoints, add_hook, remove_hook
from attnlab.nn.linear import (
    LinearAttentionState,
    causal_linear_attention_with_state,
    elu_feature_map,
    linear_attention,
)
from attnlab.nn.masks import causal_mask, sliding_window_mask
from attnlab.nn.positions import alibi_bias, apply_rope, rope_cos_sin
from attnlab.nn.sparse import block_sparse_attention

Trace = Callable[[str, torch.Tensor], None]

# Self-attention projects Q, K, V with one matmul on the concatenated weights when there are at
# least this many query positions; below it (a decoding step) the copy of 3 d^2 weights that the
# concatenation costs outweighs the saving, so the three projections run separately.
FUSE_MIN_TOKENS = 64


class KVCache:
    """Keys and values of the positions seen so far by one attention layer.

    ``k``/``v`` are ``[B, h_kv, T_cache, d_k]`` (keys already rotated when RoPE is used). A
    *static* cache (cross-attention) is filled once from the encoder memory and then reused.
    """

    def __init__(self, static: bool = False):
        self.static = static
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """Number of cached positions."""
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k, v [B, h_kv, T_new, d]`` after the cached positions; return all of them."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            if k.shape[0] != self.k.shape[0]:
                raise ValueError(f"cache holds batch {self.k.shape[0]} but k has batch {k.shape[0]}")
            self.k = torch.cat([self.k, k], dim=-2)  # [B, h_kv, T_cache + T_new, d_k]
            self.v = torch.cat([self.v, v], dim=-2)  # [B, h_kv, T_cache + T_new, d_v]
        return self.k, self.v

    def reorder(self, index: torch.Tensor) -> KVCache:
        """Keep batch rows ``index [B']`` (beam search); in place, returns ``self``."""
        if self.k is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)
        return self


def _check_mask(mask: torch.Tensor, shape: tuple[int, int, int, int]) -> torch.Tensor:
    """Boolean mask -> broadcastable to ``shape = [B, h, T_q, T_k]`` (a 3-D mask gets a head axis)."""
    if not isinstance(mask, torch.Tensor):
        hint = "; torch.as_tensor(mask) converts it" if hasattr(mask, "__array__") else ""
        raise ValueError(
            f"mask must be a torch bool tensor (True = may attend), got {type(mask).__name__}{hint}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    given = list(mask.shape)
    if mask.ndim == 3:
        mask = mask.unsqueeze(1)  # [B, 1, T_q, T_k]: the same for every head
    if mask.ndim not in (2, 4):
        raise ValueError(
            f"mask must be [T_q, T_k], [B, T_q, T_k] or [B, h, T_q, T_k], got {list(mask.shape)}"
        )
    try:
        ok = torch.broadcast_shapes(mask.shape, shape) == torch.Size(shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"mask of shape {given} does not broadcast to the scores' shape [B, h, T_q, T_k] = {list(shape)}"
        )
    return mask


def _refuse_empty_rows(mask: torch.Tensor) -> None:
    """Raise the one empty-row error (:func:`attnlab._checks.empty_row_error`) if a query row of
    ``mask [..., T_q, T_k]`` has no key."""
    rows = mask.any(dim=-1)  # [..., T_q]: True where a row has a key
    if not bool(rows.all()):  # the index is found only on the way to the error
        raise empty_row_error(tuple(int(i) for i in (~rows).nonzero()[0]))


def _needs_weights(hooks) -> bool:
    """Whether hooks (``{point: [fn]}`` or None) read or replace ``scores``/``weights``, which only the
    explicit path forms."""
    return hooks is not None and ("scores" in hooks or "weights" in hooks)


def expand_kv(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """GQA/MQA: key or value heads ``[B, h_kv, T, d]`` -> ``[B, h, T, d]``, kv head ``j`` serving the
    ``h / h_kv`` consecutive query heads ``j*g .. (j+1)*g - 1`` (``x`` itself when ``h_kv = h``). The
    one place K/V heads are repeated, as :func:`attnlab.ref.multi_head_attention` does."""
    group = num_heads // x.shape[1]
    return x if group == 1 else x.repeat_interleave(group, dim=1)  # [B, h, T, d]


class MultiHeadAttention(HookPoints, nn.Module):
    """Multi-head attention (self or cross) as a :class:`~attnlab.nn.BlockConfig` describes it.

    From the config: ``d_model``, ``num_heads`` (h; ``d_k = d_model / h``), ``num_kv_heads`` (GQA/MQA),
    ``qkv_bias`` / ``out_bias``, ``positions`` (``"rope"`` with ``rope_layout``/``rope_base`` and
    ``"alibi"`` act here; the other kinds act on the embeddings), ``window`` (sliding window),
    ``attention`` (``"sdpa"`` fused, ``"explicit"`` always step by step, ``"flash"`` tiled) and
    ``dropout`` on the attention weights (training only).

    Args:
        config: the block's :class:`~attnlab.nn.BlockConfig`.
        cross_attention: keys/values come from another sequence (an encoder's memory): no RoPE,
            ALiBi or window, which relate positions within one sequence.
        kv_dim: width of ``x_kv`` (default ``d_model``).
    Submodules ``q_proj [d_model -> h d_k]``, ``k_proj``/``v_proj [kv_dim -> h_kv d_k]``,
    ``out_proj [h d_k -> d_model]``. Hook points: :attr:`POINTS`. Attribute ``trace``: when set,
    forward runs the explicit path and calls ``trace(name, tensor)`` at every point, in order.
    Attribute ``kept_heads``: None, or after :func:`attnlab.interp.prune_heads` the original numbers
    of the heads left (a config cannot describe that: ``save`` refuses such a model).
    """

    POINTS = {
        "x_q": "[B, T_q, d_model]",  # the input the queries (and, in self-attention, K and V) come from
        "q": "[B, T_q, h*d_k]",  # Q = X_q W^Q
        "k": "[B, T_new, h_kv*d_k]",  # K = X_kv W^K (the new positions only, with a cache)
        "v": "[B, T_new, h_kv*d_k]",  # V = X_kv W^V
        "q_heads": "[B, h, T_q, d_k]",  # Q split into heads (RoPE applied)
        "k_heads": "[B, h_kv, T_k, d_k]",  # K split into heads (RoPE applied), cached keys included
        "v_heads": "[B, h_kv, T_k, d_k]",
        "scores": "[B, h, T_q, T_k]",  # Q K^T / sqrt(d_k) (+ ALiBi), before the mask; explicit path
        "weights": "[B, h, T_q, T_k]",  # softmax(scores + M); explicit path
        "z": "[B, T_q, h, d_k]",  # per-head outputs A V
        "concat": "[B, T_q, h*d_k]",  # Concat(H_1, ..., H_h)
        "out": "[B, T_q, d_model]",  # Concat(...) W^O
    }

    def __init__(self, config: BlockConfig, *, cross_attention: bool = False, kv_dim: int | None = None):
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise ValueError(f"MultiHeadAttention needs a BlockConfig, got {type(config).__name__}")
        c = self.config = config
        self.cross_attention = cross_attention
        self.d_model, self.num_heads, self.num_kv_heads = c.d_model, c.num_heads, c.kv_heads
        self.d_k = c.head_dim
        self.kv_dim = c.d_model if kv_dim is None else positive_int("kv_dim", kv_dim)
        inside = c.positions in ("rope", "alibi") and not cross_attention
        self.positions = c.positions if inside else None  # the positions that act inside attention
        self.window = None if cross_attention else c.window
        self.dropout, self.attention = c.dropout, c.attention
        kv_width = self.num_kv_heads * self.d_k
        self.q_proj = nn.Linear(c.d_model, c.d_model, bias=c.qkv_bias)
        self.k_proj = nn.Linear(self.kv_dim, kv_width, bias=c.qkv_bias)
        self.v_proj = nn.Linear(self.kv_dim, kv_width, bias=c.qkv_bias)
        self.out_proj = nn.Linear(c.d_model, c.d_model, bias=c.out_bias)
        self.kept_heads: tuple[int, ...] | None = None  # after attnlab.interp.prune_heads: the heads left

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
        empty_rows: str = "error",
    ):
        """MultiHead(X_q, X_kv) = Concat(H_1..H_h) W^O, H_i = softmax(Q_i K_i^T / sqrt(d_k) + M) V_i.

        Args:
            x_q: ``[B, T_q, d_model]``. x_kv: ``[B, T_k, kv_dim]`` (``None``: self-attention).
            mask: bool, True = may attend: ``[T_q, T_k]``, ``[B, T_q, T_k]`` (shared by heads; a
                padding mask ``[B, 1, T_k]`` works) or ``[B, h, T_q, T_k]``. ``T_k`` counts cached keys.
            is_causal: causal mask aligned to the lower right (query i sees keys ``0..T_k-T_q+i``).
            need_weights: run the explicit path and return the weights.
            cache: a :class:`KVCache`; new K/V are appended (or, for a static cache already filled,
                the cached K/V are used and ``x_kv`` is ignored).
            empty_rows: a query row the mask leaves with no key is a ``ValueError`` naming it
                (``"error"``, as in :mod:`attnlab.ref`) or gets weights and output 0 (``"zero"``,
                PyTorch's convention).
        Returns:
            ``(out [B, T_q, d_model], weights [B, h, T_q, T_k] or None)``.
        """
        if empty_rows not in EMPTY_ROWS:
            choice("empty_rows", empty_rows, EMPTY_ROWS)
        wanted = need_weights or _needs_weights(self._hooks)  # only the explicit path forms them
        q, k, v = self._project(x_q, x_kv, cache)  # [B, h, T_q, d_k], [B, h_kv, T_k, d_k] x2
        if k.shape[-2] == 0 and q.shape[-2] > 0 and empty_rows == "error":  # as ref refuses it
            raise ValueError(
                f"x_kv has T_k=0: there is no key to attend to (x_q {list(x_q.shape)}, x_kv "
                f"{list(x_kv.shape) if x_kv is not None else None}); empty_rows='zero' gives 0 instead"
            )
        kernel = self._kernel(mask, q.shape[-2], wanted)
        if kernel != "sdpa":  # GQA: the fused kernel shares K/V heads itself (enable_gqa), no copy
            k, v = expand_kv(k, self.num_heads), expand_kv(v, self.num_heads)  # [B, h, T_k, d_k] x2
        if kernel == "linear":
            z, weights = self._linear(q, k, v, mask, is_causal, cache, wanted, empty_rows)
        else:
            mask, bias, in_kernel = self._mask(mask, is_causal, q, k.shape[-2], kernel, empty_rows)
            if kernel == "explicit":
                z, weights = self._explicit(q, k, v, mask, bias)  # [B, h, T_q, d_k], [B, h, T_q, T_k]
            else:
                z, weights = self._fast(kernel, q, k, v, mask, bias, in_kernel), None  # [B, h, T_q, d_k]
        return self._merge(z), (weights if need_weights else None)

    # ----------------------------------------------------------------------------- project
    def _project(self, x_q: torch.Tensor, x_kv: torch.Tensor | None, cache: KVCache | None):
        """Q, K, V in heads ``[B, h, T_q, d_k]``, ``[B, h_kv, T_k, d_k]`` x2: projected, RoPE applied
        to the queries and the new keys, the new keys and values appended to ``cache``."""
        static_hit = cache is not None and cache.static and cache.length > 0
        self._check_inputs(x_q, None if static_hit else x_kv)
        x_q = self._at("x_q", x_q)
        b, t_q, _ = x_q.shape
        if static_hit:  # cross-attention after its first step: the memory's K/V are cached
            q, k, v = self.q_proj(x_q), None, None
        elif (x_kv is None or x_kv is x_q) and self.kv_dim == self.d_model and b * t_q >= FUSE_MIN_TOKENS:
            q, k, v = self._project_self(x_q)
        else:
            x_kv = x_q if x_kv is None else x_kv
            q, k, v = self.q_proj(x_q), self.k_proj(x_kv), self.v_proj(x_kv)
        h, h_kv, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self._at("q", q).view(b, t_q, h, d_k).transpose(1, 2)  # [B, h, T_q, d_k]
        if k is None:
            k, v = cache.k, cache.v  # [B, h_kv, T_k, d_k]
        else:
            t_new = k.shape[1]
            k = self._at("k", k).view(b, t_new, h_kv, d_k).transpose(1, 2)  # [B, h_kv, T_new, d_k]
            v = self._at("v", v).view(b, t_new, h_kv, d_k).transpose(1, 2)  # [B, h_kv, T_new, d_k]
            if self.positions == "rope":  # queries and new keys are the last positions before T_k
                q, k = self._rope(q, k, t_new + (cache.length if cache is not None else 0))
            if cache is not None:
                k, v = cache.append(k, v)  # [B, h_kv, T_k, d_k]
        return self._at("q_heads", q), self._at("k_heads", k), self._at("v_heads", v)

    def qkv_weight(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The concatenated projection (W^Q | W^K | W^V), the one place it is built: ``W_qkv``
        ``[d + 2 kv, d]`` in ``nn.Linear`` layout and ``b_qkv [d + 2 kv]`` (None without biases), with
        ``kv = num_kv_heads * d_k``; ``F.linear(x, W_qkv, b_qkv)`` is Q | K | V side by side."""
        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])  # [d + 2 kv, d]
        b = None
        if self.q_proj.bias is not None:
            b = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])  # [d + 2 kv]
        return w, b

    def _project_self(self, x: torch.Tensor):
        """Q, K, V of self-attention with one matmul on the concatenated weights (W^Q | W^K | W^V)."""
        w, b = self.qkv_weight()  # [d + 2 kv, d], [d + 2 kv]
        kv = self.num_kv_heads * self.d_k
        hd = self.num_heads * self.d_k  # = d_model, except after attnlab.interp.prune_heads
        return F.linear(x, w, b).split([hd, kv, kv], dim=-1)  # [B, T, h d_k], [B, T, kv] x2

    def _rope(self, q: torch.Tensor, k: torch.Tensor, t_k: int):
        """RoPE on ``q [B, h, T_q, d_k]`` and new keys ``k [B, h_kv, T_new, d_k]``, both the last
        positions before ``t_k`` (in self-attention the same positions: one table serves both)."""
        t_q, t_new = q.shape[-2], k.shape[-2]
        n = max(t_q, t_new)
        positions = torch.arange(t_k - n, t_k, device=q.device)  # [n]
        cos, sin = rope_cos_sin(  # [n, d_k/2] x2; scaled (and YaRN's factor) per config.rope_scaling
            positions, self.d_k, self.config.rope_base, q.dtype, scaling=self.config.rope_scaling
        )
        layout = self.config.rope_layout
        q = apply_rope(q, cos[n - t_q :], sin[n - t_q :], layout)
        return q, apply_rope(k, cos[n - t_new :], sin[n - t_new :], layout)

    def _check_inputs(self, x_q: torch.Tensor, x_kv: torch.Tensor | None) -> None:
        """``x_q [B, T_q, d_model]`` and ``x_kv [B, T_k, kv_dim]`` (or None): torch tensors in the
        weights' dtype (any dtype under ``torch.autocast``), else a ``ValueError`` naming it."""
        want = self.q_proj.weight.dtype
        for name, x in (("x_q", x_q), ("x_kv", x_kv)):
            if x is None or (isinstance(x, torch.Tensor) and x.dtype == want):
                continue
            if not isinstance(x, torch.Tensor):
                raise ValueError(
                    f"{name} must be a torch tensor ({want}, the weights' dtype), got {type(x).__name__}"
                )
            if not torch.is_autocast_enabled(x.device.type):
                raise ValueError(
                    f"{name} has dtype {x.dtype} but the weights are {want}: pass a {want} tensor "
                    "(or convert the module, e.g. .to(dtype))"
                )
        if x_q.ndim != 3 or x_q.shape[-1] != self.d_model:
            raise ValueError(f"x_q must be [B, T_q, d_model={self.d_model}], got {list(x_q.shape)}")
        if x_kv is not None:
            if x_kv.ndim != 3 or x_kv.shape[-1] != self.kv_dim:
                raise ValueError(f"x_kv must be [B, T_k, kv_dim={self.kv_dim}], got {list(x_kv.shape)}")
            if x_kv.shape[0] != x_q.shape[0]:
                raise ValueError(f"x_kv has batch {x_kv.shape[0]} but x_q has batch {x_q.shape[0]}")

    # ----------------------------------------------------------------------------- kernel
    def _kernel(self, mask, t_q: int, wanted: bool) -> str:
        """How to attend, chosen here only: ``"linear"`` (the config's kind), ``"explicit"`` (the
        weights are wanted: asked for, hooked, or the config's kind), ``"flash"`` (tiled),
        ``"block_sparse"`` (the window skipping empty tiles, when nothing needs a dense mask: no
        caller's mask, no dropout on the weights, more than one query) or ``"sdpa"`` (fused)."""
        kind = self.attention
        if kind == "linear":
            return "linear"
        if wanted or kind == "explicit":
            return "explicit"
        if kind == "flash":
            return "flash"
        if (
            kind == "block_sparse"
            and self.window is not None
            and mask is None
            and t_q > 1
            and not (self.training and self.dropout > 0)
        ):
            return "block_sparse"
        return "sdpa"

    # ----------------------------------------------------------------------------- mask
    def _mask(self, mask, is_causal: bool, q: torch.Tensor, t_k: int, kernel: str, empty_rows: str):
        """``(mask, bias, in_kernel)`` for ``kernel``: the boolean mask (the caller's, and the
        lower-right causal or sliding-window mask), ALiBi's bias ``[h, T_q, T_k]`` or None, and
        whether the kernel applies the causal/window order itself (flash and block_sparse always,
        lower right; PyTorch's ``is_causal=True`` only when it is the same mask: T_q == T_k, nothing
        else to add). A query row the caller's mask leaves with no key is an error unless
        ``empty_rows="zero"``."""
        if mask is None and not is_causal and self.window is None and self.positions != "alibi":
            return None, None, False  # nothing to mask (most calls of an encoder without padding)
        b, _, t_q, _ = q.shape
        caller_mask = mask is not None
        if caller_mask:
            mask = _check_mask(mask, (b, self.num_heads, t_q, t_k))
        if is_causal and t_k < t_q:
            raise ValueError(
                f"is_causal needs T_k >= T_q (queries are the last positions), got T_q={t_q}, T_k={t_k}"
            )
        bias = None
        if self.positions == "alibi":
            bias = alibi_bias(self.num_heads, t_q, t_k, device=q.device, dtype=q.dtype)  # [h, T_q, T_k]
        ordered = self.window is not None or (is_causal and t_q > 1)  # one query at the end sees every key
        in_kernel = ordered and (
            kernel in ("flash", "block_sparse")
            or (kernel == "sdpa" and self.window is None and t_q == t_k and mask is None and bias is None)
        )
        combined = mask  # the caller's mask with the causal/window order: what decides empty rows
        if ordered and (not in_kernel or mask is not None):
            order = (  # [T_q, T_k]; with flash built only to check the rows
                causal_mask(t_q, t_k, device=q.device)
                if self.window is None
                else sliding_window_mask(t_q, t_k, self.window, device=q.device)
            )
            combined = order if mask is None else mask & order
            if not in_kernel:
                mask = combined
        # the causal and window masks alone always leave a query its own position (T_k >= T_q, W >= 1):
        # only a caller's mask can empty a row, and it is checked once, combined with the order
        if caller_mask and empty_rows == "error":
            _refuse_empty_rows(combined)
        return mask, bias, in_kernel

    # ----------------------------------------------------------------------------- attend
    def _fast(self, kernel: str, q, k, v, mask, bias, in_kernel: bool) -> torch.Tensor:
        """Attention without the weights: ``q [B, h, T_q, d_k]``, ``k, v [B, h_kv, T_k, d_k]`` (expanded to
        h heads except for ``"sdpa"``) -> ``[B, h, T_q, d_k]`` through ``kernel`` (``"sdpa"``,
        ``"flash"`` or ``"block_sparse"``)."""
        if kernel == "block_sparse":  # the window, skipping empty tiles
            return block_sparse_attention(q, k, v, causal=True, window=self.window)
        if kernel == "flash":
            return flash_attention(q, k, v, mask=mask, causal=in_kernel, window=self.window)
        attn_mask = mask
        if bias is not None:  # ALiBi: additive float mask, -inf where the boolean mask forbids
            attn_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        p = self.dropout if self.training else 0.0
        gqa = k.shape[1] != q.shape[1]
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=p, is_causal=in_kernel, enable_gqa=gqa
        )

    def _explicit(self, q, k, v, mask, bias):
        """softmax(Q K^T / sqrt(d_k) + bias + M) V, written out: ``q, k, v [B, h, T, d_k]`` (K/V heads
        expanded) -> ``(z [B, h, T_q, d_k], weights [B, h, T_q, T_k])``."""
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_k)  # [B, h, T_q, T_k]
        if bias is not None:
            scores = scores + bias
        scores = self._at("scores", scores)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # [B, h, T_q, T_k]
        if mask is not None:  # a query with no key left (empty_rows="zero"): zeros, never NaN
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        weights = self._at("weights", weights)
        if self.training and self.dropout > 0:
            weights = F.dropout(weights, self.dropout)
        return weights @ v, weights  # [B, h, T_q, d_k], [B, h, T_q, T_k]

    def _linear(self, q, k, v, mask, is_causal: bool, cache, wanted: bool, empty_rows: str):
        """Linear attention (``attention="linear"``), phi = elu + 1: ``q, k, v [B, h, T, d_k]`` (K/V
        heads expanded) -> ``(z [B, h, T_q, d_k], weights [B, h, T_q, T_k] or None)``.

        Three forms, one function of the inputs: with a :class:`~attnlab.nn.linear.LinearAttentionState`
        (generation) the recurrent sums; with no mask and no weights wanted the chunked prefix sums
        (O(T)); otherwise the quadratic form ``A = (phi(Q) phi(K)^T * M) / row sums``, ``Z = A V``,
        whose ``A`` are the weights (points ``scores`` = phi(Q) phi(K)^T before the mask, ``weights``).
        """
        if isinstance(cache, LinearAttentionState):
            if mask is not None or wanted or not is_causal:
                raise ValueError(
                    "linear attention with a recurrent state is causal and keeps no keys: "
                    "no mask, no weights, is_causal=True"
                )
            return causal_linear_attention_with_state(q, k, v, cache), None
        if mask is None and not wanted:
            return linear_attention(q, k, v, causal=is_causal), None
        mask, _, _ = self._mask(mask, is_causal, q, k.shape[-2], "explicit", empty_rows)  # [.., T_q, T_k]
        scores = self._at("scores", elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1))
        if mask is not None:
            scores = scores.masked_fill(~mask, 0.0)  # [B, h, T_q, T_k]
        total = scores.sum(dim=-1, keepdim=True)  # [B, h, T_q, 1]; 0 only for a row with no key
        weights = self._at("weights", scores / torch.where(total > 0, total, torch.ones_like(total)))
        return weights @ v, weights  # [B, h, T_q, d_k], [B, h, T_q, T_k]

    # ----------------------------------------------------------------------------- merge
    def _merge(self, z: torch.Tensor) -> torch.Tensor:
        """Per-head outputs ``[B, h, T_q, d_k]`` -> ``Concat(H_1..H_h) W^O [B, T_q, d_model]``."""
        b, _, t_q, _ = z.shape
        z = self._at("z", z.transpose(1, 2))  # [B, T_q, h, d_k]
        # h*d_k = d_model, except after attnlab.interp.prune_heads removed heads
        concat = self._at("concat", z.reshape(b, t_q, self.num_heads * self.d_k))  # [B, T_q, h*d_k]
        return self._at("out", self.out_proj(concat))  # [B, T_q, d_model]

    # ----------------------------------------------------------------------------- trace
    @property
    def trace(self) -> Trace | None:
        """``trace(name, tensor)`` called at every point of :attr:`POINTS` in order, or None."""
        return self.__dict__.get("_trace")

    @trace.setter
    def trace(self, fn: Trace | None) -> None:
        for point, hook in self.__dict__.pop("_trace_hooks", ()):
            remove_hook(self, point, hook)
        self.__dict__["_trace"] = fn
        if fn is not None:
            hooks = [(point, lambda t, point=point: fn(point, t)) for point in self.POINTS]
            for point, hook in hooks:
                add_hook(self, point, hook)
            self.__dict__["_trace_hooks"] = hooks


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split projected features into heads, as :func:`attnlab.ref.split_heads`: Q = [Q_1 | ... | Q_h],
    head ``i`` owning columns ``i*d_h .. (i+1)*d_h - 1``.

    Args:
        x: ``[..., T, h*d_h]`` (e.g. ``X W^Q``). num_heads: h; must divide the width.
    Returns:
        ``[..., h, T, d_h]`` (a view when ``x`` is contiguous).
    """
    num_heads = positive_int("num_heads", num_heads)
    if x.dim() < 2 or x.shape[-1] % num_heads:
        raise ValueError(
            f"x {list(x.shape)} must be [..., T, h*d_h] with a width divisible by num_heads={num_heads}"
        )
    *lead, t, width = x.shape
    return x.view(*lead, t, num_heads, width // num_heads).transpose(-2, -3)  # [..., h, T, d_h]


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concat(H_1, ..., H_h), the inverse of :func:`split_heads` (as :func:`attnlab.ref.merge_heads`).

    Args:
        x: head outputs ``[..., h, T, d_h]``.
    Returns:
        ``[..., T, h*d_h]``, ready for ``@ W^O``.
    """
    if x.dim() < 3:
        raise ValueError(f"x {list(x.shape)} must be head outputs [..., h, T, d_h]")
    *lead, h, t, d_h = x.shape
    return x.transpose(-2, -3).reshape(*lead, t, h * d_h)  # [..., T, h*d_h]
