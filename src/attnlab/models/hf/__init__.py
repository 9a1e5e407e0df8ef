"""Hugging Face checkpoints (``config.json`` + ``model.safetensors``) mapped onto attnlab's models."""

from attnlab.models.hf.bert import config_from_hf, hf_names, load_bert, map_hf_state

__all__ = ["config_from_hf", "hf_names", "load_bert", "map_hf_state"]
