"""Attention gathered from attnlab models for the explorer, and `attnlab explore`'s bad arguments."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.models.rnn import AttentionRNN, AttentionRNNConfig, RNNConfig, Seq2SeqRNN
from attnlab.viz.explorer import trained_views


def test_attention_rnn_alignment_becomes_one_cross_view():
    torch.manual_seed(0)
    model = AttentionRNN(AttentionRNNConfig(src_vocab=12, tgt_vocab=12, emb=8, hidden=16))
    src, tgt = [5, 6, 7, 8, 2], [1, 9, 10, 11]
    (view,) = trained_views(model, src, list("abcd") + ["<eos>"], tgt, ["<bos>", "x", "y", "z"])
    with torch.no_grad():
        _, alpha = model(torch.tensor([src]), torch.tensor([tgt]), return_attention=True)  # [1, T, S]
    assert view.kind == "cross" and view.weights.shape == (1, 1, 4, 5)
    np.testing.assert_array_equal(view.weights[0, 0], alpha[0].numpy().astype(np.float32))
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-6)
    assert view.query_tokens == ("<bos>", "x", "y", "z") and view.key_tokens[-1] == "<eos>"


def test_models_without_attention_or_with_bad_tokens_are_refused():
    model = Seq2SeqRNN(RNNConfig(src_vocab=6, tgt_vocab=6, emb=4, hidden=8))
    with pytest.raises(ValueError, match="has no attention weights"):
        trained_views(model, [4, 5], ["a", "b"], [1], ["<bos>"])
    attn = AttentionRNN(AttentionRNNConfig(src_vocab=6, tgt_vocab=6, emb=4, hidden=8))
    with pytest.raises(ValueError, match="src_ids has 2 ids but src_tokens has 1"):
        trained_views(attn, [4, 5], ["a"], [1], ["<bos>"])
    with pytest.raises(ValueError, match="tgt_ids and tgt_tokens"):
        trained_views(attn, [4, 5], ["a", "b"])


@pytest.mark.parametrize(
    "args, words",
    [
        (["   ", "--out", "x.html"], "sentence must be a non-empty string"),
        (["hello", "--model", "no/such/folder", "--out", "x.html"], "is not a model attnlab can load"),
    ],
)
def test_explore_bad_arguments_exit_2_with_one_line(tmp_path, args, words):
    result = CliRunner().invoke(cli, ["explore", *args])
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_explore_refuses_a_folder_as_out(tmp_path):
    from attnlab.viz.explorer import write_explorer

    with pytest.raises(ValueError, match="is a folder"):
        write_explorer("hello", "minilm", tmp_path)
