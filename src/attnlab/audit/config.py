"""What an audit is about: a model (a :class:`~attnlab.nn.BlockConfig` stacked into one of the
:data:`MODELS`) and, for shapes and cost, a :class:`Workload` (batch, sequence, causal, window).

Symbols: ``d = d_model``, ``h`` heads, ``h_kv`` key/value heads (GQA; ``h_kv = h`` is plain
multi-head attention, ``h_kv = 1`` is MQA), ``d_k = d_v = d / h``, ``f = d_ff``, ``L`` layers,
``V`` vocabulary, ``n_ctx = max_len``. Everything is validated on construction, so a bad size is a
``ValueError`` naming the argument and its value (the CLI turns it into exit status 2).

An audit accepts any of: a :class:`ModelSpec`; a :class:`~attnlab.nn.BlockConfig` (one encoder
layer); a model config (:class:`~attnlab.models.GPTConfig`, ``BertConfig``,
``TransformerConfig``); or a preset name from :data:`attnlab.audit.presets.PRESETS`
(:func:`attnlab.audit.spec.model_spec` turns any of them into a ModelSpec).
"""

from __future__ import annotations

import dataclasses

from attnlab._checks import choice, optional_positive_int, positive_int
from attnlab.names import AUDITED
from attnlab.nn.config import BlockConfig

# whole models with embeddings (they need a vocabulary): the families of attnlab.models.registry
# that the audits describe (attnlab.names.AUDITED, read without torch), after the two bare layers
WHOLE_MODELS = AUDITED
MODELS = ("encoder-layer", "decoder-layer", *WHOLE_MODELS)
CROSS_MODELS = ("decoder-layer", "transformer")  # models with cross-attention over a source of length S

# the head each model has instead of GPT's logits matrix (which only a GPT can untie from E)
_HEADS = {
    "encoder-layer": "no head",
    "decoder-layer": "no head",
    "transformer": "a generator (share_embeddings ties it)",
    "bert": "a pooler, no logits",
}

