"""A property-based sweep of every public ``attnlab.ref`` function with careless and hostile input.

For any arguments at all — arrays of any rank and size (empty included), integer and float32
arrays, NaN/inf/1e308 entries, negative/zero/huge/NaN sizes, wrong strings, None — each function
either returns or raises ``ValueError`` (never ``TypeError``, ``IndexError``, ``MemoryError``,
``ZeroDivisionError``, a NumPy broadcasting traceback or a hang), and finite input never gives a
NaN or infinite output. A complex array is refused (``ref.softmax`` dropped its imaginary part), and
so is a head width of 0 (``scaled_dot_product_attention`` divided by ``sqrt(0)``).
"""

from __future__ import annotations

import inspect
import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlab import ref

ARRAYS = {
    "x",
    "q",
    "k",
    "v",
    "s_prev",
    "h",
    "W_a",
    "U_a",
    "v_a",
    "s",
    "W",
    "gamma",
    "beta",
    "scores",
    "positions",
    "lengths",
    "bias",
    "y",
    "memory",
    "x_q",
    "x_kv",
}
INTS = {"num_heads", "num_kv_heads", "t", "t_q", "t_k", "d", "window", "block", "axis", "block_q", "block_k"}
FLOATS = {"eps", "base", "scale"}
CHOICES = {
    "layout": ["interleaved", "half", "bogus"],
    "kind": ["dot", "general", "concat", "bogus"],
    "approximate": ["none", "tanh", "bogus"],
    "empty_rows": ["error", "zero", "bogus"],
    "norm": ["post", "pre", "bogus"],
    "activation": ["relu", "gelu", "gelu_tanh", "bogus"],
    "positions": [None, "rope", "alibi", "bogus"],
}
SKIP = {"params_from_torch", "encoder_layer", "decoder_layer", "feed_forward", "multi_head_attention"}
FUNCTIONS = [n for n in ref.__all__ if callable(getattr(ref, n)) and n not in SKIP]

special = st.sampled_from([0.0, -0.0, 1e308, -1e308, 3e38, np.nan, np.inf, -np.inf, 1e-310])
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


@st.composite
def arrays(draw):
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128]))
    shape = draw(shapes)
    if dtype == np.complex128:
        return draw(hnp.arrays(dtype, shape, elements=st.complex_numbers(max_magnitude=10, allow_nan=False)))
    if dtype == np.bool_:
        return draw(hnp.arrays(dtype, shape))
    if dtype == np.int64:
        return draw(hnp.arrays(dtype, shape, elements=st.integers(-5, 5)))
    finite = st.floats(-10, 10, width=32 if dtype == np.float32 else 64)
    elements = st.one_of(finite, special) if draw(st.booleans()) else finite
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return draw(hnp.arrays(dtype, shape, elements=elements))


ints = st.one_of(st.integers(-2, 8), st.sampled_from([10**12, 2**63]), st.none(), st.just(True), st.just(2.5))
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.integers(-2, 2))


def _argument(name: str):
    if name in ARRAYS:
        return st.one_of(arrays(), st.none(), st.integers(-3, 3))
    if name == "mask":
        return st.one_of(st.none(), arrays())
    if name in INTS:
        return ints
    if name in FLOATS:
        return floats
    if name in CHOICES:
        return st.sampled_from(CHOICES[name])
    return st.one_of(st.none(), arrays(), ints)


def _finite(value) -> bool:
    if isinstance(value, tuple):
        return all(_finite(v) for v in value)
    a = np.asarray(value)
    return a.dtype == bool or not np.issubdtype(a.dtype, np.number) or bool(np.all(np.isfinite(a)))


def _all_finite(kwargs: dict) -> bool:
    return all(_finite(v) for v in kwargs.values() if isinstance(v, (np.ndarray, float)))


@pytest.mark.slow
@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_ref_function_returns_or_raises_a_value_error(name):
    fn = getattr(ref, name)
    params = list(inspect.signature(fn).parameters.values())
    strategy = st.fixed_dictionaries(
        {p.name: _argument(p.name) for p in params if p.default is inspect._empty},
        optional={p.name: _argument(p.name) for p in params if p.default is not inspect._empty},
    )

    @settings(
        max_examples=120,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(strategy)
    def check(kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out = fn(**kwargs)
            except ValueError:
                return
        complex_in = [n for n, v in kwargs.items() if isinstance(v, np.ndarray) and np.iscomplexobj(v)]
        assert not complex_in, f"{name}({kwargs}) accepted a complex {complex_in}"
        if _all_finite(kwargs):
            assert _finite(out), f"{name}({kwargs}) gave a non-finite result from finite input"

    check()


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: ref.softmax(np.array([1 + 2j, 3.0])), "x must be a real array, got dtype complex128"),
        (
            lambda: ref.scaled_dot_product_attention(np.zeros((2, 0)), np.zeros((3, 0)), np.ones((3, 4))),
            "q and k have d_k=0: no feature to compare (q [2, 0], k [3, 0])",
        ),
        (
            lambda: ref.flash_attention(np.zeros((2, 0)), np.zeros((3, 0)), np.ones((3, 4))),
            "q and k have d_k=0: no feature to compare (q [2, 0], k [3, 0])",
        ),
    ],
    ids=["softmax complex", "sdpa d_k=0", "flash d_k=0"],
)
def test_the_inputs_the_sweep_missed(call, message):
    """Before: softmax returned softmax(real part) with a ComplexWarning; d_k = 0 was a
    ZeroDivisionError (flash: NaN weights)."""
    with pytest.raises(ValueError) as exc:
        call()
    assert str(exc.value) == message
