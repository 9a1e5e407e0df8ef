"""Shared fixtures: a seeded NumPy generator. The reference computes in float64 by default."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded generator per test, so every test is reproducible on its own."""
    return np.random.default_rng(1234)
