"""Batch order (seeded, resumable, epoch-complete, split across ranks) and learning-rate schedules."""

import math

import numpy as np
import pytest
import torch

from attnlab.tasks import BOS, EOS, PAD, SEP, Example, get_task
from attnlab.training.data import TrainData, encode_gpt, encode_seq2seq
from attnlab.training.schedule import learning_rate


def test_seq2seq_encoding():
    tok = get_task("reverse").tokenizer  # a=5, b=6, c=7
    src, tgt_in, tgt_out = encode_seq2seq([Example("abc", "cba"), Example("a", "a")], tok)
    assert src.tolist() == [[5, 6, 7, EOS], [5, EOS, PAD, PAD]]
    assert tgt_in.tolist() == [[BOS, 7, 6, 5], [BOS, 5, PAD, PAD]]
    assert tgt_out.tolist() == [[7, 6, 5, EOS], [5, EOS, PAD, PAD]]


def test_gpt_encoding_puts_the_loss_on_the_target_only():
    tok = get_task("reverse").tokenizer
    ids, labels = encode_gpt([Example("ab", "ba")], tok)
    # sequence: BOS a b SEP b a EOS; input drops the last token, labels are the next tokens
    assert ids.tolist() == [[BOS, 5, 6, SEP, 6, 5]]
    assert labels.tolist() == [[PAD, PAD, PAD, 6, 5, EOS]]


def _data(n=50, batch=8, seed=3):
    task = get_task("reverse", min_len=2, max_len=6)
    return TrainData(
        task.sample("train", n, seed=0), task.tokenizer, decoder_only=False, batch_size=batch, seed=seed
    )


def test_each_epoch_visits_distinct_examples_and_is_reproducible():
    d = _data()
    epoch = np.concatenate([d.indices(s) for s in range(d.batches_per_epoch)])  # 6 batches of 8
    assert len(set(epoch.tolist())) == 48
    again = _data()
    assert all((d.indices(s) == again.indices(s)).all() for s in range(20))
    assert not (d.indices(6) == d.indices(0)).all()  # epoch 2 is reshuffled
    other = _data(seed=4)
    assert not all((d.indices(s) == other.indices(s)).all() for s in range(3))


def test_ranks_split_the_global_batch():
    d = _data()
    full = d.tensors[0][torch.as_tensor(d.indices(5))]
    r0, r1 = d.batch(5, 0, 2)[0], d.batch(5, 1, 2)[0]
    assert torch.equal(full[0::2, : r0.shape[1]], r0) and torch.equal(full[1::2, : r1.shape[1]], r1)
    assert (full[0::2, r0.shape[1] :] == PAD).all()


def test_batch_larger_than_data_is_an_error():
    with pytest.raises(ValueError, match=r"\bbatch size 64\b.*\(50 examples\)"):
        _data(batch=64)


def test_cosine_schedule_values():
    kw = dict(schedule="cosine", lr=1e-3, warmup=10, total=110)
    assert learning_rate(0, **kw) == pytest.approx(1e-4)
    assert learning_rate(9, **kw) == pytest.approx(1e-3)
    assert learning_rate(59, **kw) == pytest.approx(1e-4 + 0.9e-3 * 0.5)  # half way: (1 + cos(pi/2)) / 2
    assert learning_rate(109, **kw) == pytest.approx(1e-4)  # floor: 10 % of the peak


def test_noam_schedule_matches_the_paper():
    # lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), d_model 512, warmup 4000
    kw = dict(schedule="noam", lr=1.0, warmup=4000, total=10**6, d_model=512)
    assert learning_rate(3999, **kw) == pytest.approx(512**-0.5 * 4000**-0.5)
    assert learning_rate(3999, **kw) == pytest.approx(6.987712e-4, rel=1e-6)
    assert learning_rate(0, **kw) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert learning_rate(15999, **kw) == pytest.approx(512**-0.5 / math.sqrt(16000))
