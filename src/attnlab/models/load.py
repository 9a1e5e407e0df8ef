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

:func:`load_config` gives a source's config without its weights (also of a bare ``config.json``).

Loading never writes: a run's checkpoint is verified against its recorded sha256 and read where it
is. The model comes back in eval mode; the tokenizer behind the one interface of
:mod:`attnlab.tasks.tokenize` (None for a saved model with no ``tokenizer.json`` beside it).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnlab._io import file_sha256, read_json
from attnlab._runs import checkpoint_dir, is_run, verify
from attnlab.devices import resolve_device
from attnlab.models.base import CONFIG_FILE, ModelConfig, SavableModel
from attnlab.models.hf.checkpoint import eos_ids
from attnlab.models.hf.load import config_dtype_bytes, load_hf, model_config_from_hf
from attnlab.models.pretrained import PRETRAINED, load_pretrained, pretrained_path
from attnlab.models.registry import load_model, read_model_config
from attnlab.nn.nonfinite import (
    NonFiniteError,
    NonFiniteWeightsWarning,
    mark_nonfinite_weights,
    say_nonfinite_weights,
)
from attnlab.tasks import get_task
from attnlab.tasks.tokenize import HFTokenizer, Tokenizer, from_file

ORIGINS = ("pretrained", "run", "hf", "saved")


@dataclasses.dataclass
class Loaded:
    """A loaded model: ``model`` (eval mode, on the requested device), its ``tokenizer``, the
    ``source`` as given, its ``origin`` (one of :data:`ORIGINS`), a one-line ``label`` for titles,
    and for a run its ``task`` spec (``{"name", "params"}``) or ``text`` metadata; ``eos_ids``: the
    end-of-sequence ids generation stops at (:func:`end_of_sequence`, the one place they are read).
    Unpacks as ``model, tokenizer = load(source)``."""

    model: nn.Module
    tokenizer: Tokenizer | None
    source: str
    origin: str
    label: str
    task: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    eos_ids: list[int] = dataclasses.field(default_factory=list)

    def __iter__(self):
        return iter((self.model, self.tokenizer))

    @property
    def kind(self) -> str:
        """The model family: ``gpt``, ``bert``, ``transformer``, ``attention-rnn``, ``seq2seq-rnn``."""
        return getattr(self.model, "kind", type(self.model).__name__.lower())


def _sizes(model: nn.Module) -> str:
    """``"2 layers x 1 head"``: the model's layers and heads (singular for one), else its class name."""
    c = getattr(model, "config", None)
    layers = getattr(c, "num_layers", None)
    heads = getattr(c, "num_heads", None)
    if not (layers and heads):
        return type(model).__name__
    return f"{layers} layer{'s' * (layers != 1)} x {heads} head{'s' * (heads != 1)}"


def _pretrained(name: str) -> Loaded:
    model, backend = load_pretrained(name)
    label = f"MiniLM (all-MiniLM-L6-v2), {_sizes(model)}" if name == "minilm" else f"{name}, {_sizes(model)}"
    return Loaded(model.eval(), HFTokenizer(backend), name, "pretrained", label)


def _hf(directory: Path) -> Loaded:
    model = load_hf(directory)
    tokenizer = _tokenizer_beside(directory, model)
    return Loaded(model.eval(), tokenizer, str(directory), "hf", f"{directory.name}: {_sizes(model)}")


def _tokenizer_beside(directory: Path, model: nn.Module) -> Tokenizer | None:
    """``directory/tokenizer.json`` behind the interface (None when there is none); one whose ids
    do not fit the model's vocabulary is refused."""
    path = directory / "tokenizer.json"
    if not path.is_file():
        return None
    return from_file(path, vocab_size=getattr(getattr(model, "config", None), "vocab_size", None))


def _run(directory: Path) -> Loaded:
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
    tokenizer = get_task(spec["name"], **spec.get("params", {})).tokenizer
    label = f"{model.kind} trained on {spec['name']} ({directory.name}), {_sizes(model)}"
    return Loaded(model, tokenizer, str(directory), "run", label, task=spec)


def _saved(directory: Path) -> Loaded:
    model = load_model(directory).eval()
    tokenizer = _tokenizer_beside(directory, model)
    return Loaded(model, tokenizer, str(directory), "saved", f"{directory.name}: {_sizes(model)}")


def _check_source(source) -> None:
    """A ``ValueError`` unless ``source`` is a non-empty string or path (``""`` is not the current
    folder: it is most likely a name that was never filled in)."""
    if not isinstance(source, (str, os.PathLike)) or not str(source).strip():
        got = repr(source) if isinstance(source, str) else f"{source!r} ({type(source).__name__})"
        raise ValueError(
            f"source must be {' or '.join(map(repr, PRETRAINED))} or the path of a model folder, got {got}"
        )


