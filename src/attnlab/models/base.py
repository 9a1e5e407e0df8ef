"""What every attnlab model shares: a frozen, validated config and ``save``/``load`` as
``config.json`` + ``model.safetensors`` (never pickle).

A model class subclasses :class:`SavableModel`, sets ``kind`` (the name written into
``config.json``) and ``config_class`` (a frozen dataclass subclassing :class:`ModelConfig`), and
builds itself from ``__init__(self, config)``. A family that ``attnlab train`` can train also sets
``OPTIONS`` (the training options it takes, with their defaults) and :meth:`SavableModel.from_options`
(how they map onto its config). The class registers itself under ``kind`` when it is defined;
:mod:`attnlab.models.registry` imports every family, and its ``load_model`` reads any saved model.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from attnlab._checks import choice, memory_bytes, positive_int, probability
from attnlab._io import atomic_write_bytes, atomic_write_json, read_json
from attnlab.nn.nonfinite import detect_from_env

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
_REGISTRY: dict[str, type[SavableModel]] = {}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Base of model configs. Subclasses are frozen dataclasses and validate in ``__post_init__``."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def audit_fields(self) -> dict[str, Any] | None:
        """The fields of the audits' ``ModelSpec`` this config describes (``model``: the family's
        kind, ``block``, ``layers``, ``vocab``, ``max_len`` and the family's own), read by
        :func:`attnlab.audit.model_spec`; None: the audits do not describe this family."""
        return None

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: the config must be a JSON object, got {type(data).__name__}")
        fields_ = dataclasses.fields(cls)
        names = {f.name for f in fields_}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{cls.__name__} has no field(s) {unknown}")
        required = {
            f.name
            for f in fields_
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - set(data))
        if missing:
            raise ValueError(f"{cls.__name__} is missing required field(s) {missing}")
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**fields)


def check_positive(config: Any, *names: str) -> None:
    """Raise ``ValueError`` unless each named field of ``config`` is a positive int."""
    for name in names:
        positive_int(f"{type(config).__name__}.{name}", getattr(config, name))


def check_choice(config: Any, name: str, choices: tuple) -> None:
    """Raise ``ValueError`` unless ``config.name`` is one of ``choices``."""
    choice(f"{type(config).__name__}.{name}", getattr(config, name), choices)


def check_probability(config: Any, *names: str) -> None:
    """Raise ``ValueError`` unless each named field of ``config`` lies in [0, 1) (a dropout rate)."""
    for name in names:
        probability(f"{type(config).__name__}.{name}", getattr(config, name))


def padding_keep(attention_mask, shape: tuple[int, ...], ids_name: str = "ids") -> torch.Tensor:
    """``attention_mask [B, T]`` as a bool tensor, True = real token: a torch tensor of ``shape`` that
    is bool or holds only 0 and 1 (any integer or float dtype, as Hugging Face passes it), with a
    real token in every row. Anything else is a ``ValueError`` (a NumPy array too: ``torch.as_tensor``
    converts it). One host sync (the value and row checks read back together)."""
    if not isinstance(attention_mask, torch.Tensor):
        hint = "; torch.as_tensor(mask) converts it" if hasattr(attention_mask, "__array__") else ""
        raise ValueError(
            "attention_mask must be a torch tensor [B, T] of 1/True (real token) and 0/False (padding), "
            f"got {type(attention_mask).__name__}{hint}"
        )
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(
            f"attention_mask has shape {list(attention_mask.shape)} but {ids_name} has shape {list(shape)}"
        )
    if attention_mask.is_complex():
        raise ValueError(f"attention_mask must be bool or hold 0 and 1, got dtype {attention_mask.dtype}")
    if attention_mask.dtype == torch.bool:
        keep, odd = attention_mask, torch.zeros((), dtype=torch.bool, device=attention_mask.device)
    else:
        keep = attention_mask != 0  # [B, T]
        odd = (keep & (attention_mask != 1)).any()  # a value other than 0 and 1 (NaN included)
    empty = ~keep.any(dim=1)  # [B]: rows with no real token
    has_odd, has_empty = torch.stack([odd, empty.any()]).tolist()
    if has_odd:
        value = attention_mask[keep & (attention_mask != 1)][0].item()
        raise ValueError(
            f"attention_mask must hold only 0 and 1 (or False and True), got {value!r}: "
            "1 marks a real token, 0 padding"
        )
    if has_empty:
        row = int(empty.nonzero()[0, 0])
        raise ValueError(f"attention_mask has a row with no real token (row {row} is all 0)")
    return keep


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    """A safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 0 < n <= size - 8 and head[8:9] == b"{"


def _refuse_pickle(path: Path) -> None:
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(9)
    if _looks_like_safetensors(head, size):
        return  # (its header length may well begin with byte 0x80: not a pickle)
    if head[:1] == b"\x80" or head[:2] == b"PK":
        raise ValueError(
            f"{path} looks like a pickle/torch.save file; attnlab loads only safetensors "
            f"(pickle can run arbitrary code)"
        )


