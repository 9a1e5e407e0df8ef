"""Any description of a model as the audits' :class:`~attnlab.audit.config.ModelSpec`: a spec, a
:class:`~attnlab.nn.BlockConfig` (one encoder layer), an ``attnlab.models`` config (GPTConfig,
BertConfig, TransformerConfig: their ``block`` and sizes), a preset's name
(:data:`attnlab.audit.presets.PRESETS`), or the CLI's flags."""

from __future__ import annotations

from attnlab.audit.config import MODELS, ModelSpec
from attnlab.audit.presets import preset as lookup  # (from_options has an argument named preset)
from attnlab.nn.config import BlockConfig


def model_spec(model) -> ModelSpec:
    """Any description of a model as a :class:`ModelSpec` (see the module docstring for what is accepted)."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, BlockConfig):
        return ModelSpec("encoder-layer", model)
    if isinstance(model, str):
        if model in MODELS:
            return ModelSpec.from_sizes(model)
        return lookup(model).spec
    fields = model.audit_fields() if callable(getattr(model, "audit_fields", None)) else None
    if fields is not None:  # an attnlab.models config: its family says what it is to an audit
        return ModelSpec(**fields)
    raise ValueError(
        f"model must be a ModelSpec, a BlockConfig, a GPTConfig/BertConfig/TransformerConfig or a preset "
        f"name, got {type(model).__name__}"
    )


def preset_info(model) -> dict | None:
    """``{name, description, published, vocab_note}`` when ``model`` names a preset, else ``None``."""
    if not isinstance(model, str) or model in MODELS:
        return None
    p = lookup(model)
    return {
        "name": p.name,
        "description": p.description,
        "published": p.published,
        "vocab_note": p.vocab_note,
    }


SIZE_OPTIONS = ("model", "d_model", "heads", "d_ff", "layers", "kv_heads", "vocab", "max_len")


def from_options(preset: str | None = None, given: tuple[str, ...] = (), **options) -> ModelSpec | str:
    """What the CLI's audit flags describe: the preset's name (its spec comes with what was
    published), or :meth:`ModelSpec.from_sizes` of ``options``. ``given``: the options the user
    actually set, by name (``"max_len"``); with a preset, any of them is a ``ValueError`` (the preset
    fixes every size)."""
    if preset is not None:
        lookup(preset)
        if given:
            raise ValueError(
                f"preset={preset} fixes the model; leave out {', '.join(g + '=' for g in given)}"
            )
        return preset
    _check_applies(given, options.get("model", "encoder-layer"), options.get("ffn"))
    return ModelSpec.from_sizes(**options)


# the flags that size a model's learned position table and its FFN: refused where there is none
TABLE_MODELS = ("gpt", "bert")
FFN_FLAGS = ("d_ff", "activation")


def _check_applies(given: tuple[str, ...], model: str, ffn: str | None) -> None:
    """Refuse a size the user set that the model does not read: ``max_len`` (the rows of a
    learned position table: gpt and bert; the transformer's sinusoidal positions and a bare layer
    have none) and ``d_ff`` / ``activation`` with ``ffn='none'``."""
    if "max_len" in given and model not in TABLE_MODELS:
        raise ValueError(
            f"max_len= applies to models gpt and bert (the rows of their learned position table); "
            f"{model!r} has no position table"
        )
    unread = [f for f in FFN_FLAGS if f in given]
    if ffn == "none" and unread:
        it = "them" if len(unread) > 1 else "it"
        raise ValueError(
            f"{' and '.join(f + '=' for f in unread)}: ffn=none has no FFN to size; leave {it} out"
        )
