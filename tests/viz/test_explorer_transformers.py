"""Explorer views of attnlab's Transformer and GPT: shapes, tokens, and the models' own weights."""

from __future__ import annotations

import numpy as np
import torch

from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig
from attnlab.viz.explorer import trained_views


def test_transformer_gives_encoder_decoder_and_cross_views():
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab=20, tgt_vocab=20, d_model=16, num_heads=2, d_ff=32,
                            num_encoder_layers=2, num_decoder_layers=3, max_len=32, dropout=0.0)
    model = Transformer(cfg)
    src, tgt = [5, 6, 7, 8, 9, 2], [1, 10, 11, 12]
    views = trained_views(model, src, [f"s{i}" for i in src], tgt, [f"t{i}" for i in tgt])
    assert [(v.kind, v.weights.shape) for v in views] == [
        ("self", (2, 2, 6, 6)), ("causal", (3, 2, 4, 4)), ("cross", (3, 2, 4, 6))]
    with torch.no_grad():
        _, attn = model(torch.tensor([src]), torch.tensor([tgt]), return_attention=True)
    np.testing.assert_array_equal(views[2].weights[1], attn["cross"][1][0].numpy())
    causal = views[1].weights
    assert np.all(causal[..., np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] == 0)  # no peeking ahead
    for v in views:
        np.testing.assert_allclose(v.weights.sum(-1), 1.0, atol=1e-5)
    assert views[2].query_tokens == ("t1", "t10", "t11", "t12") and views[2].key_tokens[0] == "s5"


def test_gpt_gives_one_causal_view():
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=12, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=16))
    ids = [1, 5, 6, 7, 4, 8]
    view, = trained_views(model, ids, [str(i) for i in ids])
    with torch.no_grad():
        _, attn = model(torch.tensor([ids]), return_attention=True)
    assert view.kind == "causal" and view.weights.shape == (2, 4, 6, 6)
    np.testing.assert_array_equal(view.weights[0], attn[0][0].numpy())
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-5)
