"""Activation patching: restoring everything gives the clean logits, nothing the corrupted ones; each
grid cell is the run with that one site restored; sites the two prompts share change nothing; all
heads of a layer restored equal the layer's attention output restored; chunked batches agree."""

from __future__ import annotations

import re

import pytest
import torch

from attnlab.interp import patching
from attnlab.interp.patching import activation_patching, clean_run, logit_metric, restore
from attnlab.models import GPT, GPTConfig
from attnlab.nn import capture, patch


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=31, d_model=16, num_heads=4, num_kv_heads=2, num_layers=3, d_ff=24, max_len=16, norm="rms"
    )
    return GPT(config).double().eval()


@pytest.fixture(scope="module")
def pair() -> tuple[torch.Tensor, torch.Tensor]:
    clean = torch.randint(0, 31, (1, 8), generator=torch.Generator().manual_seed(1))
    corrupt = clean.clone()
    corrupt[0, 2] = (clean[0, 2] + 5) % 31  # one position differs
    corrupt[0, 5] = (clean[0, 5] + 9) % 31
    return clean, corrupt


def test_everything_restored_is_clean_and_nothing_is_corrupt(model, pair):
    clean, corrupt = pair
    cache = clean_run(model, clean, "resid_pre")
    with torch.no_grad():
        want_clean, want_corrupt = model(clean), model(corrupt)
    torch.testing.assert_close(
        restore(model, corrupt, cache, ["blocks.0.resid_pre"]), want_clean, rtol=0, atol=0
    )
    torch.testing.assert_close(restore(model, corrupt, cache, []), want_corrupt, rtol=0, atol=0)
    every_head = [f"blocks.{l}.self_attn.z" for l in range(3)]  # heads alone leave the embeddings corrupt
    assert (restore(model, corrupt, cache, every_head) - want_clean).abs().max() > 1e-6


def test_each_cell_is_its_own_run_and_shared_sites_change_nothing(model, pair):
    clean, corrupt = pair
    metric = logit_metric(3, 11)
    result = activation_patching(model, clean, corrupt, metric)
    with torch.no_grad():
        assert result.clean == pytest.approx(float(metric(model(clean))[0]), abs=1e-12)
        assert result.corrupt == pytest.approx(float(metric(model(corrupt))[0]), abs=1e-12)
    assert result.resid.shape == (3, 8) and result.heads.shape == (3, 4)
    cache = clean_run(model, clean, "resid_pre")
    for layer, pos in ((0, 2), (1, 5), (2, 7)):
        got = metric(restore(model, corrupt, cache, [f"blocks.{layer}.resid_pre"], [pos]))
        assert float(result.resid[layer, pos]) == pytest.approx(float(got[0]), abs=1e-12)
    # layer 0 positions where the prompts agree: the same embeddings, nothing restored
    same = [p for p in range(8) if p not in (2, 5)]
    torch.testing.assert_close(result.resid[0, same], torch.full((6,), result.corrupt, dtype=torch.float64))
    # before position 2 nothing differs at any depth (causal attention)
    torch.testing.assert_close(result.resid[:, :2], torch.full((3, 2), result.corrupt, dtype=torch.float64))
    for layer, head in ((0, 1), (2, 3)):
        z = cache[f"blocks.{layer}.self_attn.z"]

        def one_head(t, z=z, head=head):
            t = t.clone()
            t[:, :, head] = z[:, :, head]
            return t

        with torch.no_grad(), patch(model, {f"blocks.{layer}.self_attn.z": one_head}):
            got = metric(model(corrupt))
        assert float(result.heads[layer, head]) == pytest.approx(float(got[0]), abs=1e-12)
    recovered = result.recovered(result.resid)  # 0 where nothing changed, 1 where the clean metric is back
    torch.testing.assert_close(recovered[:, :2], torch.zeros(3, 2, dtype=torch.float64))
    torch.testing.assert_close(recovered * (result.clean - result.corrupt) + result.corrupt, result.resid)


def test_all_heads_of_a_layer_equal_its_attention_output(model, pair):
    clean, corrupt = pair
    with torch.no_grad(), capture(model, ["blocks.1.self_attn.out", "blocks.1.self_attn.z"]) as cache:
        model(clean)
    by_heads = restore(model, corrupt, dict(cache), ["blocks.1.self_attn.z"])
    by_output = restore(model, corrupt, dict(cache), ["blocks.1.self_attn.out"])
    torch.testing.assert_close(by_heads, by_output, rtol=0, atol=1e-12)


