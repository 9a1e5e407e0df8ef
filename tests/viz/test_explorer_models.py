"""Attention gathered from attnlab models for the explorer, and `attnlab explore`'s bad arguments."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.models.rnn import AttentionRNN, AttentionRNNConfig, RNNConfig, Seq2SeqRNN
from attnlab.viz.explorer import model_views


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general"])
def test_attention_rnn_alignment_becomes_one_cross_view(attention):
    """The view holds the alignment the decoder computes step by step (``state.weights``)."""
    torch.manual_seed(0)
    model = AttentionRNN(
        AttentionRNNConfig(src_vocab=12, tgt_vocab=12, emb=8, hidden=16, attention=attention)
    )
    src, tgt = [5, 6, 7, 8, 2], [1, 9, 10, 11]
    (view,) = model_views(model, src, list("abcd") + ["<eos>"], tgt, ["<bos>", "x", "y", "z"])
    with torch.no_grad():
        state, rows = model.start(torch.tensor([src])), []
        for t in tgt:
            _, state = model.step(torch.tensor([t]), state)
            rows.append(state.weights[0])  # [S]
    assert view.kind == "cross" and view.weights.shape == (1, 1, 4, 5) and view.layer_names == ("attention",)
    np.testing.assert_allclose(view.weights[0, 0], torch.stack(rows).numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-6)
    assert view.query_tokens == ("<bos>", "x", "y", "z") and view.key_tokens[-1] == "<eos>"


def test_models_without_attention_or_with_bad_tokens_are_refused():
    model = Seq2SeqRNN(RNNConfig(src_vocab=6, tgt_vocab=6, emb=4, hidden=8))
    with pytest.raises(ValueError, match="has no attention weights"):
        model_views(model, [4, 5], ["a", "b"], [1], ["<bos>"])
    attn = AttentionRNN(AttentionRNNConfig(src_vocab=6, tgt_vocab=6, emb=4, hidden=8))
    with pytest.raises(ValueError, match="src_ids has 2 ids but src_tokens has 1"):
        model_views(attn, [4, 5], ["a"], [1], ["<bos>"])
    with pytest.raises(ValueError, match="tgt_ids and tgt_tokens"):
        model_views(attn, [4, 5], ["a", "b"])


@pytest.mark.parametrize(
    "args, words",
    [
        (["   ", "--out", "x.html"], "SENTENCE is empty (only whitespace)"),
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


def test_a_saved_model_with_a_tokenizer_goes_through_the_resolver(tmp_path):
    """No kind check: a GPT saved with ``model.save`` beside a ``tokenizer.json`` is read by
    attnlab.models.load and shown as its causal stack, equal to a capture of the same points."""
    import shutil

    from attnlab.models import GPT, GPTConfig
    from attnlab.models.pretrained import pretrained_path
    from attnlab.nn import capture
    from attnlab.viz.explorer import attention_views

    torch.manual_seed(3)
    model = GPT(GPTConfig(vocab_size=30522, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=32))
    model.save(tmp_path / "gpt")
    shutil.copy(pretrained_path("minilm") / "tokenizer.json", tmp_path / "gpt" / "tokenizer.json")
    (view,), label = attention_views("the cat sat", tmp_path / "gpt")
    assert view.kind == "causal" and view.layer_names == ("blocks.0", "blocks.1")
    assert view.query_tokens == ("[CLS]", "the", "cat", "sat", "[SEP]") and label.endswith("causal")
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(tmp_path / "gpt" / "tokenizer.json"))
    raw.no_padding()  # the file pads to 128
    ids = raw.encode("the cat sat").ids
    with torch.no_grad(), capture(model.eval(), ["blocks.*.self_attn.weights"]) as cache:
        model(torch.tensor([ids]))
    np.testing.assert_array_equal(view.weights[1], cache["blocks.1.self_attn.weights"][0].numpy())
