"""Training on the built-in tasks: config, data order, loop, checkpoints, evaluation, DDP."""

from attnlab.training.config import MODEL_KINDS, TrainConfig
from attnlab.training.evaluate import evaluate_examples, predict, score
from attnlab.training.trainer import TrainResult, train

__all__ = ["MODEL_KINDS", "TrainConfig", "TrainResult", "evaluate_examples", "predict", "score", "train"]
