"""The one way in: ``load(source) -> Loaded(model, tokenizer, ...)`` for every model attnlab reads.

=====================================  ===================================================  ============
``source``                              what it is                                            ``origin``
=====================================  ===================================================  ============
``"minilm"`` (:data:`PRETRAINED`)      a pretrained model shipped as a package               pretrained
a folder with ``latest.json``          a run written by ``attnlab train`` (newest verified   run
                                       checkpoint; a task alphabet or a ``tokenizer.json``)
a folder whose ``config.json`` has a   a Hugging Face checkpoint (GPT-2, Llama, Mistral,     hf
``model_type``                         Qwen2, BERT) with its ``tokenizer.json``
a folder with attnlab's ``config.json``  a model saved with ``model.save(dir)``                saved
=====================================  ===================================================  ============

Loading never writes: a run's checkpoint is verified against its recorded sha256 and read where it
is. The model comes back in eval mode; the tokenizer behind the one interface of
:mod:`attnlab.tasks.tokenize` (None for a saved model with no ``tokenizer.json`` beside it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnlab._io import file_sha256, read_json
from attnlab.models.base import SavableModel
from attnlab.models.pretrained import PRETRAINED
from attnlab.tasks.tokenize import Tokenizer, from_file

ORIGINS = ("pretrained", "run", "hf", "saved")


@dataclasses.dataclass
class Loaded:
    """A loaded model: ``model`` (eval mode, on the requested device), its ``tokenizer``, the
    ``source`` as given, its ``origin`` (one of :data:`ORIGINS`), a one-line ``label`` for titles,
    and for a run its ``task`` spec (``{"name", "params"}``) or ``text`` metadata. Unpacks as
    ``model, tokenizer = load(source)``."""

    model: nn.Module
    tokenizer: Tokenizer | None
    source: str
    origin: str
    label: str
    task: dict[str, Any] | None = None
    text: dict[str, Any] | None = None

    def __iter__(self):
        return iter((self.model, self.tokenizer))

    @property
    def kind(self) -> str:
        """The model family: ``gpt``, ``bert``, ``transformer``, ``attention-rnn``, ``seq2seq-rnn``."""
        return getattr(self.model, "kind", type(self.model).__name__.lower())


def _sizes(model: nn.Module) -> str:
    c = getattr(model, "config", None)
    layers = getattr(c, "num_layers", None)
    heads = getattr(c, "num_heads", None)
    return f"{layers} layers x {heads} heads" if layers and heads else type(model).__name__


def _pretrained(name: str) -> Loaded:
    from attnlab.models.pretrained import load_pretrained

    model, backend = load_pretrained(name)
    from attnlab.tasks.tokenize import HFTokenizer

    label = f"MiniLM (all-MiniLM-L6-v2), {_sizes(model)}" if name == "minilm" else f"{name}, {_sizes(model)}"
    return Loaded(model.eval(), HFTokenizer(backend), name, "pretrained", label)


def _hf(directory: Path) -> Loaded:
    from attnlab.models.hf.load import load_hf

    model = load_hf(directory)
    tokenizer = _tokenizer_beside(directory, model)
    return Loaded(model.eval(), tokenizer, str(directory), "hf", f"{directory.name}: {_sizes(model)}")


def _tokenizer_beside(directory: Path, model: nn.Module) -> Tokenizer | None:
    path = directory / "tokenizer.json"
    if not path.is_file():
        return None
    tok = from_file(path)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is not None and tok.vocab_size > vocab:
        raise ValueError(
            f"{path} has {tok.vocab_size:,} tokens but the model's vocab_size is {vocab:,}: "
            "the tokenizer does not belong to this checkpoint"
        )
    return tok


def _run(directory: Path) -> Loaded:
    # training sits above models in the layering; its checkpoint reader is imported where used
    from attnlab.training.checkpoint import checkpoint_dir, verify

    path = checkpoint_dir(directory)
    state = verify(path)
    model = SavableModel.load(path).eval()  # the verified checkpoint itself, never the top-level copy
    meta_path = directory / "text.json"
    if meta_path.is_file():
        meta = read_json(meta_path)
        tok_path = directory / "tokenizer.json"
        digest = meta.get("files", {}).get("tokenizer.json") if isinstance(meta.get("files"), dict) else None
        if not tok_path.is_file() or file_sha256(tok_path) != digest:
            raise ValueError(f"{tok_path} is missing or corrupt (sha256 mismatch with {meta_path})")
        tokenizer = _tokenizer_beside(directory, model)
        label = f"{model.kind} trained on {meta.get('source', 'text')} ({directory.name}), {_sizes(model)}"
        return Loaded(model, tokenizer, str(directory), "run", label, text=meta)
    spec = state.get("task") or {}
    if "name" not in spec:
        raise ValueError(f"{directory} does not record the task it was trained on; cannot tokenize")
    from attnlab.tasks import get_task

    tokenizer = get_task(spec["name"], **spec.get("params", {})).tokenizer
    label = f"{model.kind} trained on {spec['name']} ({directory.name}), {_sizes(model)}"
    return Loaded(model, tokenizer, str(directory), "run", label, task=spec)


def _saved(directory: Path) -> Loaded:
    model = SavableModel.load(directory).eval()
    tokenizer = _tokenizer_beside(directory, model)
    return Loaded(model, tokenizer, str(directory), "saved", f"{directory.name}: {_sizes(model)}")


def origin_of(source: str | Path) -> str:
    """Which of :data:`ORIGINS` ``source`` is, without loading anything; a ``ValueError`` naming
    what ``source`` would have to be when it is none of them."""
    if str(source) in PRETRAINED:
        return "pretrained"
    directory = Path(source)
    if not directory.is_dir():
        raise ValueError(
            f"{str(source)!r} is not a model attnlab can load: give {' or '.join(map(repr, PRETRAINED))}, "
            "a Hugging Face checkpoint folder, or a folder written by attnlab train"
        )
    if (directory / "latest.json").is_file() or any(directory.glob("ckpt-*")):
        return "run"
    config = directory / "config.json"
    if not config.is_file():
        raise ValueError(
            f"{directory} holds no model: no config.json (a Hugging Face or saved model) "
            "and no latest.json (an attnlab train run)"
        )
    data = read_json(config, kind=None)
    if isinstance(data, dict) and "model_type" in data:
        return "hf"
    if isinstance(data, dict) and "model" in data and "config" in data:
        return "saved"
    raise ValueError(f"{config} is neither a Hugging Face config (no model_type) nor an attnlab one")


def load(source: str | Path, *, device: str | torch.device = "cpu") -> Loaded:
    """Load ``source`` (see the module doc) onto ``device``; errors are one-line ``ValueError`` or
    ``FileNotFoundError`` naming the source and what is wrong."""
    origin = origin_of(source)
    if origin == "pretrained":
        loaded = _pretrained(str(source))
    else:
        loaded = {"run": _run, "hf": _hf, "saved": _saved}[origin](Path(source))
    loaded.model = loaded.model.to(device)
    return loaded