# What each model's block is unless told otherwise (the architecture attnlab.models builds).
MODEL_BLOCKS: dict[str, dict] = {
    "encoder-layer": {},
    "decoder-layer": {},
    "transformer": {"positions": "sinusoidal"},
    "gpt": {"norm_place": "pre", "activation": "gelu", "positions": "learned"},
    "bert": {"activation": "gelu", "positions": "learned", "norm_eps": 1e-12},
}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model for the audits: ``layers`` blocks described by ``block``, in a model of kind ``model``.

    ``vocab`` V (``None`` for a bare stack of layers; whole models need one), ``max_len`` n_ctx
    (rows of a learned position table). Tying: ``tie_head`` (gpt: the logits use the token
    embedding transposed, counted once), ``share_embeddings`` (transformer: one ``[V, d]`` matrix is
    the source table, the target table and the generator's weight, as in the original paper;
    the generator keeps its bias ``[V]``). BERT: ``type_vocab`` token-type rows, ``pooler``.
    """

    model: str
    block: BlockConfig
    layers: int = 1
    vocab: int | None = None
    max_len: int = 512
    tie_head: bool = True
    share_embeddings: bool = False
    type_vocab: int = 2
    pooler: bool = True

    def __post_init__(self) -> None:
        choice("model", self.model, MODELS)
        if not isinstance(self.block, BlockConfig):
            raise ValueError(f"block must be an attnlab.nn.BlockConfig, got {type(self.block).__name__}")
        positive_int("layers", self.layers)
        optional_positive_int("vocab", self.vocab)
        positive_int("max_len", self.max_len)
        positive_int("type_vocab", self.type_vocab)
        for flag in ("tie_head", "share_embeddings", "pooler"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        if self.model in WHOLE_MODELS and self.vocab is None:
            raise ValueError(f"model {self.model!r} needs a vocabulary size: pass vocab=")
        if self.share_embeddings and self.model != "transformer":
            raise ValueError("share_embeddings applies to model 'transformer' (source, target and generator)")
        if not self.tie_head and self.model != "gpt":
            raise ValueError(
                f"tie_head=False (an untied head) applies to model 'gpt' (its logits matrix W [d, V]); "
                f"{self.model!r} has {_HEADS[self.model]}"
            )
        if self.model == "bert" and self.block.norm_place != "post":
            raise ValueError("model 'bert' is post-norm; norm='pre' does not apply")

    # the notes' symbols, read by every audit
    @property
    def d_model(self) -> int:
        return self.block.d_model

    @property
    def heads(self) -> int:
        return self.block.num_heads

    @property
    def kv_heads(self) -> int | None:
        return self.block.num_kv_heads

    @property
    def h_kv(self) -> int:
        """Key/value heads ``h_kv`` (``h`` unless GQA/MQA)."""
        return self.block.kv_heads

    @property
    def d_k(self) -> int:
        """Head width ``d_k = d_v = d / h``."""
        return self.block.head_dim

    @property
    def d_ff(self) -> int:
        return self.block.d_ff

    @property
    def norm(self) -> str:
        """Norm placement, ``post`` or ``pre``."""
        return self.block.norm_place

    @property
    def activation(self) -> str:
        return self.block.activation

    @property
    def bias(self) -> bool:
        """True when every projection has a bias (the block's three switches all on)."""
        b = self.block
        return b.qkv_bias and b.out_bias and b.ffn_bias

    def to_dict(self) -> dict:
        """The report's ``config``: the flat sizes the CLI's flags name, the tying options, the block."""
        return {
            "model": self.model,
            "d_model": self.d_model,
            "heads": self.heads,
            "d_ff": self.d_ff,
            "layers": self.layers,
            "kv_heads": self.kv_heads,
            "norm": self.norm,
            "bias": self.bias,
            "activation": self.activation,
            "vocab": self.vocab,
            "max_len": self.max_len,
            "tie_head": self.tie_head,
            "share_embeddings": self.share_embeddings,
            "block": self.block.to_dict(),
        }

    @classmethod
    def from_sizes(
        cls,
        model: str = "encoder-layer",
        d_model: int = 512,
        heads: int = 8,
        d_ff: int = 2048,
        layers: int = 1,
        kv_heads: int | None = None,
        vocab: int | None = None,
        max_len: int = 512,
        **block: object,
    ) -> ModelSpec:
        """The spec the CLI's flags describe: sizes, then any :class:`BlockConfig` field or tying option.

        ``norm`` is the placement (``post`` | ``pre``, the CLI's ``--norm``), ``norm_kind`` the norm
        (``layer`` | ``rms``), ``bias=False`` switches every bias off; other keywords are
        :class:`BlockConfig` fields (``ffn``, ``activation``, ``qkv_bias``, ...) or the tying options
        of :class:`ModelSpec`. ``None`` means the model's default (:data:`MODEL_BLOCKS`: GPT is
        pre-norm GELU, BERT GELU with eps 1e-12, the rest post-norm ReLU).
        """
        choice("model", model, MODELS)
        d_model, heads = positive_int("d_model", d_model), positive_int("heads", heads)
        if d_model % heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by heads={heads} (each head needs d_k = d_model / heads)"
            )
        if kv_heads is not None and heads % positive_int("kv_heads", kv_heads):
            raise ValueError(
                f"heads={heads} is not divisible by kv_heads={kv_heads} "
                f"(each key/value head serves heads / kv_heads query heads)"
            )
        spec_fields = {"tie_head", "share_embeddings", "type_vocab", "pooler"}
        extra = {k: block.pop(k) for k in list(block) if k in spec_fields and block[k] is not None}
        fields = dict(MODEL_BLOCKS[model])
        if block.get("norm") is not None:
            fields["norm_place"] = choice("norm", block["norm"], ("post", "pre"))
        if block.get("norm_kind") is not None:
            fields["norm"] = block["norm_kind"]
        if block.get("bias") is False:
            fields.update(qkv_bias=False, out_bias=False, ffn_bias=False)
        known = {f.name for f in dataclasses.fields(BlockConfig)}
        for k, v in block.items():
            if k in ("norm", "norm_kind", "bias"):
                continue
            if k not in known:
                raise ValueError(f"unknown option {k!r}; block fields are {sorted(known)}")
            if v is not None:
                fields[k] = v
        b = BlockConfig(
            d_model=positive_int("d_model", d_model),
            num_heads=positive_int("heads", heads),
            d_ff=positive_int("d_ff", d_ff),
            num_kv_heads=optional_positive_int("kv_heads", kv_heads),
            **fields,
        )
        return cls(model, b, layers=layers, vocab=vocab, max_len=max_len, **extra)


