"""RoPE scaling (linear/PI, dynamic NTK, YaRN, llama3): parity with transformers' ROPE_INIT_FUNCTIONS,
the engine's mirror, invariants and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers import logging as hf_logging
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from attnlab import nn as ann
from attnlab import ref
from attnlab._rope_config import ROPE_TYPES
from attnlab.nn import BlockConfig

SCALED = [t for t in ROPE_TYPES if t != "default"]


def _random_scaling(
    rng: np.random.Generator, kind: str, *, any_bands: bool = False
) -> tuple[int, float, dict, int | None]:
    """A random (head_dim, base, scaling, seq_len) of rope_type ``kind``, over the ranges models use.

    llama3's bands are Llama 3.1's (1, 4) unless ``any_bands``: with a narrow band, float32 (what
    transformers computes in) loses ~``eps low s / (high - low)`` of relative accuracy in the blend."""
    head_dim = int(rng.choice([4, 8, 16, 32, 64, 96, 128, 256]))
    base = float(rng.choice([10000.0, 500000.0, 1e6, rng.uniform(50.0, 2e6)]))
    scaling = {"rope_type": kind, "factor": float(rng.uniform(1.0, 32.0))}
    seq_len = None
    if kind != "linear":
        scaling["original_max_position_embeddings"] = int(rng.integers(16, 16384))
    if kind == "dynamic":
        seq_len = int(rng.integers(1, 4 * scaling["original_max_position_embeddings"]))
    if kind == "yarn":
        variant = int(rng.integers(4))
        if variant == 1:
            scaling.update(beta_fast=float(rng.uniform(8, 64)), beta_slow=float(rng.uniform(0.5, 4)))
        elif variant == 2:
            scaling.update(mscale=float(rng.uniform(0.5, 1.5)), mscale_all_dim=float(rng.uniform(0.5, 1.5)))
        elif variant == 3:
            scaling.update(attention_factor=float(rng.uniform(0.5, 2.0)), truncate=False)
    if kind == "llama3":
        low, high = 1.0, 4.0
        if any_bands:
            low = float(rng.uniform(0.5, 2.0))
            high = low + float(rng.uniform(0.5, 6.0))
        scaling.update(low_freq_factor=low, high_freq_factor=high)
    return head_dim, base, scaling, seq_len


def _transformers(head_dim: int, base: float, scaling: dict, seq_len: int | None):
    """transformers' (inv_freq, attention_factor) for the same scaling (its float32 computation).

    Dynamic NTK reads the trained length from ``config.max_position_embeddings``; the others from
    ``original_max_position_embeddings`` in the dict."""
    params = dict(scaling, rope_theta=base)
    length = scaling.get("original_max_position_embeddings", 2048)
    if scaling["rope_type"] == "dynamic":
        params.pop("original_max_position_embeddings")
        max_pos = length
    else:
        max_pos = max(1, int(round(scaling["factor"] * length)))
    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        rope_parameters=params,
    )
    inv_freq, factor = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu", seq_len=seq_len)
    return inv_freq.double().numpy(), float(factor)


@pytest.fixture(autouse=True)
def _quiet_transformers():
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its factor-vs-length advice is not under test
    yield
    hf_logging.set_verbosity(level)


@pytest.mark.parametrize("kind", SCALED)
def test_frequencies_match_transformers(kind):
    """Relative error <= 1e-6 (transformers works in float32, eps 1.2e-7; attnlab's float64 is the
    reference). One exception, explained by conditioning: llama3's blended band computes
    ``(1 - g) w / s + g w`` with ``g`` from float32 wavelengths, so an error ``dg`` in ``g`` becomes
    ``s dg`` relative to ``w / s``; there the bound is ``1e-6 * max(1, s / 4)``."""
    rng = np.random.default_rng(ROPE_TYPES.index(kind))
    worst = 0.0
    for _ in range(40):
        head_dim, base, scaling, seq_len = _random_scaling(rng, kind)
        got, got_factor = ref.rope_frequencies(head_dim, base, scaling, seq_len=seq_len)
        want, want_factor = _transformers(head_dim, base, scaling, seq_len)
        assert got.shape == (head_dim // 2,) and got.dtype == np.float64
        rel = np.abs(got - want) / got  # [d/2]
        if kind == "llama3":
            plain, _ = ref.rope_frequencies(head_dim, base)
            length = scaling["original_max_position_embeddings"]
            band = (2 * math.pi / plain >= length / 4.0) & (2 * math.pi / plain <= length / 1.0)
            rel[band] /= max(1.0, scaling["factor"] / 4)
        worst = max(worst, float(rel.max()))
        assert got_factor == pytest.approx(want_factor, rel=1e-12)
    assert worst <= 1e-6


@pytest.mark.parametrize("kind", ROPE_TYPES)
def test_engine_matches_reference(kind):
    rng = np.random.default_rng(10 + ROPE_TYPES.index(kind))
    for _ in range(20):
        if kind == "default":
            head_dim, base, scaling, seq_len = int(rng.choice([2, 8, 64])), 10000.0, None, None
        else:
            head_dim, base, scaling, seq_len = _random_scaling(rng, kind, any_bands=True)
        want, want_factor = ref.rope_frequencies(head_dim, base, scaling, seq_len=seq_len)
        got, got_factor = ann.rope_frequencies(head_dim, base, scaling, seq_len=seq_len)
        assert got.dtype == torch.float64 and got_factor == want_factor
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=0)


def test_plain_rope_is_base_power():
    inv, factor = ref.rope_frequencies(8, 100.0)
    np.testing.assert_allclose(inv, [1.0, 100.0**-0.25, 100.0**-0.5, 100.0**-0.75], rtol=1e-15)
    assert factor == 1.0
    assert ref.rope_frequencies(8, 100.0, {"rope_type": "default"})[0].tolist() == inv.tolist()


@pytest.mark.parametrize("kind", SCALED)
def test_factor_one_is_plain_rope(kind):
    """Factor 1 is plain RoPE; for dynamic NTK only up to the trained length L: past it the rule
    ``base (s T / L - s + 1)^(d/(d-2))`` still grows the base by ``(T / L)^(d/(d-2))`` at s = 1."""
    rng = np.random.default_rng(20)
    plain, _ = ref.rope_frequencies(64, 10000.0)
    for _ in range(5):
        _, _, scaling, seq_len = _random_scaling(rng, kind, any_bands=True)
        if kind == "dynamic":
            seq_len = min(seq_len, scaling["original_max_position_embeddings"])
        scaling["factor"] = 1.0
        scaling.pop("attention_factor", None)  # an explicit attention factor is not plain RoPE
        scaling.pop("mscale", None)
        got, factor = ref.rope_frequencies(64, 10000.0, scaling, seq_len=seq_len)
        np.testing.assert_allclose(got, plain, rtol=1e-15)
        assert factor == 1.0


def test_dynamic_is_plain_up_to_the_trained_length_and_grows_after():
    s = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 128}
    plain, _ = ref.rope_frequencies(32)
    for t in (1, 64, 128):
        np.testing.assert_allclose(ref.rope_frequencies(32, scaling=s, seq_len=t)[0], plain, rtol=1e-15)
    longer = [ref.rope_frequencies(32, scaling=s, seq_len=t)[0] for t in (256, 512, 1024)]
    assert longer[0][0] == pytest.approx(1.0)  # the fastest pair is never scaled
    assert longer[0][-1] > longer[1][-1] > longer[2][-1]  # the slowest slows as T grows
    # the slowest pair's exponent is (d-2)/d, so base' = base r^(d/(d-2)) divides it by r = s T / L - s + 1
    ratio = plain[-1] / ref.rope_frequencies(32, scaling=s, seq_len=1024)[0][-1]
    assert ratio == pytest.approx(4 * 1024 / 128 - 3, rel=1e-12)


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    s = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512}
    plain, _ = ref.rope_frequencies(64)
    got, factor = ref.rope_frequencies(64, scaling=s)
    rotations = 512 * plain / (2 * math.pi)  # turns of each pair over the trained length
    fast, slow = rotations > 32, rotations < 1
    np.testing.assert_allclose(got[fast], plain[fast], rtol=1e-15)
    np.testing.assert_allclose(got[slow], plain[slow] / 8, rtol=1e-15)
    assert fast.any() and slow.any()
    assert factor == pytest.approx(0.1 * math.log(8) + 1)


def test_llama3_bands():
    s = {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    }
    plain, _ = ref.rope_frequencies(128, 500000.0)
    got, _ = ref.rope_frequencies(128, 500000.0, s)
    wavelen = 2 * math.pi / plain
    np.testing.assert_allclose(got[wavelen < 2048], plain[wavelen < 2048], rtol=1e-15)
    np.testing.assert_allclose(got[wavelen > 8192], plain[wavelen > 8192] / 8, rtol=1e-15)
    mid = (wavelen >= 2048) & (wavelen <= 8192)
    assert mid.any() and np.all(got[mid] <= plain[mid]) and np.all(got[mid] >= plain[mid] / 8)


@pytest.mark.parametrize("kind", ROPE_TYPES)
def test_scaled_dot_product_depends_only_on_distance(kind):
    rng = np.random.default_rng(30)
    if kind == "default":
        scaling = None
    else:
        _, _, scaling, _ = _random_scaling(rng, kind)
    q, k = rng.normal(size=(1, 16)), rng.normal(size=(1, 16))

    def score(m: int, n: int) -> float:  # dynamic: at one fixed seq_len
        qm = ref.apply_rope(q, np.array([m]), 500.0, scaling=scaling, seq_len=4096)
        kn = ref.apply_rope(k, np.array([n]), 500.0, scaling=scaling, seq_len=4096)
        return (qm @ kn.T).item()

    for m, n in ((5, 2), (40, 7), (1000, 900)):
        for shift in (1, 17, 2000):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), rel=1e-9, abs=1e-12)


def test_yarn_scales_rotated_vectors_by_its_attention_factor():
    rng = np.random.default_rng(31)
    x = rng.normal(size=(5, 16))
    s = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    out = ref.apply_rope(x, np.arange(5), scaling=s)
    np.testing.assert_allclose(
        np.linalg.norm(out, axis=-1), (0.1 * math.log(4) + 1) * np.linalg.norm(x, axis=-1), rtol=1e-12
    )


def test_apply_rope_engine_matches_reference_with_scaling():
    rng = np.random.default_rng(32)
    x = rng.normal(size=(2, 3, 9, 16))
    for kind in SCALED:
        _, _, scaling, _ = _random_scaling(rng, kind)
        pos = np.arange(100, 109)
        want = ref.apply_rope(x, pos, 1000.0, scaling=scaling)  # dynamic: seq_len = 109
        cos, sin = ann.rope_cos_sin(torch.from_numpy(pos), 16, 1000.0, torch.float64, scaling=scaling)
        got = ann.apply_rope(torch.from_numpy(x), cos, sin).numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


LLAMA3 = {"factor": 8.0, "original_max_position_embeddings": 64, "low_freq_factor": 1.0}
BAD = {
    "unknown type": ({"rope_type": "longest"}, ["rope_scaling['rope_type']", "'longest'", "linear"]),
    "not a dict": ("linear", ["rope_scaling must be None or a dict", "'linear'"]),
    "no type": (
        {"factor": 2.0},
        ["rope_scaling must be None or a dict with a 'rope_type'", "{'factor': 2.0}"],
    ),
    "zero factor": ({"rope_type": "linear", "factor": 0.0}, ["rope_scaling['factor']", "> 0", "0.0"]),
    "negative factor": ({"rope_type": "linear", "factor": -2}, ["rope_scaling['factor']", "-2"]),
    "infinite factor": ({"rope_type": "linear", "factor": math.inf}, ["rope_scaling['factor']", "inf"]),
    "nan factor": ({"rope_type": "linear", "factor": math.nan}, ["rope_scaling['factor']", "nan"]),
    "huge factor": (
        {"type": "dynamic", "factor": 1e308, "original_max_position_embeddings": 16},
        ["rope_scaling['factor']", "at most 1e+06", "1e+308"],
    ),
    "missing factor": ({"rope_type": "linear"}, ["'linear' needs ['factor']"]),
    "missing length (yarn)": (
        {"rope_type": "yarn", "factor": 4.0},
        ["'yarn' needs ['original_max_position_embeddings']"],
    ),
    "missing length (dynamic)": (
        {"rope_type": "dynamic", "factor": 4.0},
        ["'dynamic' needs ['original_max_position_embeddings']"],
    ),
    "missing length (llama3)": (
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        ["'llama3' needs ['original_max_position_embeddings']"],
    ),
    "low >= high": (
        {"rope_type": "llama3", **LLAMA3, "high_freq_factor": 1.0},
        ["low_freq_factor < high_freq_factor", "1.0 >= 1.0"],
    ),
    "unknown key": (
        {"rope_type": "linear", "factor": 2.0, "fator": 3},
        ["unknown key(s) ['fator']", "takes ['factor']"],
    ),
    "type disagrees": (
        {"rope_type": "linear", "type": "yarn", "factor": 2.0},
        ["'type' and 'rope_type' that disagree"],
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_scaling_is_one_line_value_error(case):
    scaling, parts = BAD[case]
    for call in (
        lambda: ref.rope_frequencies(8, scaling=scaling),
        lambda: ann.rope_frequencies(8, scaling=scaling),
    ):
        with pytest.raises(ValueError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg
        for part in parts:
            assert part in msg
    with pytest.raises(ValueError, match=r"^BlockConfig\.rope_scaling"):
        BlockConfig(16, 2, 32, positions="rope", rope_scaling=scaling)


def test_bad_head_width_base_and_length():
    with pytest.raises(ValueError, match=r"\beven\b.*\bhead_dim=7$"):
        ref.rope_frequencies(7)
    with pytest.raises(ValueError, match=r"^head_dim\b.*\bpositive\b.*, got 0$"):
        ann.rope_frequencies(0)
    dyn = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
    with pytest.raises(ValueError, match=r"needs head_dim >= 4"):
        ref.rope_frequencies(2, scaling=dyn)
    with pytest.raises(ValueError, match=r"needs head_dim >= 4"):
        BlockConfig(4, 2, 8, positions="rope", rope_scaling=dyn)
    with pytest.raises(ValueError, match=r"^base\b.*> 0, got -1\.0$"):
        ref.rope_frequencies(8, -1.0)
    with pytest.raises(ValueError, match=r"^seq_len\b.*\bpositive\b.*, got 0$"):
        ref.rope_frequencies(8, scaling=dyn, seq_len=0)


def test_old_type_key_and_block_config_roundtrip():
    old = {"type": "linear", "factor": 2.0}
    np.testing.assert_array_equal(ref.rope_frequencies(8, scaling=old)[0], ref.rope_frequencies(8)[0] / 2.0)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 16}
    cfg = BlockConfig(16, 2, 32, positions="rope", rope_scaling=yarn)
    assert BlockConfig.from_json(cfg.to_json()) == cfg
