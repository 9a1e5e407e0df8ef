"""Each family declares what callers need to know of it (decoder or encoder, its self-attention
stack and the points there, its logits, how its ids read as text): attnlab.models.capabilities reads
the declarations, so no caller asks a model's family."""

from __future__ import annotations

import pytest
import torch
from torch import nn

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
from attnlab.models import capabilities as caps
from attnlab.models.registry import FAMILIES, decoders, encoders
from attnlab.nn.hooks import capture


def _models() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {
        "gpt": GPT(GPTConfig(19, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=12)),
        "bert": BertEncoder(BertConfig(19, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=12)),
        "transformer": Transformer(TransformerConfig(19, 19, d_model=16, num_heads=2, d_ff=32, max_len=12)),
        "seq2seq-rnn": Seq2SeqRNN(RNNConfig(19, 19)),
        "attention-rnn": AttentionRNN(AttentionRNNConfig(19, 19)),
    }


def test_each_family_is_a_decoder_an_encoder_or_neither_and_the_registry_lists_them():
    models = _models()
    assert [k for k, m in models.items() if caps.is_decoder(m)] == ["gpt"] == list(decoders())
    assert [k for k, m in models.items() if caps.is_encoder(m)] == ["bert"] == list(encoders())
    assert {cls.kind for cls in FAMILIES} == set(models)
    assert not caps.is_decoder(nn.Linear(2, 2)) and caps.stack(nn.Linear(2, 2)) is None
    assert [caps.stack(m) for m in models.values()] == ["blocks", "layers", None, None, None]


def test_every_stack_point_a_family_declares_is_one_its_hook_points_have():
    for m in _models().values():
        points = caps.attention_points(m)
        if caps.stack(m) is None:
            assert points == {}
            continue
        assert points[caps.layer_point(m, "weights")] == "[B, h, T_q, T_k]"
        assert points[caps.layer_point(m, "z")] == "[B, T_q, h, d_k]"
        assert points[caps.layer_point(m, "resid_post")] == "[B, T, d_model]"
        layers = m.config.num_layers
        every = m.hook_points()
        assert sum(p.format(layer=i) in every for p in points for i in range(layers)) == len(points) * layers


def test_a_stack_point_captures_the_weights_of_each_layer():
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    for kind in ("gpt", "bert"):
        m = _models()[kind].eval()
        names = [caps.layer_point(m, "weights", i) for i in range(2)]
        with capture(m, names) as cache:
            m(ids)
        assert [tuple(cache[n].shape) for n in names] == [(1, 2, 5, 5)] * 2
        rows = cache[names[0]].sum(-1)  # each query's weights sum to 1
        assert torch.allclose(rows, torch.ones_like(rows))
        upper = cache[names[0]][0, 0].triu(1).abs().max()
        assert (upper == 0) == caps.is_decoder(m)  # causal: no weight above the diagonal


def test_the_views_logits_and_token_texts_follow_the_declarations():
    models = _models()
    assert caps.attention_view(models["gpt"]) == ("decoder causal self-attention", "causal")
    assert caps.attention_view(models["bert"]) == ("encoder self-attention", "self")
    assert caps.attention_view(models["transformer"]) is None
    ids = torch.tensor([[1, 2, 3]])
    assert caps.logits_of(models["gpt"], models["gpt"](ids)).shape == (1, 3, 19)
    with pytest.raises(ValueError, match="BertEncoder"):
        caps.logits_of(models["bert"], models["bert"](ids))
    with pytest.raises(ValueError, match="point 'weights'"):
        caps.layer_point(models["transformer"], "weights")

    class Pieces:  # a tokenizer with a backend: BERT shows the pieces, a GPT decodes each id
        backend = type("B", (), {"id_to_token": staticmethod(lambda i: f"##{i}")})()

        def tokens(self, row):
            return [f"t{i}" for i in row]

    assert caps.token_texts(models["bert"], Pieces(), [4, 5]) == ["##4", "##5"]
    assert caps.token_texts(models["gpt"], Pieces(), [4, 5]) == ["t4", "t5"]
    assert caps.token_texts(models["gpt"], None, [4, 5]) == ["4", "5"]


def test_one_answer_to_is_it_a_decoder_names_what_needs_one_and_the_model():
    models = _models()
    caps.require_decoder(models["gpt"], "lens")  # no error
    caps.require_encoder(models["bert"], "embed")
    with pytest.raises(ValueError, match=r"^lens\b.*\bdecoder-only\b.*\bbert\b.*\(BertEncoder\)$"):
        caps.require_decoder(models["bert"], "lens")
    with pytest.raises(ValueError, match=r"\brun7\b.*\btransformer\b.*\(Transformer\); try x$"):
        caps.require_decoder(models["transformer"], "prune", "run7", instead="try x")
    with pytest.raises(ValueError, match=r"^embed\b.*\bencoder-only\b.*\bgpt\b.*\(GPT\)$"):
        caps.require_encoder(models["gpt"], "embed")
    with pytest.raises(ValueError, match=r"got a Linear$"):
        caps.require_decoder(nn.Linear(2, 2), "generate")
