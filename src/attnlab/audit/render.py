"""Text rendering shared by every audit: aligned tables, numbers with thousands separators, bytes.

The audits build plain dicts (what ``--json`` prints); their ``render_*`` functions turn them into
text with these helpers, so every table in ``attnlab audit`` is aligned the same way.
"""

from __future__ import annotations


def table(header: tuple[str, ...], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    """Aligned text table lines (columns in ``left`` are left-aligned, the rest right-aligned)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(
        str(c).ljust(w) if i in left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    ).rstrip()
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def number(x: float | int | None) -> str:
    """``1,234`` for integers (and integral floats), ``1,234.57`` otherwise, ``-`` for ``None``."""
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.2f}"
    return f"{int(x):,}"


def bytes_text(n: int) -> str:
    """``n`` bytes as ``"12.00 KiB (12,288 B)"``."""
    x, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            break
        x /= 1024
    return f"{n:,} B" if unit == "B" else f"{x:,.2f} {unit} ({n:,} B)"


def describe(cfg: dict) -> str:
    """The model in one line: sizes, then the block's norm, FFN, activation and biases. Only what the
    model reads: no ``d_ff`` or activation without an FFN, ``max_len`` only for a learned table."""
    block = cfg.get("block") or {}
    ffn = block.get("ffn")
    keys = ("d_model", "heads", "kv_heads", *(("d_ff",) if ffn != "none" else ()), "layers", "vocab")
    parts = [f"{k}={cfg[k]}" for k in keys if cfg.get(k) is not None]
    if cfg.get("max_len") is not None and block.get("positions") == "learned" and cfg.get("vocab"):
        parts.append(f"max_len={cfg['max_len']}")  # the rows of a learned position table
    if block:
        norm = {"layer": "LayerNorm", "rms": "RMSNorm"}[block["norm"]]
        parts.append(f"{cfg['norm']}-norm {norm}")
        if ffn == "none":
            parts.append("no FFN")
        else:
            kind = {"mlp": "MLP", "glu": "GLU"}[ffn]
            parts.append(f"{kind} FFN, activation {ACTIVATION_NAMES[block['activation']]}")
        biases = [b for b in ("qkv", "out", "ffn") if block[f"{b}_bias"]]
        parts.append("biases: " + ("all" if len(biases) == 3 else ", ".join(biases) or "none"))
        parts.append(f"positions {block['positions']}")
    else:
        parts += [f"{k}={cfg[k]}" for k in ("norm", "bias", "activation") if cfg.get(k) is not None]
    if cfg.get("model") == "gpt" and not cfg.get("tie_head", True):
        parts.append("untied head")
    if cfg.get("share_embeddings"):
        parts.append("shared embeddings")
    return ", ".join(parts)


# how each activation of attnlab.nn.config.ACTIVATIONS is written in the tables
ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh)", "silu": "SiLU"}
