"""Every model's forward returns one thing and takes no weight flags: the attention weights and the
hidden states are hook points, read with capture (issue 23's one way to read a model)."""

from __future__ import annotations

import inspect

import pytest
import torch

from attnlab.models import (
    GPT,
    AttentionRNN,
    AttentionRNNConfig,
    BertConfig,
    BertEncoder,
    GPTConfig,
    RNNConfig,
    Seq2SeqRNN,
    Transformer,
    TransformerConfig,
)
from attnlab.models.bert import BertOutput
from attnlab.nn import BlockConfig, Decoder, DecoderLayer, Encoder, EncoderLayer

FLAGS = {"return_attention", "return_hidden", "need_weights", "output_attentions", "output_hidden_states"}


def _models():
    torch.manual_seed(0)
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    yield GPT(GPTConfig(vocab_size=12, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=8)), (src,)
    t = TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1,
                          num_decoder_layers=1)  # fmt: skip
    yield Transformer(t), (src, tgt)
    for attention in ("bahdanau", "luong-dot"):
        cfg = AttentionRNNConfig(src_vocab=12, tgt_vocab=12, emb=4, hidden=8, attention=attention)
        yield AttentionRNN(cfg), (src, tgt)
    yield Seq2SeqRNN(RNNConfig(src_vocab=12, tgt_vocab=12, emb=4, hidden=8)), (src, tgt)
    yield (
        BertEncoder(BertConfig(vocab_size=12, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=8)),
        (src,),
    )
    block = BlockConfig(8, 2, 16)
    x = torch.randn(1, 4, 8)
    yield EncoderLayer(block), (x,)
    yield DecoderLayer(block), (x, x)
    yield Encoder(2, block), (x,)
    yield Decoder(2, block), (x, x)


@pytest.mark.parametrize("model, inputs", list(_models()), ids=lambda m: type(m).__name__)
def test_forward_returns_one_thing_and_takes_no_weight_flags(model, inputs):
    assert not FLAGS & set(inspect.signature(model.forward).parameters)
    with torch.no_grad():
        out = model.eval()(*inputs)
    if isinstance(model, BertEncoder):
        assert isinstance(out, BertOutput) and out.last_hidden_state.shape == (1, 4, 8)
        assert out.pooler_output.shape == (1, 8)
    else:
        assert isinstance(out, torch.Tensor) and out.shape[:2] == inputs[-1].shape[:2]