def resolve_load_device(device) -> torch.device:
    """``device`` for :func:`load`: ``"auto"`` (CUDA when PyTorch sees it, else the CPU), a device
    string (``"cpu"``, ``"cuda"``, ``"cuda:1"``) or a ``torch.device``; a ``ValueError`` for anything
    else, and for CUDA on a build or machine without it (as ``--device`` says)."""
    if isinstance(device, str) and device == "auto":
        device = resolve_device("auto")
    if not isinstance(device, (str, torch.device)):
        raise ValueError(f"device must be 'cpu', 'cuda', 'auto' or a torch.device, got {device!r}")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device must be 'cpu', 'cuda', 'cuda:N', 'auto' or a torch.device, got {device!r}"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {str(device)!r} was asked for but PyTorch sees no CUDA device (torch "
            f"{torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use device='cpu' or 'auto'"
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {str(device)!r}: PyTorch sees {torch.cuda.device_count()} CUDA device(s)")
    return dev


def origin_of(source: str | Path) -> str:
    """Which of :data:`ORIGINS` ``source`` is, without loading anything; a ``ValueError`` naming
    what ``source`` would have to be when it is none of them."""
    _check_source(source)
    if str(source) in PRETRAINED:
        return "pretrained"
    directory = Path(source)
    if not directory.is_dir():
        raise ValueError(
            f"{str(source)!r} is not a model attnlab can load: give {' or '.join(map(repr, PRETRAINED))}, "
            "a Hugging Face checkpoint folder, or a folder written by attnlab train"
        )
    if is_run(directory):
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


def load(source: str | Path, *, device: str | torch.device = "cpu", finite: bool = False) -> Loaded:
    """Load ``source`` (see the module doc) onto ``device``; errors are one-line ``ValueError`` or
    ``FileNotFoundError`` naming the source and what is wrong (a bad ``device`` too:
    :func:`resolve_load_device`).

    Weights holding NaN or infinity are found once, here, and named: a
    :class:`~attnlab.nn.nonfinite.NonFiniteWeightsWarning` (an analysis still runs, and shows the
    NaN), or with ``finite=True`` (what generation and training need) a ``ValueError``. The model
    keeps their names (``model.nonfinite_weights``), so generating from it later refuses
    (:func:`~attnlab.nn.nonfinite.require_finite_weights`)."""
    device = resolve_load_device(device)
    origin = origin_of(source)
    if origin == "pretrained":
        loaded = _pretrained(str(source))
    else:
        loaded = {"run": _run, "hf": _hf, "saved": _saved}[origin](Path(source))
    found = getattr(loaded.model, "nonfinite_weights", None)
    if found is None:  # a loader that did not look at the file's own tensors
        found = mark_nonfinite_weights(loaded.model)
    if found and finite:
        raise NonFiniteError(f"{source}: the weights hold NaN or infinity, {say_nonfinite_weights(found)}")
    if found:
        warnings.warn(
            NonFiniteWeightsWarning(
                f"{source}: the weights hold NaN or infinity, {say_nonfinite_weights(found)}: "
                "what the model computes will too"
            ),
            stacklevel=2,
        )
    loaded.model = loaded.model.to(device)
    loaded.eos_ids = end_of_sequence(loaded)
    return loaded


def end_of_sequence(loaded: Loaded) -> list[int]:
    """The ids generation stops at: a Hugging Face checkpoint's ``eos_token_id``
    (``generation_config.json``, else ``config.json``; a list included: Llama 3 lists two), else the
    end-of-sequence token the tokenizer declares (a task alphabet's ``<eos>``, the ``eos_token`` of a
    ``tokenizer_config.json``); ``[]`` for none (an attnlab text run: generation runs its length)."""
    ids = eos_ids(loaded.source) if loaded.origin == "hf" else []
    declared = getattr(loaded.tokenizer, "eos_id", None)
    return ids or ([] if declared is None else [int(declared)])


def load_config(source: str | Path) -> ModelConfig:
    """The config of ``source`` without reading its weights (what ``attnlab audit --config`` counts):
    any source :func:`load` takes (a run's from its verified checkpoint), or a ``config.json`` file,
    Hugging Face's (``model_type``) or attnlab's (``model`` and ``config``)."""
    _check_source(source)
    path = Path(source)
    if path.suffix == ".json" and not path.is_file():
        raise FileNotFoundError(f"no such file {path}")
    if path.is_file():
        data = read_json(path, kind=None)
        if isinstance(data, dict) and "model" in data and "config" in data and "model_type" not in data:
            if path.name != CONFIG_FILE:
                raise ValueError(
                    f"{path}: an attnlab config is read as {CONFIG_FILE} of its folder; rename it"
                )
            return read_model_config(path.parent)
        return model_config_from_hf(path)
    origin = origin_of(source)
    if origin == "pretrained":
        return model_config_from_hf(pretrained_path(str(source)))
    if origin == "run":
        checkpoint = checkpoint_dir(path)
        verify(checkpoint)
        return read_model_config(checkpoint)
    return model_config_from_hf(path) if origin == "hf" else read_model_config(path)


def config_dtype(source: str | Path) -> tuple[int, str] | None:
    """``(bytes per value, dtype)`` the checkpoint ``source`` stores its weights in, when a Hugging
    Face ``config.json`` names a ``torch_dtype``; None otherwise (attnlab's own models are float32)."""
    path = Path(source)
    if path.is_file():
        data = read_json(path, kind=None)
        return config_dtype_bytes(path) if isinstance(data, dict) and "model_type" in data else None
    return config_dtype_bytes(path) if origin_of(source) == "hf" else None