@pytest.mark.parametrize("point", ["resid_mid", "resid_post"])
def test_chunked_batches_and_other_points_agree(model, pair, monkeypatch, point):
    clean, corrupt = pair
    metric = logit_metric(3)
    whole = activation_patching(model, clean, corrupt, metric, point=point)
    monkeypatch.setattr(patching, "ROW_BUDGET", 8 * 31 * 3)  # three rows per forward
    chunked = activation_patching(model, clean, corrupt, metric, point=point)
    torch.testing.assert_close(chunked.resid, whole.resid, rtol=0, atol=1e-12)
    torch.testing.assert_close(chunked.heads, whole.heads, rtol=0, atol=1e-12)
    if point == "resid_post":  # the last layer's output at the last position decides the last logits
        assert float(whole.resid[2, 7]) == pytest.approx(whole.clean, abs=1e-12)
    data = whole.to_json()
    assert data["point"] == point and len(data["resid_recovered"]) == 3 and len(data["heads"][0]) == 4


def test_bad_pairs_are_named(model, pair):
    clean, _ = pair
    with pytest.raises(ValueError, match=r"\bclean has 8 tokens\b.*\bcorrupt has 7\b"):
        activation_patching(model, clean, clean[:, :7], logit_metric(1))
    with pytest.raises(ValueError, match=r"^point\b.*'resid_post'\], got 'resid'"):
        activation_patching(model, clean, clean, logit_metric(1), point="resid")
    result = activation_patching(model, clean, clean, logit_metric(1))
    with pytest.raises(ValueError, match=rf"\bsame metric\b.*{re.escape(f'({result.clean:.4g})')}"):
        result.recovered(result.resid)
    tied = result.to_json()  # the same keys as ever (a consumer indexing them got a KeyError), None
    assert tied["resid_recovered"] is None and tied["heads_recovered"] is None
    assert tied["tie"].startswith("clean and corrupt give the same metric")


def test_the_json_has_the_same_keys_whether_or_not_the_runs_tie(model, pair):
    clean, corrupt = pair
    tied = activation_patching(model, clean, clean, logit_metric(1)).to_json()
    apart = activation_patching(model, clean, corrupt, logit_metric(3, 11)).to_json()
    assert list(tied) == list(apart)
    assert (
        apart["tie"] is None and len(apart["resid_recovered"]) == 3 and len(apart["heads_recovered"][0]) == 4
    )


def test_patching_warns_when_clean_and_corrupt_nearly_agree():
    from attnlab.commands.patch import small_gap_warning

    said = small_gap_warning(0.133, 0.118, "logit(' the')")
    assert said.startswith("clean and corrupt differ by only 0.015 in logit(' the')")
    assert small_gap_warning(2.5, 0.3, "m") is None and small_gap_warning(1.0, 1.0, "m") is None  # (a tie
    # is reported in the table as not normalised)


def test_logit_metric_refuses_ids_outside_the_vocabulary(model, pair):
    """As logit_attribution does, with its message: -1 is not the last token, 999 not an IndexError
    (trial B, #3); an id in a 0-d tensor is that id."""
    clean, corrupt = pair
    for bad in (-1, 31, 999):
        with pytest.raises(ValueError, match=rf"^target\b.*\b0\.\.30\b.* {bad}$"):
            activation_patching(model, clean, corrupt, logit_metric(bad))
    with pytest.raises(ValueError, match=r"^wrong\b.*\b0\.\.30\b.* -3$"):
        activation_patching(model, clean, corrupt, logit_metric(3, -3))
    with pytest.raises(ValueError, match=r"^target\b.*\binteger\b.* 3\.0$"):
        logit_metric(3.0)
    with pytest.raises(ValueError, match=r"^position 8\b.*\b8 tokens\b"):
        activation_patching(model, clean, corrupt, logit_metric(3, position=8))
    logits = torch.randn(2, 8, 31)
    assert torch.equal(logit_metric(torch.tensor(3), 4)(logits), logits[:, -1, 3] - logits[:, -1, 4])