@dataclasses.dataclass(frozen=True)
class Workload:
    """What the model runs on: ``batch`` B sequences of ``seq`` T tokens; ``src_seq`` S is the source
    (memory) length of decoder-layer and transformer (``None``: S = T); ``causal`` self-attention;
    ``window`` W: a causal sliding window of W keys (W <= T)."""

    seq: int = 128
    batch: int = 1
    src_seq: int | None = None
    causal: bool = False
    window: int | None = None

    def __post_init__(self) -> None:
        positive_int("seq", self.seq)
        positive_int("batch", self.batch)
        optional_positive_int("src_seq", self.src_seq)
        optional_positive_int("window", self.window)
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be true or false, got {self.causal!r}")

    @property
    def S(self) -> int:
        """Source length (``src_seq``, or ``seq`` when not given)."""
        return self.seq if self.src_seq is None else self.src_seq


# positions computed from the index (or none at all): an input past max_len runs, but past the context
COMPUTED_POSITIONS = {
    "none": "the model has no position signal",
    "sinusoidal": "sinusoidal positions are computed from the index, not looked up",
    "rope": "RoPE rotations are computed from the index, not looked up",
    "alibi": "ALiBi's biases are computed from the distance, not looked up",
}


def fit_positions(a: ModelSpec, w: Workload) -> tuple[ModelSpec, str | None]:
    """``(spec to run, note)``: the model's spec with ``max_len`` covering the input's ``max(T, S)``
    tokens, and a note when the input is longer than the model's own ``max_len`` (n_ctx).

    Learned absolute positions (gpt, bert) are the rows of a ``[n_ctx, d]`` table, which has no row
    past n_ctx: a longer input is a ``ValueError`` naming the limit (the table is never enlarged).
    Computed positions (sinusoidal, RoPE, ALiBi) or none: the input runs as given and the note says it
    is past the context the model was configured for. Bare layers (encoder-layer, decoder-layer) take
    no positions: no note. The report keeps the model's own ``max_len``; only the built module grows.
    """
    tokens = max(w.seq, w.S)
    if tokens <= a.max_len:
        return a, None
    what = f"seq={w.seq}" if w.seq >= w.S else f"src_seq={w.S}"
    kind = a.block.positions
    if a.model in WHOLE_MODELS and kind == "learned":
        raise ValueError(
            f"{what} is longer than the model's learned position table (max_len={a.max_len:,} positions): "
            f"learned absolute positions have no row past it; use at most {a.max_len:,} tokens"
        )
    grown = dataclasses.replace(a, max_len=tokens)
    if a.model not in WHOLE_MODELS:
        return grown, None
    return grown, (
        f"{what} is past the model's max_len={a.max_len:,} (the context it was configured for): "
        f"{COMPUTED_POSITIONS.get(kind, kind)}, so the audit runs {tokens:,} tokens; whether the model "
        "works that far is another question"
    )


def check_no_vocab(a: ModelSpec, audit: str) -> None:
    """Refuse a vocabulary on a bare stack of layers in an audit that has no use for it (``audit``:
    "params" counts no embedding table, "shapes" runs ``[B, T, d]`` vectors); the cost audit does
    use it (the logits B·T·d·V)."""
    if a.vocab is not None and a.model not in WHOLE_MODELS:
        raise ValueError(
            f"vocab applies to the {audit} of transformer, gpt and bert (their embeddings and logits); "
            f"a bare {a.model} has none (audit cost counts its logits B·T·d·V)"
        )
