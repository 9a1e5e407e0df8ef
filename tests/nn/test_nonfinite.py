"""detect_nonfinite names the first point, in forward order, whose tensor holds a NaN or an
infinity; the oracle is a capture of every point (whose cache is filled in forward order) and
``torch.isfinite`` on each. Nothing is left hooked afterwards; the environment variable installs the
same checks on models attnlab builds or loads, and nothing when it is unset."""

from __future__ import annotations

import re

import click
import pytest
import torch
from click.testing import CliRunner

from attnlab.commands._errors import usage_errors
from attnlab.models import GPT, GPTConfig, load_model
from attnlab.models.registry import build_model
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.nn import NonFiniteError, capture, detect_nonfinite, patch
from attnlab.nn.nonfinite import ENV, describe_nonfinite

SIZES = dict(vocab_size=31, d_model=16, num_heads=4, num_layers=3, d_ff=24, max_len=16)


def _gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**SIZES)).eval()


def _ids() -> torch.Tensor:
    return torch.randint(0, 31, (2, 7), generator=torch.Generator().manual_seed(1))


def _first_nonfinite(model, ids) -> tuple[str, torch.Tensor]:
    """The oracle: every point's tensor in forward order (capture's cache is filled as they run)."""
    with capture(model, ["*"]) as cache:
        model(ids)
    for name, t in cache.items():
        if not torch.isfinite(t).all():
            return name, t
    raise AssertionError("the model was expected to produce a non-finite value")


def _no_hooks(model) -> bool:
    return all(m.__dict__.get("_hooks") is None and not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize("where", ["blocks.1.ffn.linear1.bias", "blocks.2.self_attn.v_proj.weight"])
def test_the_first_point_in_forward_order_is_named_with_its_counts(where):
    model, ids = _gpt(), _ids()
    with torch.no_grad():
        model.get_parameter(where)[0] = float("nan")
    name, t = _first_nonfinite(model, ids)
    bad, total = int((~torch.isfinite(t)).sum()), t.numel()
    with pytest.raises(NonFiniteError) as err, detect_nonfinite(model):
        model(ids)
    msg = str(err.value)
    assert msg.startswith(f"non-finite value first at {name} (")
    assert re.search(rf"\({bad} of {total} entries are ", msg), msg
    assert _no_hooks(model)

    @click.command()
    @usage_errors
    def forward():  # a command's callback, as every attnlab command wraps its own
        with detect_nonfinite(model):
            model(ids)

    r = CliRunner().invoke(forward, [])  # the CLI turns it into one Error line, exit 2
    assert (r.exit_code, r.output.strip().splitlines()) == (2, [f"Error: {msg}"]), r.output


def test_one_kind_of_value_is_named_plainly_and_a_later_point_is_not_reached():
    model, ids = _gpt(), _ids()

    def three_infs(s):  # scores [B, h, T_q, T_k]
        s = s.clone()
        s.view(-1)[:3] = float("inf")
        return s

    later = {"blocks.2.ffn.hidden": lambda h: h * float("nan")}  # never reached: scores come first
    want = rf"at blocks\.1\.self_attn\.scores \(3 of {2 * 4 * 7 * 7} entries are inf\)$"  # B h T_q T_k
    with patch(model, {"blocks.1.self_attn.scores": three_infs, **later}), detect_nonfinite(model):
        with pytest.raises(NonFiniteError, match=want):
            model(ids)
    assert describe_nonfinite(torch.tensor([1.0, float("nan"), -float("inf")])) == (
        "2 of 3 entries are non-finite: 1 nan, 1 -inf"
    )
    assert describe_nonfinite(torch.arange(3)) is None  # integer tensors cannot be non-finite


def test_finite_models_are_unchanged_and_left_unhooked():
    model, ids = _gpt(), _ids()
    want = model(ids)
    with detect_nonfinite(model):
        got = model(ids)  # explicit attention path while checking
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert _no_hooks(model)
    assert torch.equal(model(ids), want)  # the fused path again, bit for bit


def test_a_model_without_hook_points_is_checked_at_each_submodule_output():
    torch.manual_seed(0)
    rnn = Seq2SeqRNN(RNNConfig(src_vocab=12, tgt_vocab=12, emb=8, hidden=8)).eval()
    with torch.no_grad():
        rnn.encoder.bias_ih_l0[0] = float("nan")
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[1, 6, 7]])
    with pytest.raises(NonFiniteError, match=r"first at encoder \("), detect_nonfinite(rnn):
        rnn(src, tgt)
    assert _no_hooks(rnn)


def test_the_environment_variable_checks_models_built_and_loaded(tmp_path, monkeypatch):
    model, ids = _gpt(), _ids()
    with torch.no_grad():
        model.blocks[0].ffn.linear2.bias[0] = float("nan")
    model.save(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    plain = load_model(tmp_path)
    assert _no_hooks(plain) and torch.isnan(plain(ids)).any()  # unset: NaN propagates, nothing hooked
    name, _ = _first_nonfinite(plain, ids)
    monkeypatch.setenv(ENV, "1")
    with pytest.raises(NonFiniteError, match=rf"first at {re.escape(name)} "):
        load_model(tmp_path)(ids)
    built = build_model("gpt", 31, dict(d_model=16, heads=4, layers=1))
    assert not _no_hooks(built)
    monkeypatch.setenv(ENV, "0")
    assert _no_hooks(build_model("gpt", 31, dict(d_model=16, heads=4, layers=1)))
