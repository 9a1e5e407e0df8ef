"""Residuals and norms in a deep stack: without residuals the first block gets almost no gradient
and the stack does not learn; post-norm holds every block's scale at 1, no norm lets it grow; the
pre- and post-norm blocks are attnlab's EncoderLayer (same weights, same outputs)."""

from __future__ import annotations

import pytest
import torch

from attnlab.experiments.residuals import Block, Settings, loss_floor, run
from attnlab.nn import BlockConfig
from attnlab.nn.layers import EncoderLayer

SMALL = Settings(layers=8, d=16, heads=2, steps=60, batch=16, eval_size=32)


@pytest.fixture(scope="module")
def variants():
    return run(SMALL, log=lambda *_: None, progress=False).data["variants"]


def _ratio(m):
    return m["grad"][0] / m["grad"][-1]


@pytest.mark.slow
def test_residuals_keep_the_gradient_path(variants):
    nores = variants["no residual"]["trained"]
    for name in ("pre-norm", "post-norm", "no norm"):
        m = variants[name]["trained"]
        assert _ratio(m) > 0.3  # the first block gets a gradient like the last one's (measured 1.1-1.9)
        assert _ratio(nores) < 1e-2 * _ratio(m)  # measured 3.4e-4
        assert m["loss"] < nores["loss"] - 1.0  # the residual stacks learn the chain (1.4 against 3.48)
        assert m["loss"] < loss_floor(SMALL) + 0.5


@pytest.mark.slow
def test_norms_keep_scales_stable(variants):
    post = variants["post-norm"]
    for when in ("init", "trained"):
        assert all(0.95 < s < 1.1 for s in post[when]["scale"])  # every block's output at RMS 1
    grow = variants["no norm"]["init"]["scale"]
    assert grow[-1] > 1.15 * grow[0]  # residual only: the stream grows with depth (measured 1.09 -> 1.36)
    pre = variants["pre-norm"]["trained"]["scale"]
    assert pre[-1] > pre[0]  # pre-norm's stream grows too: its norms hold the sub-block inputs


@pytest.mark.parametrize("place", ["pre", "post"])
def test_the_residual_blocks_are_attnlabs_encoder_layer(place):
    config = BlockConfig(16, 2, activation="gelu", norm_place=place)
    torch.manual_seed(0)
    block = Block(config, residual=True, norm=place).double().eval()
    layer = EncoderLayer(config).double().eval()
    layer.load_state_dict(block.state_dict())
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    assert (block(x) - layer(x, is_causal=True)).abs().max() < 1e-12


def test_loss_floor_is_the_chain_entropy():
    s = Settings(vocab=4, follow=0.5)
    p = [0.5 + 0.125] + [0.125] * 3
    assert abs(loss_floor(s) - sum(-q * torch.log(torch.tensor(q)).item() for q in p)) < 1e-6


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="follow"):
        Settings(follow=1.5)
    with pytest.raises(ValueError, match=r"\bd=30\b.*\bheads=4\b"):
        Settings(d=30)
