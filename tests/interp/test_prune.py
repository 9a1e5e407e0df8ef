"""Pruned heads are gone from the weights and the pruned model equals the masked one; Michel et
al.'s importance equals the gradient of an explicit head mask; ablation patches z and touches no weight."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.func import functional_call

from attnlab.audit.build import count_by_group
from attnlab.interp.ablation import ablate_heads, attention_layers, head_importance
from attnlab.interp.prune import mask_heads, params_after, prune_heads, pruning_curve, removal_order
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.nn import capture, patch


@pytest.fixture
def gpt():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=23, d_model=24, num_heads=4, num_layers=3, d_ff=48, max_len=80)).eval()
    with torch.no_grad():  # non-zero biases, so a bug that drops or shifts one shows
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def _ids(t: int = 12, b: int = 3) -> torch.Tensor:
    return torch.randint(0, 23, (b, t), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("t", [12, 70])  # 70: B*T >= 64 takes the fused Q/K/V projection
def test_pruned_equals_masked(gpt, t):
    heads = [(0, 1), (0, 3), (1, 0), (2, 2), (2, 1), (2, 0)]
    ids = _ids(t)
    with torch.no_grad(), ablate_heads(gpt, heads):
        masked = gpt(ids)
    pruned = prune_heads(copy.deepcopy(gpt), heads)
    with torch.no_grad(), capture(pruned, ["blocks.*.self_attn.weights"]) as cache:
        got = pruned(ids)
    torch.testing.assert_close(got, masked, rtol=0, atol=2e-6)
    assert [cache[f"blocks.{i}.self_attn.weights"].shape[1] for i in range(3)] == [2, 3, 1]
    assert [a.num_heads for _, a in attention_layers(pruned)] == [2, 3, 1]
    # the weights are gone: 4 d d_k weights + 3 d_k biases per head (audit's attention group)
    d, d_k = 24, 6
    saved = count_by_group(gpt)["attention"] - count_by_group(pruned)["attention"]
    assert saved == len(heads) * (4 * d * d_k + 3 * d_k)
    assert attention_layers(pruned)[2][1].q_proj.weight.shape == (d_k, d)


def _ablated_through_w_o(model, heads, means=None):
    """The old way, an oracle here: W^O_h := 0 (and b^O += E[z_h] W^O_h for mean ablation), on a copy."""
    cut = copy.deepcopy(model)
    with torch.no_grad():
        for layer, head in heads:
            attn = attention_layers(cut)[layer][1]
            block = attn.out_proj.weight[:, head * attn.d_k : (head + 1) * attn.d_k]  # [d_model, d_k]
            if means is not None:
                attn.out_proj.bias += block @ means[(layer, head)]
            block.zero_()
    return cut


def test_ablation_patches_z_equals_zeroing_w_o_and_touches_no_weight(gpt):
    """Patching z_h equals the former overwrite of W^O_h on the same weights, zero and mean ablation,
    and the weights are the same inside the block and after it."""
    before = {k: v.clone() for k, v in gpt.state_dict().items()}
    ids, heads = _ids(9), [(1, 2), (0, 0), (1, 3)]
    means = {h: torch.randn(6, generator=torch.Generator().manual_seed(i)) for i, h in enumerate(heads)}
    with torch.no_grad():
        for m in (None, means):
            with ablate_heads(gpt, heads, means=m):
                got = gpt(ids)
                assert all(torch.equal(v, before[k]) for k, v in gpt.state_dict().items())
            torch.testing.assert_close(got, _ablated_through_w_o(gpt, heads, m)(ids), rtol=0, atol=1e-6)
            assert (got - gpt(ids)).abs().max() > 1e-4  # the heads mattered; the patch is gone
    for k, v in gpt.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_importance_is_the_gradient_of_an_explicit_head_mask(gpt):
    ids = _ids(10)

    def loss_fn(model, batch):
        logits = model(batch[:, :-1])
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:])

    got = head_importance(gpt, loss_fn, [ids[:2], ids[2:]])  # [L, h]
    # oracle: W^O_h scaled by a mask xi [L, h] with requires_grad, through torch.func.functional_call
    want = torch.zeros(3, 4, dtype=torch.float64)
    for batch in (ids[:2], ids[2:]):
        xi = torch.ones(3, 4, requires_grad=True)
        params = dict(gpt.named_parameters())
        for layer in range(3):
            name = f"blocks.{layer}.self_attn.out_proj.weight"
            params[name] = params[name] * xi[layer].repeat_interleave(6)[None, :]  # [d, h d_k]
        logits = functional_call(gpt, params, (batch[:, :-1],))
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:])
        (g,) = torch.autograd.grad(loss, xi)
        want += g.double().abs()
    want /= want.norm(dim=1, keepdim=True)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_removal_order_keeps_a_head_per_layer_and_the_curve_counts_params(gpt):
    importance = torch.tensor([[0.1, 0.9, 0.2, 0.3], [0.5, 0.05, 0.6, 0.7], [0.01, 0.02, 0.03, 0.04]])
    order = removal_order(importance)
    assert order[:3] == [(2, 0), (2, 1), (2, 2)] and (2, 3) not in order and len(order) == 9
    assert len(removal_order(importance, random_seed=0)) == 9
    ids = _ids(12)
    rows = pruning_curve(gpt, order, lambda m: {"logits": m(ids)})
    assert [r["removed"] for r in rows] == [0, 1, 2, 4, 5, 6, 7, 8, 9, 9]
    assert rows[-1]["fraction"] == 0.9 and rows[-1]["share"] == 9 / 12  # what was removed, not asked
    assert rows[3]["heads"] == ["2.0", "2.1", "2.2", f"{order[3][0]}.{order[3][1]}"]
    per_head = 4 * 24 * 6 + 3 * 6
    assert [rows[0]["params"] - r["params"] for r in rows] == [per_head * r["removed"] for r in rows]
    for r in rows:  # each row's metric ran on the model with those heads removed (masked: the same outputs)
        pruned = prune_heads(copy.deepcopy(gpt), order[: r["removed"]])
        torch.testing.assert_close(r["logits"], pruned(ids), rtol=0, atol=2e-6)
        assert r["params"] == sum(p.numel() for p in pruned.parameters())
    assert all(m._hooks is None for m in gpt.modules() if hasattr(m, "_at"))  # the masks are gone


def test_masks_and_parameter_counts_under_gqa():
    """Under GQA heads are masked, not cut; params_after counts a key/value head once every query
    head it serves is gone (2 query heads per key/value head here)."""
    torch.manual_seed(1)
    model = GPT(
        GPTConfig(vocab_size=23, d_model=24, num_heads=4, num_kv_heads=2, num_layers=2, d_ff=48, max_len=32)
    ).eval()
    ids = _ids(10)
    with torch.no_grad(), mask_heads(model, [(1, 0), (1, 1)]):
        masked = model(ids)
    with torch.no_grad(), ablate_heads(model, [(1, 0), (1, 1)]):
        torch.testing.assert_close(masked, model(ids), rtol=0, atol=1e-6)
    total, d, d_k = sum(p.numel() for p in model.parameters()), 24, 6
    q_head = 2 * d * d_k + d_k  # W^Q rows, W^O columns, the query bias
    assert params_after(model, [(1, 0)]) == total - q_head  # its key/value head still serves 1.1
    assert params_after(model, [(1, 0), (1, 1)]) == total - 2 * q_head - (2 * d * d_k + 2 * d_k)
    with pytest.raises(ValueError, match="uses GQA"):
        prune_heads(model, [(1, 0)])


def test_bad_input(gpt):
    with pytest.raises(ValueError, match=r"\b4 heads of layer 1\b"):
        prune_heads(gpt, [(1, 0), (1, 1), (1, 2), (1, 3)])
    with pytest.raises(ValueError, match=r"\blayer 3\b.*\b3 attention layers"):
        prune_heads(gpt, [(3, 0)])
    with pytest.raises(ValueError, match=r"\bhead 4\b"):
        with ablate_heads(gpt, [(0, 4)]):
            pass


def test_minilm_pruned_equals_masked_and_agreement_is_one_unpruned():
    from attnlab.interp.minilm_pruning import HELD_OUT, _encode, agreement
    from attnlab.models.pretrained import load_pretrained

    model, tokenizer = load_pretrained("minilm")
    heads = [(layer, head) for layer in range(6) for head in range(0, 12, 3)]  # 24 of the 72
    with torch.no_grad():
        reference = _encode(model, tokenizer, HELD_OUT)  # [N, 384]
        with ablate_heads(model, heads):
            masked = _encode(model, tokenizer, HELD_OUT)
    score = agreement(reference)
    assert score(model, tokenizer) == {"mean_cosine": pytest.approx(1.0, abs=1e-6), "top1_agreement": 1.0}
    pruned = prune_heads(copy.deepcopy(model), heads)
    with torch.no_grad():
        got = _encode(pruned, tokenizer, HELD_OUT)
    torch.testing.assert_close(got, masked, rtol=0, atol=1e-5)
    assert count_by_group(model)["attention"] - count_by_group(pruned)["attention"] == 24 * (
        4 * 384 * 32 + 3 * 32
    )


def test_prune_cli_refuses_other_models():
    from click.testing import CliRunner

    from attnlab.cli import cli

    result = CliRunner().invoke(cli, ["prune", "gpt2"])
    assert result.exit_code == 2 and "'gpt2'" in result.output
    result = CliRunner().invoke(cli, ["prune", "minilm", "--text", "a b c"])
    assert result.exit_code == 2 and "--text" in result.output


def test_mean_ablation_writes_the_constant_through_w_o(gpt):
    ids = _ids(9)
    mean = torch.randn(6, generator=torch.Generator().manual_seed(3))
    attn = gpt.blocks[0].self_attn
    with torch.no_grad():
        with ablate_heads(gpt, [(0, 2)]):
            zeroed_out = attn(gpt.blocks[0].norm1(gpt.tok_embed(ids)), is_causal=True)[0]
        with ablate_heads(gpt, [(0, 2)], means={(0, 2): mean}):
            mean_out = attn(gpt.blocks[0].norm1(gpt.tok_embed(ids)), is_causal=True)[0]
        w_o = attn.out_proj.weight[:, 12:18]  # head 2's block [d_model, d_k]
    torch.testing.assert_close(mean_out, zeroed_out + w_o @ mean, rtol=0, atol=1e-6)


def test_the_prune_table_shows_each_count_once_with_its_real_share(text_run):
    import re

    from click.testing import CliRunner

    from attnlab.cli import cli

    r = CliRunner().invoke(cli, ["prune", str(text_run), "--length", "4", "--batch", "2"])
    assert r.exit_code == 0, r.output
    counts = [line.split()[0] for line in r.output.splitlines() if re.match(r"^ +\d+ \( *\d+%\)", line)]
    assert counts == ["0", "1", "2"]  # 2 layers x 2 heads, one kept per layer: each count once
    assert " 1 ( 25%)" in r.output and " 2 ( 50%)" in r.output and "(10%)" not in r.output
    last = r.output.strip().splitlines()[-1]
    assert (
        last.startswith("removed by importance, first to last: ")
        and len(last.split(": ")[1].split(", ")) == 2
    )


# ------------------------------------------------- a pruned model keeps its heads' names (trial B, #2)
def test_pruned_heads_keep_their_original_numbers(gpt, tmp_path):
    from attnlab.interp.attribution import logit_attribution

    ids = _ids(9, 1)
    pruned = prune_heads(copy.deepcopy(gpt), [(0, 1)])
    assert attention_layers(pruned)[0][1].kept_heads == (0, 2, 3)
    labels = logit_attribution(pruned, ids, 3, 4).labels
    assert labels[:4] == ["embed", "head 0.0", "head 0.2", "head 0.3"]  # not renamed to 0.1, 0.2
    # indices stay the unpruned model's: pruning 0.3 next equals masking 0.1 and 0.3 of the original
    prune_heads(pruned, ["0.3"])
    assert attention_layers(pruned)[0][1].kept_heads == (0, 2)
    with torch.no_grad(), ablate_heads(gpt, [(0, 1), (0, 3)]):
        torch.testing.assert_close(pruned(ids), gpt(ids), rtol=0, atol=2e-6)
    with torch.no_grad(), ablate_heads(pruned, [(0, 2)]), ablate_heads(gpt, [(0, 1), (0, 2), (0, 3)]):
        torch.testing.assert_close(pruned(ids), gpt(ids), rtol=0, atol=2e-6)  # 0.2, not position 2
    with pytest.raises(ValueError, match=r"\bhead 0\.1\b.*\[0, 2\]"):
        with ablate_heads(pruned, [(0, 1)]):
            pass
    assert params_after(pruned, [(0, 2)]) == sum(p.numel() for p in pruned.parameters()) - (
        4 * 24 * 6 + 3 * 6
    )


def test_tools_that_need_every_head_refuse_a_pruned_model_naming_the_layer(gpt, tmp_path):
    from attnlab.interp.attribution import logit_attribution
    from attnlab.interp.composition import composition_scores
    from attnlab.interp.patching import activation_patching, logit_metric

    pruned = prune_heads(copy.deepcopy(gpt), [(1, 2)])
    ids = _ids(9, 1)
    grid = "lays heads out as a layer x head grid, but prune_heads removed heads of blocks.1.self_attn"
    kept = r"\(it keeps heads \[0, 1, 3\] of 4\)"
    with pytest.raises(ValueError, match=f"^composition {grid} {kept}"):
        composition_scores(pruned, "K")
    with pytest.raises(ValueError, match=f"^activation_patching {grid} {kept}"):
        activation_patching(pruned, ids, ids.flip(1), logit_metric(3))
    with pytest.raises(ValueError, match=f"^head_importance {grid} {kept}"):
        head_importance(pruned, lambda m, b: m(b).sum(), [ids])
    with pytest.raises(ValueError, match=r"\blayer 1\b.*\[0, 1, 3\]"):
        logit_attribution(pruned, ids, 3, 4).heads()
    assert logit_attribution(gpt, ids, 3, 4).heads().shape == (3, 4, 1)  # unpruned: the whole grid


def test_saving_a_pruned_model_is_refused_and_writes_nothing(gpt, tmp_path):
    from attnlab.models import load

    pruned = prune_heads(copy.deepcopy(gpt), [(0, 1), (2, 0)])
    removed = r"blocks\.0\.self_attn, blocks\.2\.self_attn"  # the layers config.json cannot describe
    with pytest.raises(ValueError, match=removed):
        pruned.save(tmp_path / "pruned")
    assert not (tmp_path / "pruned").exists()
    gpt.save(tmp_path / "whole")  # the unpruned model saves and loads back as before
    assert load(tmp_path / "whole").model.blocks[0].self_attn.kept_heads is None


@pytest.mark.parametrize(
    "head, message",
    [
        ((0.0, 1), r"head \(0.0, 1\): the layer must be an integer, got 0.0"),
        ((True, 1), r"head \(True, 1\): the layer must be an integer, got True"),
        ((0, -1), r"head \(0, -1\): layers and heads count from 0 \(no negative indices\)"),
        ("0:1", r"head '0:1' is not a head: write 'layer.head' \(e.g. '0.1'\) or a pair \(0, 1\)"),
        ((0, 1, 2), r"head must be a pair \(layer, head\) or 'layer.head', got \(0, 1, 2\)"),
    ],
)
def test_head_indices_in_other_forms_are_named(gpt, head, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        with ablate_heads(gpt, [head]):
            pass


def test_heads_as_strings_numpy_and_tensor_integers_are_the_same_heads(gpt):
    import numpy as np

    ids = _ids(9)
    with torch.no_grad():
        with ablate_heads(gpt, [(1, 2)]):
            want = gpt(ids)
        for head in ("1.2", (np.int64(1), torch.tensor(2))):
            with ablate_heads(gpt, [head]):
                assert torch.equal(gpt(ids), want)


# ------------------------------------ a Transformer's heads are numbered within one stack (trial B, #29)
def test_a_transformer_needs_a_stack_and_numbers_layers_within_it():
    from attnlab.interp.ablation import attention_stacks
    from attnlab.models.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab=20, tgt_vocab=20, d_model=16, num_heads=2, d_ff=32,
                            num_encoder_layers=2, num_decoder_layers=2)  # fmt: skip
    model = Transformer(cfg).eval()
    assert {s: [n for n, _ in layers] for s, layers in attention_stacks(model).items()} == {
        "encoder.layers.*.self_attn": ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"],
        "decoder.layers.*.self_attn": ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"],
        "decoder.layers.*.cross_attn": ["decoder.layers.0.cross_attn", "decoder.layers.1.cross_attn"],
    }
    with pytest.raises(ValueError, match=r"\b3 attention stacks\b.*encoder\.layers\.\*\.self_attn"):
        with ablate_heads(model, [(2, 0)]):
            pass
    src, tgt = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[1, 9, 4]])
    stack = "decoder.layers.*.self_attn"

    def zero_head_0(z):  # z [B, T, h, d_k]
        z = z.clone()
        z[:, :, 0] = 0.0
        return z

    with torch.no_grad():
        with ablate_heads(model, [(1, 0)], stack=stack):  # `attnlab heads` calls it decoder head 1.0
            got = model(src, tgt)
        with patch(model, {"decoder.layers.1.self_attn.z": zero_head_0}):
            want = model(src, tgt)
        assert torch.equal(got, want) and not torch.equal(got, model(src, tgt))
    with pytest.raises(ValueError, match=r"\blayer 2\b.*\b2 attention layers"):
        with ablate_heads(model, [(2, 0)], stack=stack):
            pass
    with pytest.raises(ValueError, match="'decoder.self_attn'"):
        prune_heads(model, [(0, 0)], stack="decoder.self_attn")
    pruned = prune_heads(copy.deepcopy(model), [(1, 1)], stack="decoder.layers.*.cross_attn")
    assert (
        pruned.decoder.layers[1].cross_attn.kept_heads == (0,)
        and pruned.decoder.layers[1].self_attn.kept_heads is None
    )


# ---------------------------------------------- prune_decoder on what load returns (trial B, #10)
def _loaded(model, tokenizer=None, source="folder"):
    from attnlab.models.load import Loaded

    return Loaded(model.eval(), tokenizer, source, "saved", source)


def test_prune_decoder_refuses_other_models_and_text_without_a_tokenizer(gpt):
    from attnlab.interp.prune import prune_decoder
    from attnlab.models.bert import BertConfig, BertEncoder
    from attnlab.models.transformer import Transformer, TransformerConfig

    bert = BertEncoder(BertConfig(vocab_size=30, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16))
    with pytest.raises(ValueError, match=r"\bbert\b.*\(BertEncoder\).*attnlab\.interp\.minilm_pruning"):
        prune_decoder(_loaded(bert))
    cfg = TransformerConfig(src_vocab=20, tgt_vocab=20, d_model=16, num_heads=2, d_ff=32)
    with pytest.raises(
        ValueError,
        match=r"\btransformer model \(Transformer\)",
    ):
        prune_decoder(_loaded(Transformer(cfg)))
    with pytest.raises(ValueError, match=r"tokenizer\.json"):
        prune_decoder(_loaded(gpt), text="the cat sat on the mat " * 10)


def test_prune_decoder_default_length_fits_a_small_vocabulary(tmp_path):
    from click.testing import CliRunner

    from attnlab.cli import cli
    from attnlab.interp.prune import prune_decoder

    torch.manual_seed(0)
    small = GPT(GPTConfig(vocab_size=15, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=256))
    result = prune_decoder(_loaded(small), batch=2)
    assert "probes of L = 14" in result["judged_on"]  # 14 ids besides BOS, not 20
    with pytest.raises(
        ValueError,
        match=r"\blength 15\b.*\b14 \(15 ids\)",
    ):
        prune_decoder(_loaded(small), length=15, batch=2)
    small.save(tmp_path / "small")
    r = CliRunner().invoke(cli, ["prune", str(tmp_path / "small"), "--batch", "2"])
    assert r.exit_code == 0 and "probes of L = 14" in r.output, r.output
