"""Explorer views of attnlab's Transformer and GPT: shapes, tokens, and the models' own weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig
from attnlab.nn import capture
from attnlab.viz.explorer import model_views


def test_transformer_gives_encoder_decoder_and_cross_views():
    torch.manual_seed(0)
    cfg = TransformerConfig(
        src_vocab=20,
        tgt_vocab=20,
        d_model=16,
        num_heads=2,
        d_ff=32,
        num_encoder_layers=2,
        num_decoder_layers=3,
        max_len=32,
        dropout=0.0,
    )
    model = Transformer(cfg)
    src, tgt = [5, 6, 7, 8, 9, 2], [1, 10, 11, 12]
    views = model_views(model, src, [f"s{i}" for i in src], tgt, [f"t{i}" for i in tgt])
    assert [(v.kind, v.weights.shape) for v in views] == [
        ("self", (2, 2, 6, 6)),
        ("causal", (3, 2, 4, 4)),
        ("cross", (3, 2, 4, 6)),
    ]
    assert views[0].layer_names == ("encoder.layers.0", "encoder.layers.1")
    assert views[2].layer_names == ("decoder.layers.0", "decoder.layers.1", "decoder.layers.2")
    with torch.no_grad(), capture(model, ["*.weights"]) as cache:  # every layer explicit, as the explorer
        model(torch.tensor([src]), torch.tensor([tgt]))
    np.testing.assert_array_equal(
        views[2].weights[1], cache["decoder.layers.1.cross_attn.weights"][0].numpy()
    )
    causal = views[1].weights
    assert np.all(causal[..., np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] == 0)  # no peeking ahead
    for v in views:
        np.testing.assert_allclose(v.weights.sum(-1), 1.0, atol=1e-5)
    assert views[2].query_tokens == ("t1", "t10", "t11", "t12") and views[2].key_tokens[0] == "s5"


def test_gpt_gives_one_causal_view():
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=12, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=16))
    ids = [1, 5, 6, 7, 4, 8]
    (view,) = model_views(model, ids, [str(i) for i in ids])
    model.eval()
    with torch.no_grad(), capture(model, ["blocks.0.self_attn.x_q"]) as cache:
        model(torch.tensor([ids]))
    _, want = model.blocks[0].self_attn(cache["blocks.0.self_attn.x_q"], is_causal=True, need_weights=True)
    assert view.kind == "causal" and view.weights.shape == (2, 4, 6, 6)
    assert view.layer_names == ("blocks.0", "blocks.1")
    np.testing.assert_array_equal(view.weights[0], want[0].detach().numpy())
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_explore_a_folder_written_by_attnlab_train(tmp_path):
    from attnlab.models import load_model
    from attnlab.viz.explorer import attention_views

    run = tmp_path / "run"
    train = CliRunner().invoke(
        cli,
        [
            "train",
            "--task",
            "reverse",
            "--model",
            "transformer",
            "--steps",
            "2",
            "--batch",
            "8",
            "--train-size",
            "32",
            "--eval-size",
            "8",
            "--d-model",
            "16",
            "--heads",
            "2",
            "--layers",
            "1",
            "--num-symbols",
            "6",
            "--min-len",
            "3",
            "--max-len",
            "6",
            "--quiet",
            "--out",
            str(run),
        ],
    )
    assert train.exit_code == 0, train.output
    page = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["explore", "abcd", "--model", str(run), "--out", str(page)])
    assert result.exit_code == 0, result.output
    assert "transformer trained on reverse" in result.output and page.stat().st_size > 5_000
    views, label = attention_views("abcd", run)
    assert [v.kind for v in views] == ["self", "causal", "cross"]
    cross = views[2]
    assert cross.key_tokens == ("a", "b", "c", "d", "<eos>") and cross.query_tokens[0] == "<bos>"
    # recompute independently: teacher-force the shown target through the saved model
    model = load_model(run).eval()
    vocab = {s: i for i, s in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", "<sep>", *"abcdef"])}
    src = torch.tensor([[vocab[t] for t in cross.key_tokens]])
    tgt = torch.tensor([[vocab[t] for t in cross.query_tokens]])
    with torch.no_grad(), capture(model, ["*.weights"]) as cache:  # every layer explicit, as the explorer
        model(src, tgt)
    np.testing.assert_array_equal(cross.weights[0], cache["decoder.layers.0.cross_attn.weights"][0].numpy())