def load_state(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a ``.safetensors`` file, refusing pickles with a clear message."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    _refuse_pickle(path)
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types
        raise ValueError(f"{path} is not a readable safetensors file: {exc}") from None


def check_state_dict(model: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Raise ``ValueError`` naming every missing, unexpected or mis-shaped tensor, or one stored as
    integers where the model holds floats (:func:`check_floating`)."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{source}: missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected tensors {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, t in expected.items():
        if tuple(state[name].shape) != tuple(t.shape):
            raise ValueError(
                f"{source}: tensor {name!r} has shape {list(state[name].shape)}, "
                f"the model expects {list(t.shape)}"
            )
        check_floating(name, state[name], t, source)


def check_floating(name: str, stored: torch.Tensor, expected: torch.Tensor, source: str) -> None:
    """A ``ValueError`` naming tensor ``name`` and its dtype when the model holds it in floating point
    but the file stores integers or booleans (loading would cast them silently: an embedding of
    rounded values, a quantised file read without its scales)."""
    if expected.is_floating_point() and not (stored.is_floating_point() or stored.is_complex()):
        raise ValueError(
            f"{source}: tensor {name!r} is stored as {str(stored.dtype).removeprefix('torch.')}; "
            f"the model's weights are floating point ({str(expected.dtype).removeprefix('torch.')})"
        )


class SavableModel(nn.Module):
    """A module built from a config that saves as ``config.json`` + ``model.safetensors``."""

    kind: ClassVar[str] = ""
    config_class: ClassVar[type[ModelConfig]] = ModelConfig
    # the options `attnlab train` may set (``--d-model`` -> "d_model") and their defaults; None: a
    # family attnlab does not train (BERT is loaded, never trained here)
    OPTIONS: ClassVar[dict[str, Any] | None] = None
    # what callers ask the model instead of its family (:mod:`attnlab.models.capabilities` reads them):
    # one causal sequence (``forward(ids) -> logits``, decoding from a prompt) rather than source -> target
    DECODER_ONLY: ClassVar[bool] = False
    # one bidirectional sequence read whole (``encode(ids) -> [B, T, d_model]``), no logits
    ENCODER_ONLY: ClassVar[bool] = False
    # its one stack of self-attention layers as the hook points name it ("blocks": blocks.{i}.self_attn.*)
    STACK: ClassVar[str | None] = None
    # how its ids read as text: "decoded" one by one, or the vocabulary's "pieces" (WordPiece's ##ing)
    TOKEN_TEXT: ClassVar[str] = "decoded"

    @classmethod
    def options(cls, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` completed with :attr:`OPTIONS`' defaults (a None value means "the default");
        an option the family does not take is a ``ValueError`` naming it."""
        if cls.OPTIONS is None:
            raise ValueError(f"model {cls.kind!r} is not trained by attnlab train")
        unknown = sorted(set(given) - set(cls.OPTIONS))
        if unknown:
            raise ValueError(f"model {cls.kind!r} has no option(s) {unknown}; options: {sorted(cls.OPTIONS)}")
        return {**cls.OPTIONS, **{k: v for k, v in given.items() if v is not None}}

    @classmethod
    def from_options(cls, vocab_size: int, **options: Any) -> ModelConfig:
        """The config of a model with one vocabulary of ``vocab_size`` ids (source and target
        alike) and the training ``options`` (every key of :attr:`OPTIONS`, completed)."""
        raise NotImplementedError(f"{cls.__name__} does not say how training options map onto its config")

    @classmethod
    def from_audit(cls, spec: Any) -> dict[str, Any] | None:
        """The fields of :attr:`config_class` that the audits' ``ModelSpec`` ``spec`` describes
        (its ``block``, ``layers``, ``vocab``, ``max_len``, ...): :mod:`attnlab.audit.build` builds
        the family from them. None: the audits do not describe this family (the registry's
        ``AUDITED`` lists those that do)."""
        return None

    @classmethod
    def build(cls, vocab_size: int, options: dict[str, Any]) -> SavableModel:
        """A freshly initialised model (torch's global RNG) from training ``options``; checked at
        every hook point when ``ATTNLAB_DETECT_NONFINITE`` is set (:mod:`attnlab.nn.nonfinite`)."""
        return detect_from_env(cls(cls.from_options(vocab_size, **cls.options(options))))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            _REGISTRY[cls.kind] = cls

    def save(self, directory: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (each atomically).

        Tied weights are stored once (safetensors refuses shared storage; the tie is rebuilt by
        ``__init__`` on load). A model whose heads :func:`attnlab.interp.prune_heads` removed is refused:
        its config still says how many heads every layer had, so the folder would not load back."""
        pruned = [n for n, m in self.named_modules() if getattr(m, "kept_heads", None) is not None]
        if pruned:
            raise ValueError(
                f"cannot save this model: prune_heads removed heads of {', '.join(pruned)}, which "
                "config.json cannot describe (the folder would not load back); save the unpruned model "
                "and prune it again after loading, or use attnlab.interp.prune.mask_heads (the same "
                "outputs, the weights kept)"
            )
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {}
        seen: set[int] = set()
        for name, t in self.state_dict().items():
            ptr = t.data_ptr()
            if ptr in seen and t.numel():
                continue  # a tied weight: stored once
            seen.add(ptr)
            state[name] = t.detach().contiguous().cpu()
        tmp = directory / f".{WEIGHTS_FILE}.writing"
        save_file(state, str(tmp))
        atomic_write_bytes(directory / WEIGHTS_FILE, tmp.read_bytes())
        tmp.unlink()
        atomic_write_json(directory / CONFIG_FILE, {"model": self.kind, "config": self.config.to_dict()})
        return directory

    @classmethod
    def load(cls, directory: str | Path, map_location: str = "cpu"):
        """Rebuild the model from ``directory``; errors name any missing or mis-shaped tensor."""
        directory = Path(directory)
        kind, config = read_config(directory)
        if cls.kind and kind != cls.kind:
            raise ValueError(f"{directory} holds a {kind!r} model, not {cls.kind!r}")
        model_cls = _REGISTRY[kind] if not cls.kind else cls
        cfg = model_cls.config_class.from_dict(config)
        check_fits(model_cls, cfg, directory / CONFIG_FILE)
        model = model_cls(cfg)
        state = load_state(directory / WEIGHTS_FILE)
        # restore tied weights that were stored once
        full = model.state_dict()
        for name in full:
            if name not in state:
                for other, t in full.items():
                    if other in state and t.data_ptr() == full[name].data_ptr():
                        state[name] = state[other]
                        break
        check_state_dict(model, state, str(directory / WEIGHTS_FILE))
        model.load_state_dict(state)
        return detect_from_env(model.to(map_location))  # ATTNLAB_DETECT_NONFINITE=1: checked at every point


def check_sizes(config, source) -> None:
    """Refuse, with a ``ValueError`` naming ``source`` and the field, a config whose sizes no model
    has: more than 10,000 layers (a loop over 10^12 layers would run for ever before allocating
    anything) or any other integer field above 2^31 - 1 (a nested block's fields too). Pure
    arithmetic: nothing is built."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            check_sizes(value, source)
            continue
        most = 10_000 if "layers" in f.name else 2**31 - 1
        if isinstance(value, int) and not isinstance(value, bool) and value > most:
            raise ValueError(f"{source}: {f.name}={value:,} is beyond any model (at most {most:,})")


def check_memory(build, source) -> int:
    """Call ``build()`` on the meta device (no memory) and refuse, with a ``ValueError`` naming
    ``source``, a module whose parameters and buffers would not fit in half of this machine's
    memory. Returns the bytes it needs."""
    try:
        with torch.device("meta"):
            probe = build()
    except (OverflowError, RuntimeError, TypeError) as exc:
        raise ValueError(f"{source}: these sizes cannot be built ({str(exc).splitlines()[0][:80]})") from None
    need = sum(t.numel() * t.element_size() for t in list(probe.parameters()) + list(probe.buffers()))
    have = memory_bytes()
    if need > have // 2:
        n = sum(p.numel() for p in probe.parameters())
        raise ValueError(
            f"{source}: a model of {n:,} parameters ({need / 2**30:,.1f} GiB) would not fit; "
            f"this machine has {have / 2**30:,.1f} GiB of memory"
        )
    return need


def check_fits(model_cls, config, source) -> int:
    """Refuse ``model_cls(config)`` before anything is allocated: :func:`check_sizes`, then
    :func:`check_memory` of the model built on the meta device (a config edited to ``d_model`` 10^6
    or ``max_len`` 10^9). Returns the bytes it needs."""
    check_sizes(config, source)
    return check_memory(lambda: model_cls(config), source)


def read_config(directory: str | Path) -> tuple[str, dict[str, Any]]:
    """Return ``(kind, config dict)`` from ``directory/config.json``."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in {directory}")
    data = read_json(path, kind=None)
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict):
        raise ValueError(f"{path} must be a JSON object with 'model' and 'config', got {type(data).__name__}")
    if "model_type" in data and "model" not in data:
        raise ValueError(
            f"{directory} is a Hugging Face checkpoint (model_type {data['model_type']!r}), not a model "
            "saved by attnlab: load it with attnlab.models.load"
        )
    kind = data.get("model")
    if not isinstance(kind, str) or kind not in _REGISTRY:
        raise ValueError(f"{path} names model {kind!r}; known models: {sorted(_REGISTRY)}")
    return kind, data.get("config", {})


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, tied tensors counted once."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
