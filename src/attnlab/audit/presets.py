"""Published model sizes as audit specs: the one registry of presets (``attnlab audit --preset``).

Each :class:`Preset` is a :class:`~attnlab.audit.config.ModelSpec` plus what was published about
it: the count its authors rounded (e.g. the Transformer paper's Table 3 "65M") and the vocabulary
the exact count assumes. Adding a model is one :func:`register` call below; the CLI's ``--preset``
choices, its help and the tests read :data:`PRESETS`.

Exact counts (attnlab's convention: a tied matrix counts once), checked in the tests against the
Hugging Face ``transformers`` models built from the same configs: GPT-2 124,439,808 (head tied to
the token embedding), BERT-base 109,482,240 (with the pooler), all-MiniLM-L6-v2 22,713,216.
"""

from __future__ import annotations

import dataclasses

from attnlab.audit.config import MODEL_BLOCKS, ModelSpec
from attnlab.nn.config import BlockConfig


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named model: ``spec`` (what the audits count), ``description`` (one line: what and from
    where), ``published`` (the rounded count its authors give, or ``None``) and ``vocab_note`` (the
    vocabulary the exact count assumes)."""

    name: str
    spec: ModelSpec
    description: str
    published: str | None = None
    vocab_note: str = ""


PRESETS: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    """Add ``preset`` to :data:`PRESETS` (a name may be registered once)."""
    if preset.name in PRESETS:
        raise ValueError(f"preset {preset.name!r} is registered twice")
    PRESETS[preset.name] = preset
    return preset


def preset(name: str) -> Preset:
    """The preset called ``name``; ``ValueError`` listing the names otherwise."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}; got {name!r}")
    return PRESETS[name]


def _block(model: str, d: int, h: int, f: int, **fields) -> BlockConfig:
    return BlockConfig(d_model=d, num_heads=h, d_ff=f, **{**MODEL_BLOCKS[model], **fields})


# GPT-2 (Radford et al. 2019): pre-norm, GELU (tanh form), learned positions, head tied to the
# token embedding; byte-level BPE of 50,257 tokens, 1,024 positions, f = 4d.
for _name, (_d, _h, _L, _pub) in {
    "gpt2": (768, 12, 12, "117M (later corrected to 124M)"),
    "gpt2-medium": (1024, 16, 24, "345M"),
    "gpt2-large": (1280, 20, 36, "762M"),
    "gpt2-xl": (1600, 25, 48, "1542M"),
}.items():
    register(
        Preset(
            _name,
            ModelSpec("gpt", _block("gpt", _d, _h, 4 * _d, activation="gelu_tanh"), _L, 50257, 1024),
            f"GPT-2 {_name[5:] or 'small'}: {_L} layers, d {_d}, {_h} heads, tied head",
            _pub,
            "byte-level BPE, V = 50,257; n_ctx = 1,024",
        )
    )

# BERT (Devlin et al. 2019): post-norm GELU encoder, learned positions, 2 token types, pooler.
for _name, (_d, _h, _L, _pub, _what) in {
    "bert-base": (768, 12, 12, "110M", "BERT-base (uncased)"),
    "bert-large": (1024, 16, 24, "340M", "BERT-large (uncased)"),
    "minilm": (384, 12, 6, "22M", "all-MiniLM-L6-v2 (the sentence encoder attnlab embed runs)"),
}.items():
    register(
        Preset(
            _name,
            ModelSpec("bert", _block("bert", _d, _h, 4 * _d), _L, 30522, 512),
            f"{_what}: {_L} layers, d {_d}, {_h} heads, with the pooler",
            _pub,
            "WordPiece, V = 30,522; 512 positions; 2 token types",
        )
    )

# The Transformer (Vaswani et al. 2017), Table 3: post-norm ReLU, sinusoidal positions, one
# embedding matrix shared by source, target and the pre-softmax linear (section 3.4).
for _name, (_d, _h, _f, _pub) in {
    "transformer-base": (512, 8, 2048, "65M"),
    "transformer-big": (1024, 16, 4096, "213M"),
}.items():
    register(
        Preset(
            _name,
            ModelSpec("transformer", _block("transformer", _d, _h, _f), 6, 37000, 512, share_embeddings=True),
            f"the Transformer paper's {_name[12:]} model (Table 3): 6 + 6 layers, d {_d}, {_h} heads, "
            f"f {_f}, shared embeddings",
            _pub,
            "shared source-target BPE, V = 37,000 (WMT 2014 EN-DE)",
        )
    )
