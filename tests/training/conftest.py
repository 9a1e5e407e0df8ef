"""Small shared settings for the training tests: tiny models, a short reverse task."""

import pytest

from attnlab.training import TrainConfig

TINY_RNN = {"hidden": 16, "emb": 8}


@pytest.fixture
def tiny_config():
    def make(**kw):
        base = dict(
            task="reverse",
            model="attention-rnn",
            steps=30,
            batch_size=16,
            train_size=200,
            eval_size=20,
            warmup=5,
            lr=5e-3,
            task_params={"min_len": 3, "max_len": 5},
            model_params=dict(TINY_RNN),
            seed=0,
        )
        base.update(kw)
        return TrainConfig(**base)

    return make
