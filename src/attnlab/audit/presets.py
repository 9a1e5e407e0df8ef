"""Published model sizes as audit specs: the one registry of presets (``attnlab audit --preset``).

Each :class:`Preset` is a :class:`~attnlab.audit.config.ModelSpec` plus what was published about
it: the count its authors rounded (e.g. the Transformer paper's Table 3 "65M") and the vocabulary
the exact count assumes. Adding a model is one :func:`register` call below; the CLI's ``--preset``
choices, its help and the tests read :data:`PRESETS`.

Exact counts (attnlab's convention: a tied matrix counts once), checked in the tests against the
Hugging Face ``transformers`` models built from the same configs: GPT-2 124,439,808 (head tied to
the token embedding), BERT-base 109,482,240 (with the pooler), all-MiniLM-L6-v2 22,713,216, Llama 2 7B
6,738,415,616, Mistral 7B 7,241,732,096, TinyLlama-1.1B 1,100,048,384, Qwen2-0.5B 494,032,768.
"""

from __future__ import annotations

import dataclasses

from attnlab._checks import did_you_mean
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
        raise ValueError(
            f"preset must be one of {', '.join(PRESETS)}; got {name!r}{did_you_mean(name, PRESETS)}"
        )
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

# The Llama family (Touvron et al. 2023 and its descendants): pre-norm RMSNorm, SwiGLU FFN
# (gate, up and down matrices), rotate-half RoPE, no biases except Qwen2's on Q, K and V; sizes
# from each model's published config.json. RoPE has no parameters, so max_len only sets n_ctx.
_LLAMA = dict(norm="rms", ffn="glu", activation="silu", positions="rope", rope_layout="half")
_NO_BIAS = dict(qkv_bias=False, out_bias=False, ffn_bias=False)
for _name, _f in {
    "llama-2-7b": dict(
        d=4096, h=32, kv=32, f=11008, L=32, V=32000, ctx=4096, theta=10000.0, eps=1e-5, tied=False,
        bias=_NO_BIAS, window=None, pub="7B", what="Llama 2 7B (Meta)",
    ),
    "mistral-7b": dict(
        d=4096, h=32, kv=8, f=14336, L=32, V=32000, ctx=32768, theta=10000.0, eps=1e-5, tied=False,
        bias=_NO_BIAS, window=4096, pub="7.3B", what="Mistral 7B v0.1",
    ),
    "tinyllama": dict(
        d=2048, h=32, kv=4, f=5632, L=22, V=32000, ctx=2048, theta=10000.0, eps=1e-5, tied=False,
        bias=_NO_BIAS, window=None, pub="1.1B", what="TinyLlama-1.1B",
    ),
    "qwen2-0.5b": dict(
        d=896, h=14, kv=2, f=4864, L=24, V=151936, ctx=32768, theta=1e6, eps=1e-6, tied=True,
        bias={**_NO_BIAS, "qkv_bias": True}, window=None, pub="0.5B", what="Qwen2-0.5B",
    ),
}.items():  # fmt: skip
    _block_fields = dict(
        num_kv_heads=_f["kv"], rope_base=_f["theta"], norm_eps=_f["eps"], window=_f["window"]
    )
    register(
        Preset(
            _name,
            ModelSpec(
                "gpt",
                _block("gpt", _f["d"], _f["h"], _f["f"], **_LLAMA, **_f["bias"], **_block_fields),
                _f["L"],
                _f["V"],
                _f["ctx"],
                tie_head=_f["tied"],
            ),
            f"{_f['what']}: {_f['L']} layers, d {_f['d']}, {_f['h']} heads"
            + (f" ({_f['kv']} key/value heads)" if _f["kv"] != _f["h"] else "")
            + f", SwiGLU f {_f['f']}"
            + (f", window {_f['window']}" if _f["window"] else "")
            + (", Q/K/V biases" if _f["bias"]["qkv_bias"] else "")
            + (", tied head" if _f["tied"] else ", untied head"),
            _f["pub"],
            f"{'byte-level BPE' if _f['V'] > 100000 else 'SentencePiece BPE'}, V = {_f['V']:,}; "
            f"RoPE, n_ctx = {_f['ctx']:,}",
        )
    )
