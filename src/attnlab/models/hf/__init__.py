"""Hugging Face checkpoints (``config.json`` + ``model.safetensors``) mapped onto attnlab's models:
:func:`load_hf` for ``model_type`` bert, gpt2, llama, mistral and qwen2."""

from attnlab.models.hf.bert import config_from_hf, hf_names, load_bert, map_hf_state
from attnlab.models.hf.load import MODEL_TYPES, load_hf, model_config_from_hf

__all__ = [
    "MODEL_TYPES",
    "config_from_hf",
    "hf_names",
    "load_bert",
    "load_hf",
    "map_hf_state",
    "model_config_from_hf",
]
