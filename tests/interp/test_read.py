"""attnlab.interp.read: every stack's attention read at its hook points equals what each layer
computes on its own explicit path; stacks, layer names, cross and causal; refusals."""

from __future__ import annotations

import copy

import pytest
import torch

from attnlab.interp.prune import prune_heads
from attnlab.interp.read import attention, attention_maps, weight_points
from attnlab.models import (
    GPT,
    AttentionRNN,
    AttentionRNNConfig,
    GPTConfig,
    RNNConfig,
    Seq2SeqRNN,
    Transformer,
    TransformerConfig,
)
from attnlab.nn import capture


def _gpt(**kw) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=17, d_model=16, num_heads=4, num_layers=3, d_ff=24, max_len=16, **kw)
    return GPT(cfg).double().eval()


@pytest.mark.parametrize("kw", [{}, {"positions": "alibi"}, {"window": 3, "num_kv_heads": 2}])
def test_gpt_attention_equals_each_layers_explicit_path(kw):
    model = _gpt(**kw)
    ids = torch.randint(0, 17, (2, 9), generator=torch.Generator().manual_seed(1))
    got = attention(model, ids)  # [L, B, h, T, T]
    assert got.shape == (3, 2, 4, 9, 9)
    with torch.no_grad(), capture(model, ["blocks.*.self_attn.x_q"]) as cache:
        model(ids)
    for i, block in enumerate(model.blocks):
        _, want = block.self_attn(cache[f"blocks.{i}.self_attn.x_q"], is_causal=True, need_weights=True)
        torch.testing.assert_close(got[i], want, rtol=0, atol=1e-12)
    (maps,) = attention_maps(model, ids)
    assert maps.stack == "blocks.*.self_attn" and maps.layers == ["blocks.0", "blocks.1", "blocks.2"]
    assert maps.causal and not maps.cross


def test_transformer_stacks_are_named_by_module_path():
    torch.manual_seed(1)
    cfg = TransformerConfig(src_vocab=20, tgt_vocab=20, d_model=16, num_heads=2, d_ff=32,
                            num_encoder_layers=2, num_decoder_layers=1)  # fmt: skip
    model = Transformer(cfg).eval()
    src, tgt = torch.tensor([[5, 6, 7, 8, 0]]), torch.tensor([[1, 9, 4]])
    maps = attention_maps(model, src, tgt)
    assert [(m.stack, m.layers, tuple(m.weights.shape), m.cross, m.causal) for m in maps] == [
        (
            "encoder.layers.*.self_attn",
            ["encoder.layers.0", "encoder.layers.1"],
            (2, 1, 2, 5, 5),
            False,
            False,
        ),
        ("decoder.layers.*.self_attn", ["decoder.layers.0"], (1, 1, 2, 3, 3), False, True),
        ("decoder.layers.*.cross_attn", ["decoder.layers.0"], (1, 1, 2, 3, 5), True, False),
    ]
    assert float(maps[2].weights[..., 4].abs().max()) == 0.0  # the padded source key
    cross = attention(model, src, tgt, stack="decoder.layers.*.cross_attn")
    torch.testing.assert_close(cross.sum(-1), torch.ones(1, 1, 2, 3), rtol=0, atol=1e-6)
    several = (
        "Transformer has 3 attention stacks (encoder.layers.*.self_attn, decoder.layers.*.self_attn, "
        "decoder.layers.*.cross_attn): pass stack= the one to read"
    )
    with pytest.raises(ValueError) as err:  # nothing passed: say there are several, list them
        attention(model, src, tgt)
    assert str(err.value) == several
    with pytest.raises(
        ValueError,
        match=r"^stack\b.*\['encoder\.layers\.\*\.self_attn'.*, got 'decoder\.layers\.\*\.self_attention'",
    ):
        attention(model, src, tgt, stack="decoder.layers.*.self_attention")


def test_an_encoder_decoder_without_its_target_names_the_missing_argument():
    torch.manual_seed(1)
    cfg = TransformerConfig(src_vocab=20, tgt_vocab=20, d_model=16, num_heads=2, d_ff=32,
                            num_encoder_layers=1, num_decoder_layers=1)  # fmt: skip
    src = torch.tensor([[5, 6, 7, 8]])
    rnn = AttentionRNN(AttentionRNNConfig(src_vocab=12, tgt_vocab=12, emb=4, hidden=8)).eval()
    for model, stack in ((Transformer(cfg).eval(), "decoder.layers.*.cross_attn"), (rnn, None)):
        name = type(model).__name__
        with pytest.raises(ValueError) as err:
            attention(model, src, stack=stack)
        assert str(err.value) == f"{name}.forward needs tgt_in too: call attention(model, src, tgt_in)"
        with pytest.raises(ValueError, match=f"{name}.forward needs tgt_in too"):
            attention_maps(model, src)


def test_an_rnn_alignment_is_one_layer_of_one_head():
    torch.manual_seed(2)
    model = AttentionRNN(AttentionRNNConfig(src_vocab=12, tgt_vocab=12, emb=4, hidden=8)).eval()
    src, tgt = torch.tensor([[5, 6, 7, 2], [5, 6, 0, 0]]), torch.tensor([[1, 8, 9], [1, 8, 9]])
    (maps,) = attention_maps(model, src, tgt)
    assert maps.stack == "attention" and maps.layers == ["attention"] and maps.cross
    assert maps.weights.shape == (1, 2, 1, 3, 4) and float(maps.weights[0, 1, ..., 2:].abs().max()) == 0.0


def test_refusals_name_what_is_wrong():
    with pytest.raises(ValueError, match=r"^Seq2SeqRNN\b.*\bno attention\b"):
        weight_points(Seq2SeqRNN(RNNConfig(src_vocab=6, tgt_vocab=6, emb=4, hidden=8)))
    with pytest.raises(ValueError, match="has no attention weights"):
        weight_points(_gpt(attention="ssm", positions="none"))
    pruned = prune_heads(copy.deepcopy(_gpt()), [(0, 1), (2, 0), (2, 3)])
    with pytest.raises(ValueError, match=r"\bblocks\.\*\.self_attn\b.*\[2, 3, 4\]"):
        attention(pruned, torch.tensor([[1, 2, 3]]))
