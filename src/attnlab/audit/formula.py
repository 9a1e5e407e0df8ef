"""Polynomials in the notes' symbols, so a count is both a number and its formula.

A :class:`Poly` maps monomials (sorted tuples of symbol names) to integer coefficients, e.g.
``4d² + 2df + f + 9d`` is ``{("d","d"): 4, ("d","f"): 2, ("f",): 1, ("d",): 9}``. It renders in
the notes' style and evaluates for given sizes; the audits sum polys symbolically (the closed
form) and separately sum the evaluated rows, and check that the two agree with the module built.
"""

from __future__ import annotations

from collections import Counter

# rendering order of symbols inside a monomial: "2df", "n_ctx·d", "d·h_kv·d_k"
_ORDER = ("L", "V", "n_ctx", "d", "f", "h_kv", "d_k")
_POWERS = {2: "²", 3: "³"}


class Poly:
    """An integer polynomial in the symbols ``L, V, n_ctx, d, f, h_kv, d_k``."""

    def __init__(self, terms: dict[tuple[str, ...], int] | None = None):
        self.terms = {tuple(sorted(k, key=_ORDER.index)): v for k, v in (terms or {}).items() if v}

    @classmethod
    def term(cls, coef: int, *symbols: str) -> Poly:
        """``coef · symbol_1 · symbol_2 ...`` (no symbols: a constant)."""
        return cls({tuple(symbols): coef})

    def __add__(self, other: Poly) -> Poly:
        out = Counter(self.terms)
        out.update(other.terms)
        return Poly(dict(out))

    def __mul__(self, k: int) -> Poly:
        return Poly({m: c * k for m, c in self.terms.items()})

    def times(self, symbol: str) -> Poly:
        """This polynomial multiplied by one more symbol (e.g. ``L``)."""
        return Poly({m + (symbol,): c for m, c in self.terms.items()})

    def value(self, sizes: dict[str, int]) -> int:
        """Evaluate with ``sizes`` mapping every symbol used to an int."""
        total = 0
        for mono, coef in self.terms.items():
            v = coef
            for s in mono:
                v *= sizes[s]
            total += v
        return total

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        # highest degree first; among linear terms f before d, as the notes write 4d² + 2df + f + 9d
        ordered = sorted(
            self.terms.items(),
            key=lambda mc: (-len(mc[0]), mc[0] != ("f",), [_ORDER.index(s) for s in mc[0]]),
        )
        parts = []
        for mono, coef in ordered:
            powers = Counter(mono)
            syms = [s + _POWERS.get(powers[s], "") for s in _ORDER if s in powers]
            body = ("" if all(len(s) == 1 for s in powers) else "·").join(syms)
            if not body:
                parts.append(str(coef))
            else:
                sep = "" if len(syms[0].rstrip("²³")) == 1 else "·"
                parts.append(body if coef == 1 else f"{coef}{sep}{body}")
        return " + ".join(parts)
