"""Whole models built from :mod:`attnlab.nn`, each with a frozen config and save/load."""

from attnlab.models.base import ModelConfig, SavableModel
from attnlab.models.bert import BertConfig, BertEncoder
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.hf import load_hf
from attnlab.models.load import Loaded, load, load_config
from attnlab.models.pretrained import load_pretrained
from attnlab.models.registry import load_model
from attnlab.models.rnn import AttentionRNN, AttentionRNNConfig, RNNConfig, Seq2SeqRNN
from attnlab.models.sentence import embed
from attnlab.models.transformer import Transformer, TransformerConfig

__all__ = [
    "GPT",
    "GPTConfig",
    "Transformer",
    "TransformerConfig",
    "AttentionRNN",
    "AttentionRNNConfig",
    "BertConfig",
    "BertEncoder",
    "ModelConfig",
    "RNNConfig",
    "SavableModel",
    "Seq2SeqRNN",
    "embed",
    "Loaded",
    "load",
    "load_config",
    "load_hf",
    "load_model",
    "load_pretrained",
]
