"""Helpers shared by the engine tests: reference parameter dicts read from attnlab modules
(:func:`attnlab.ref.params_from_attnlab`)."""

from __future__ import annotations

import pytest

from attnlab.ref import params_from_attnlab


@pytest.fixture
def ref_mha_params():
    return params_from_attnlab


@pytest.fixture
def ref_layer_params():
    return params_from_attnlab
