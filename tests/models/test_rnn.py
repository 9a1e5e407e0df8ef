"""Seq2SeqRNN (fixed context) and AttentionRNN (Bahdanau / Luong): shapes, padding, the decoding
protocol, save/load, and the bottleneck: the fixed-context decoder sees the source only through c."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnlab.models import load_model
from attnlab.models.rnn import (
    ATTENTIONS,
    AttentionRNN,
    AttentionRNNConfig,
    RNNConfig,
    Seq2SeqRNN,
)
from attnlab.nn import capture

PAD = 0
V_SRC, V_TGT = 11, 13
VARIANTS = [("seq2seq", cell, None) for cell in ("gru", "lstm")] + [
    ("attention", cell, att) for cell in ("gru", "lstm") for att in ATTENTIONS
]


def _model(family: str, cell: str, attention: str | None, layers: int = 2, dtype=torch.float64):
    torch.manual_seed(0)
    if family == "seq2seq":
        cfg = RNNConfig(V_SRC, V_TGT, emb=5, hidden=6, layers=layers, cell=cell)
        model = Seq2SeqRNN(cfg)
    else:
        cfg = AttentionRNNConfig(
            V_SRC, V_TGT, emb=5, hidden=6, layers=layers, cell=cell, attention=attention, attn_dim=4
        )
        model = AttentionRNN(cfg)
    return model.to(dtype).eval()


def _batch():
    # right-padded sources of lengths 5, 2, 4; targets start with BOS=1
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, PAD, PAD, PAD], [3, 3, 4, 5, PAD]])
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 8, 2], [1, 12, 2, 0]])
    return src, tgt_in


@pytest.mark.parametrize("family,cell,attention", VARIANTS)
def test_step_by_step_decoding_equals_teacher_forcing(family, cell, attention):
    model = _model(family, cell, attention)
    src, tgt_in = _batch()
    with torch.no_grad():
        logits = model(src, tgt_in)
        assert logits.shape == (3, 4, V_TGT)
        state = model.start(src)
        stepped = []
        for t in range(tgt_in.shape[1]):
            step_logits, state = model.step(tgt_in[:, t], state)
            stepped.append(step_logits)
    torch.testing.assert_close(torch.stack(stepped, dim=1), logits, rtol=0, atol=1e-10)


@pytest.mark.parametrize("family,cell,attention", VARIANTS)
def test_extra_padding_changes_nothing(family, cell, attention):
    model = _model(family, cell, attention)
    src, tgt_in = _batch()
    wider = torch.cat([src, torch.full((3, 3), PAD)], dim=1)  # [3, 8]
    with torch.no_grad():
        torch.testing.assert_close(model(wider, tgt_in), model(src, tgt_in), rtol=0, atol=1e-12)
        # each row alone, unpadded, gives the same logits as inside the padded batch
        lengths = (src != PAD).sum(1)
        for b in range(3):
            alone = model(src[b : b + 1, : lengths[b]], tgt_in[b : b + 1])
            torch.testing.assert_close(alone, model(src, tgt_in)[b : b + 1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_alignment_rows_sum_to_one_and_skip_padding(attention):
    model = _model("attention", "gru", attention)
    src, tgt_in = _batch()
    with torch.no_grad(), capture(model, ["attention.weights"]) as cache:
        logits = model(src, tgt_in)
    attn = cache["attention.weights"]
    assert attn.shape == (3, 4, 5) and logits.shape == (3, 4, model.config.tgt_vocab)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 4, dtype=attn.dtype), rtol=0, atol=1e-12)
    assert torch.all(attn[1, :, 2:] == 0) and torch.all(attn[2, :, 4:] == 0)
    assert torch.all(attn[0] > 0)  # a real position is never masked


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_step_records_the_alignment_row_the_hook_point_reads(attention):
    """The alignment captured at ``attention.weights`` in a teacher-forced forward equals, row by
    row, the one each decoding step computes on its own."""
    model = _model("attention", "lstm", attention)
    src, tgt_in = _batch()
    with torch.no_grad():
        with capture(model, ["attention.weights"]) as cache:
            model(src, tgt_in)
        attn = cache["attention.weights"]  # [B, T, S]
        state = model.start(src)
        for t in range(4):
            _, state = model.step(tgt_in[:, t], state)
            torch.testing.assert_close(state.weights, attn[:, t], rtol=0, atol=1e-12)


@pytest.mark.parametrize("family,cell,attention", [VARIANTS[1], VARIANTS[2], VARIANTS[7]])
def test_reorder_selects_batch_rows(family, cell, attention):
    model = _model(family, cell, attention)
    src, tgt_in = _batch()
    index = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        state = model.reorder(model.start(src), index)
        logits, state = model.step(tgt_in[index, 0], state)
        logits2, _ = model.step(tgt_in[index, 1], state)
        direct = model(src[index], tgt_in[index, :2])
    torch.testing.assert_close(torch.stack([logits, logits2], 1), direct, rtol=0, atol=1e-12)


@pytest.mark.parametrize("family,cell,attention", VARIANTS)
def test_every_parameter_learns(family, cell, attention):
    model = _model(family, cell, attention, dtype=torch.float32).train()
    src, tgt_in = _batch()
    tgt_out = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0], [12, 2, 0, 0]])
    logits = model(src, tgt_in)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"{name} gets no gradient"


# -- the bottleneck --------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_fixed_context_decoder_reads_only_c(cell):
    model = _model("seq2seq", cell, None)
    src, tgt_in = _batch()
    with torch.no_grad():
        c = model.encode(src)
        h = c[0] if cell == "lstm" else c
        assert h.shape == (2, 3, 6)  # [layers, B, hidden]: the same size for 5 tokens and 2
        torch.testing.assert_close(model.decode(c, tgt_in), model(src, tgt_in), rtol=0, atol=0)
        # swapping c swaps the outputs: the source enters only through c
        swapped = model.decode(model.encode(src[[1, 0, 2]]), tgt_in)
        assert not torch.allclose(swapped[0], model(src, tgt_in)[0])
        torch.testing.assert_close(swapped[0], model(src[1:2, :2], tgt_in[0:1])[0], rtol=0, atol=1e-12)


def test_two_sources_with_equal_c_give_equal_outputs():
    # Saturate the encoder GRU's update gate (z = 1): h_t = h_{t-1} = 0, so every source has c = 0.
    model = _model("seq2seq", "gru", None, layers=1)
    H = model.config.hidden
    with torch.no_grad():
        model.encoder.bias_hh_l0[H : 2 * H] = 1e4  # rows of z in torch's [r, z, n] layout
        a = torch.tensor([[4, 5, 6, 7, 8]])
        b = torch.tensor([[9, 3]])
        tgt_in = torch.tensor([[1, 4, 5]])
        assert torch.equal(model.encode(a), torch.zeros(1, 1, H, dtype=torch.float64))
        torch.testing.assert_close(model(a, tgt_in), model(b, tgt_in), rtol=0, atol=0)
        # the same model with a working update gate does tell them apart
        model.encoder.bias_hh_l0[H : 2 * H] = 0.0
        assert not torch.allclose(model(a, tgt_in), model(b, tgt_in))


# -- save / load and configs -----------------------------------------------------------------


@pytest.mark.parametrize("family,cell,attention", [VARIANTS[0], VARIANTS[1], VARIANTS[3], VARIANTS[6]])
def test_save_load_round_trip(tmp_path, family, cell, attention):
    model = _model(family, cell, attention, dtype=torch.float32)
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m").eval()
    assert type(loaded) is type(model) and loaded.config == model.config
    src, tgt_in = _batch()
    with torch.no_grad():
        assert torch.equal(loaded(src, tgt_in), model(src, tgt_in))
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t), name


def test_parameter_counts_are_exact():
    # GRU layer: 3 (H*in + H*H + 2H); one-layer GRU seq2seq with emb=5, hidden=6, V=11/13
    m = Seq2SeqRNN(RNNConfig(V_SRC, V_TGT, emb=5, hidden=6, layers=1))
    gru = lambda d_in, H: 3 * (H * d_in + H * H + 2 * H)
    expected = 11 * 5 + gru(5, 6) + 13 * 5 + gru(5 + 6, 6) + (6 * 13 + 13)
    assert sum(p.numel() for p in m.parameters()) == expected == 787  # 55 + 234 + 65 + 342 + 91


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(cell="rnn"), r"cell must be one of \['gru', 'lstm'\]"),
        (dict(hidden=0), "hidden must be a positive integer"),
        (dict(dropout=1.0), r"dropout must be a number in \[0, 1\)"),
        (dict(pad_id=11), "pad_id must be an id in both vocabularies"),
    ],
)
def test_bad_configs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RNNConfig(V_SRC, V_TGT, **kwargs)


def test_bad_attention_configs():
    with pytest.raises(ValueError, match="hidden must be even"):
        AttentionRNNConfig(V_SRC, V_TGT, hidden=7)
    with pytest.raises(ValueError, match=r"\battention\b.*'bahdanau'.*, got 'luong'"):
        AttentionRNNConfig(V_SRC, V_TGT, attention="luong")
    with pytest.raises(ValueError, match="needs an AttentionRNNConfig"):
        AttentionRNN(RNNConfig(V_SRC, V_TGT))
    with pytest.raises(dataclasses.FrozenInstanceError):
        RNNConfig(V_SRC, V_TGT).hidden = 3


@pytest.mark.parametrize("family", ["seq2seq", "attention"])
def test_bad_tokens(family):
    model = _model(family, "gru", "bahdanau")
    src, tgt_in = _batch()
    outside = r"src holds token ids outside the vocabulary \[0, 11\): min 4, max 11"
    with pytest.raises(ValueError, match=outside):
        model(torch.tensor([[4, 11]]), tgt_in[:1])
    with pytest.raises(ValueError, match=r"^tgt_in\b.*\[0, 13\).*\bmax 13\b"):
        model(src, torch.full((3, 2), 13))
    with pytest.raises(ValueError, match="must be right-padded"):
        model(torch.tensor([[4, PAD, 5]]), tgt_in[:1])
    with pytest.raises(ValueError, match="empty source"):
        model(torch.tensor([[PAD, PAD]]), tgt_in[:1])
    with pytest.raises(ValueError, match=r"^tgt_in\b.*\bbatch 2\b.*\bsource\b.*\bbatch 3$"):
        model(src, tgt_in[:2])
