"""Small shared settings for the training tests: tiny models, a short reverse task."""

import numpy as np
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


# ------------------------------------------------------------------------------------- text runs
def _play(lines: int = 400, seed: int = 0) -> str:
    """A small play-like text: speakers on their own line, a verse line each, blank lines between."""
    rng = np.random.default_rng(seed)
    speakers = ["ROMEO", "JULIET", "NURSE", "FRIAR"]
    words = "love night light death sweet fair moon heart thou art my the and of to".split()
    out = []
    for _ in range(lines):
        verse = " ".join(rng.choice(words, size=rng.integers(4, 9)))
        out.append(f"{rng.choice(speakers)}:\n{verse.capitalize()},\nO {rng.choice(words)}!\n")
    return "\n".join(out)


TINY_GPT = {"d_model": 32, "layers": 1, "heads": 2, "max_len": 32}


def _text_config(source, **kw) -> TrainConfig:
    params = {"source": str(source), "context": 32}
    params.update(kw.pop("task_params", {}))
    base = dict(
        task="text",
        model="gpt",
        steps=30,
        batch_size=8,
        eval_every=10,
        eval_size=8,
        warmup=5,
        lr=3e-3,
        task_params=params,
        model_params=dict(TINY_GPT),
        seed=0,
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="session")
def play():
    """``play(lines, seed)``: a small play-like text (speakers, verse lines, blank lines)."""
    return _play


@pytest.fixture(scope="session")
def text_config():
    """``text_config(source, **changes)``: a tiny GPT on a text file (context 32, 30 steps)."""
    return _text_config
