"""The attention exercise's starter file and the fixed signatures the grader calls.

The Week 19 course page's core practice: "Implement scaled dot-product attention, a causal mask and
multi-head splitting in NumPy, and verify against torch.nn.functional.scaled_dot_product_attention".
``attnlab practice start attention`` writes :data:`ATTENTION_STARTER`; the functions have their
docstrings (shapes, equation, mask convention) and no body.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Signature:
    """How the grader calls a function: positional argument names, then keyword argument names."""

    name: str
    positional: tuple[str, ...]
    keywords: tuple[str, ...] = ()

    def text(self) -> str:
        """``softmax(x, axis=...)``: the call as the grader makes it."""
        return f"{self.name}({', '.join([*self.positional, *(f'{k}=...' for k in self.keywords)])})"


SIGNATURES: tuple[Signature, ...] = (
    Signature("softmax", ("x",), ("axis",)),
    Signature("causal_mask", ("t_q", "t_k")),
    Signature("scaled_dot_product_attention", ("q", "k", "v"), ("mask",)),
    Signature("split_heads", ("x", "num_heads")),
    Signature("merge_heads", ("x",)),
    Signature("multi_head_attention", ("x_q", "x_kv", "W_q", "W_k", "W_v", "W_o", "num_heads"), ("mask",)),
)
FUNCTIONS = tuple(s.name for s in SIGNATURES)
MAX_FILE_BYTES = 1 << 20  # the six functions take a few KiB

ATTENTION_STARTER = '''"""attnlab practice: attention in NumPy (the Week 19 course page, core practice).

Write the six functions below with NumPy only; keep their names and signatures. Check them with

    attnlab practice check attention THIS_FILE

which runs them in a separate process against torch.nn.functional.scaled_dot_product_attention
and attnlab's NumPy reference, and names the likely mistake when a check fails.

Conventions (as in torch.nn.functional.scaled_dot_product_attention):
  * rows are tokens: x is [B, T, d]; a weight matrix W is [d_in, d_out] and is applied as x @ W;
  * heads are [B, h, T, d_k];
  * a mask is boolean, True = this query MAY attend to this key, broadcastable to [..., T_q, T_k].
"""

import numpy as np


def softmax(x, axis=-1):
    """softmax(x)_i = exp(x_i) / sum_j exp(x_j) along ``axis``.

    x: an array of any shape. Returns an array of the same shape whose entries along ``axis`` are
    positive and sum to 1. It must not overflow for logits as large as 1e4.
    """
    raise NotImplementedError


def causal_mask(t_q, t_k):
    """The causal mask: bool [t_q, t_k], True = may attend.

    The t_q queries are the LAST t_q of the t_k positions (aligned to the lower right), so query i
    may attend to keys 0 .. t_k - t_q + i. With t_q == t_k this is the lower triangle with its
    diagonal.
    """
    raise NotImplementedError


def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V, with M = -inf where mask is False.

    q: [..., T_q, d_k]; k: [..., T_k, d_k]; v: [..., T_k, d_v]; mask: None or bool broadcastable to
    [..., T_q, T_k] (True = may attend). Returns (out [..., T_q, d_v], weights [..., T_q, T_k]);
    each row of weights sums to 1 over the keys.
    """
    raise NotImplementedError


def split_heads(x, num_heads):
    """[B, T, d] -> [B, h, T, d/h]: head i owns features i*d/h .. (i+1)*d/h - 1 of every token."""
    raise NotImplementedError


def merge_heads(x):
    """[B, h, T, d_k] -> [B, T, h*d_k]: Concat(head_1, ..., head_h), the inverse of split_heads."""
    raise NotImplementedError


def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """MultiHead(X_q, X_kv) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(X_q W_i^Q, X_kv W_i^K, X_kv W_i^V).

    x_q: [B, T_q, d]; x_kv: [B, T_k, d] (the same array for self-attention); W_q, W_k, W_v, W_o:
    [d, d], applied as x @ W (head i uses columns i*d/h .. (i+1)*d/h - 1 of W_q, W_k, W_v);
    mask: None or bool broadcastable to [B, h, T_q, T_k]. Returns [B, T_q, d].
    """
    raise NotImplementedError
'''


def write_starter(directory: str | Path, name: str = "attention.py") -> Path:
    """Write the starter into ``directory``; ``ValueError`` if that file exists (never overwritten)."""
    path = Path(directory) / name
    if path.exists():
        raise ValueError(
            f"{path} already exists; it is never overwritten (pass another directory= to write elsewhere)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ATTENTION_STARTER, encoding="utf-8")
    return path


def _binds(fn: ast.FunctionDef | ast.AsyncFunctionDef, sig: Signature) -> bool:
    """Whether ``fn`` accepts the grader's call (positional names by position, then keywords)."""
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    if len(sig.positional) > len(positional) and a.vararg is None:
        return False
    bound = set(positional[: len(sig.positional)])
    posonly = {p.arg for p in a.posonlyargs}
    kwonly = {p.arg for p in a.kwonlyargs}
    for k in sig.keywords:
        if k in bound or k in posonly:
            return False
        if k not in positional and k not in kwonly and a.kwarg is None:
            return False
        bound.add(k)
    defaults = len(a.defaults)
    required = positional[: len(positional) - defaults] if defaults else positional
    kw_required = [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    return all(r in bound for r in [*required, *kw_required])


def check_file(path: str | Path) -> None:
    """Before running anything: the file exists, is Python and defines the six functions with the
    grader's signatures. ``ValueError`` (one line, naming the function) otherwise."""
    path = Path(path)
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise ValueError(f"practice file {str(path)!r} {what}")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path} has {size} bytes; a practice file has at most {MAX_FILE_BYTES}")
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not Python: it is not UTF-8 text") from None
    except SyntaxError as exc:
        raise ValueError(f"{path} is not Python: line {exc.lineno}: {exc.msg}") from None
    except (MemoryError, RecursionError):  # the parser's own stack: an expression nested thousands deep
        raise ValueError(f"{path} is not Python that can be read: it is nested too deeply") from None
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    for sig in SIGNATURES:
        node = defined.get(sig.name)
        if node is None:
            raise ValueError(f"{path} lacks the function {sig.name}: define {sig.text()}")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _binds(node, sig):
            raise ValueError(
                f"{path}: {sig.name} (line {node.lineno}) has the wrong signature: the grader calls "
                f"{sig.text()}"
            )
