"""The recurrent encoder-decoders of the notes: the fixed-context bottleneck and its attention fix.

``Seq2SeqRNN`` (kind ``"seq2seq-rnn"``) models p(y | x) = prod_t p(y_t | y_<t, c): the encoder
reads the source and hands the decoder ONLY its final state c (Cho et al. 2014; Sutskever et al.
2014). c initialises the decoder and is fed, with the previous target token, into every decoder
step; nothing else about the source reaches the decoder. Every source, 3 words or 30, is
squeezed into the same ``layers x hidden`` numbers: the bottleneck.

``AttentionRNN`` (kind ``"attention-rnn"``) keeps every encoder annotation h_i (a bidirectional
encoder, ``hidden // 2`` units per direction, so h_i has ``hidden`` numbers) and lets the decoder
look back at all of them at every step:

- ``"bahdanau"``: c_t = Attn(s_{t-1}, h) with the additive score; s_t = RNN([E y_{t-1}; c_t], s_{t-1});
  logits from the deep output [s_t; c_t; E y_{t-1}] (Bahdanau et al. 2015).
- ``"luong-dot" | "luong-general" | "luong-concat"``: s_t = RNN(E y_{t-1}, s_{t-1});
  c_t = Attn(s_t, h); h~_t = tanh(W_c [c_t; s_t]); logits = W_s h~_t (Luong et al. 2015, global
  attention without input feeding, so teacher forcing runs over all target steps at once).

Both follow the seq2seq protocol of attnlab.models: ``forward(src [B, S], tgt_in [B, T]) -> logits
[B, T, V]`` (teacher forcing: the decoder is fed the gold previous tokens; the alignment matrix
``[B, T, S]`` of AttentionRNN is its hook point ``attention.weights``), and ``start(src) -> state``,
``step(tokens [B], state) -> (logits [B, V], state)``, ``reorder(state, index)`` for
attnlab.decoding. Sources are right-padded with ``pad_id``; the encoder packs them
(``pack_padded_sequence``), so padding changes neither c nor the annotations' alignment weights.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.models.base import ModelConfig, SavableModel, check_choice, check_positive, check_probability
from attnlab.names import CELLS
from attnlab.names import RNN_ATTENTIONS as ATTENTIONS
from attnlab.nn.attention import AdditiveAttention, LuongAttention
from attnlab.nn.hooks import HookPoints

# An RNN state: a tensor [layers, B, H] (GRU) or a pair of them (LSTM's (h, c)).
State = Any


@dataclasses.dataclass(frozen=True)
class RNNConfig(ModelConfig):
    """Config of the fixed-context :class:`Seq2SeqRNN`.

    ``emb``: embedding width; ``hidden``: RNN state width; ``layers``: stacked RNN layers;
    ``cell``: ``"gru"`` or ``"lstm"``; ``dropout`` on embeddings and between layers."""

    src_vocab: int
    tgt_vocab: int
    emb: int = 64
    hidden: int = 128
    layers: int = 1
    cell: str = "gru"
    dropout: float = 0.0
    pad_id: int = 0

    def __post_init__(self) -> None:
        check_positive(self, "src_vocab", "tgt_vocab", "emb", "hidden", "layers")
        check_choice(self, "cell", CELLS)
        check_probability(self, "dropout")
        if (
            isinstance(self.pad_id, bool)
            or not isinstance(self.pad_id, int)
            or not 0 <= self.pad_id < min(self.src_vocab, self.tgt_vocab)
        ):
            raise ValueError(
                f"{type(self).__name__}.pad_id must be an id in both vocabularies "
                f"(src_vocab={self.src_vocab}, tgt_vocab={self.tgt_vocab}), got {self.pad_id!r}"
            )


@dataclasses.dataclass(frozen=True)
class AttentionRNNConfig(RNNConfig):
    """Config of :class:`AttentionRNN`: :class:`RNNConfig` plus the attention score and its width.

    ``hidden`` is the width of both the annotations h_i (two directions of ``hidden // 2``) and
    the decoder state, so it must be even. ``attn_dim`` (d_a of bahdanau / luong-concat)
    defaults to ``hidden``."""

    attention: str = "bahdanau"
    attn_dim: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "attention", ATTENTIONS)
        if self.hidden % 2:
            raise ValueError(
                f"AttentionRNNConfig.hidden must be even (two directions of hidden // 2), got {self.hidden}"
            )
        if self.attn_dim is not None:
            check_positive(self, "attn_dim")


@dataclasses.dataclass
class RNNDecodeState:
    """What a recurrent decoder carries from step to step (every tensor has the batch in it).

    ``hidden``: decoder state ``[layers, B, H]`` (or LSTM's pair); ``context``: Seq2SeqRNN's fixed
    c ``[B, H]``; ``annotations [B, S, H]``, ``keys`` (the attention's source-only projection)
    and ``src_mask [B, 1, S]``: AttentionRNN's view of the source; ``weights [B, S]``: the
    alignment row of the last step (None before the first)."""

    hidden: State
    context: Tensor | None = None
    annotations: Tensor | None = None
    keys: Tensor | None = None
    src_mask: Tensor | None = None
    weights: Tensor | None = None


def _select(x: Any, index: Tensor, dim: int) -> Any:
    if x is None:
        return None
    if isinstance(x, tuple):
        return tuple(_select(t, index, dim) for t in x)
    return x.index_select(dim, index)


def _top(hidden: State) -> Tensor:
    """The last layer's state ``[B, H]`` of a GRU state or an LSTM (h, c) pair."""
    return (hidden[0] if isinstance(hidden, tuple) else hidden)[-1]


def check_tokens(name: str, ids: Tensor, vocab: int, ndim: int) -> None:
    """``ValueError`` unless ``ids`` is an integer tensor of rank ``ndim`` with ids in ``[0, vocab)``."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32) or ids.dim() != ndim:
        shape = list(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be an integer tensor of rank {ndim}, got {shape}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise ValueError(
            f"{name} holds token ids outside the vocabulary [0, {vocab}): "
            f"min {int(ids.min())}, max {int(ids.max())}"
        )


class _RNNSeq2Seq(SavableModel):
    """What both recurrent models share: embeddings, a packed encoder and the decoding protocol."""

    config: RNNConfig

    @classmethod
    def from_options(cls, vocab_size: int, **o) -> RNNConfig:
        """Every training option is a field of the config under its own name."""
        return cls.config_class(vocab_size, vocab_size, **o)

    def _rnn(self, d_in: int, d_hidden: int, bidirectional: bool = False) -> nn.Module:
        c = self.config
        cls = nn.GRU if c.cell == "gru" else nn.LSTM
        return cls(
            d_in,
            d_hidden,
            c.layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=c.dropout if c.layers > 1 else 0.0,
        )

    def _source(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Check ``src [B, S]`` (ids in range, right-padded, no empty source).

        Returns ``(lengths [B], mask [B, S])``."""
        c = self.config
        check_tokens("src", src, c.src_vocab, 2)
        mask = src != c.pad_id  # [B, S]
        if src.shape[1] == 0:
            raise ValueError(f"src {list(src.shape)} has an empty source (no position)")
        if not bool(mask[:, 0].all()):
            row = int((~mask[:, 0]).nonzero()[0, 0])
            if not bool(mask[row].any()):
                raise ValueError(f"src row {row} is all padding (pad_id {c.pad_id}): an empty source")
            raise ValueError(
                f"src row {row} starts with padding (pad_id {c.pad_id}): src must be right-padded, "
                "real tokens first"
            )
        if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise ValueError(
                f"src {list(src.shape)} must be right-padded: pad_id={c.pad_id} only after "
                f"the last real token of each row"
            )
        return mask.sum(dim=1), mask

    def _encode_packed(self, src: Tensor) -> tuple[Tensor, State, Tensor]:
        """Run the encoder over the real tokens only.

        Returns ``(outputs [B, S, H_enc], final state, mask [B, S])``."""
        lengths, mask = self._source(src)
        x = self.drop(self.src_embed(src))  # [B, S, emb]
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, final = self.encoder(packed)
        S = src.shape[1]
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)  # [B, S, H_enc]
        return outputs, final, mask

    def _check_tgt(self, tgt: Tensor, ndim: int, batch: int | None = None) -> None:
        check_tokens("tgt_in" if ndim == 2 else "tokens", tgt, self.config.tgt_vocab, ndim)
        if batch is not None and tgt.shape[0] != batch:
            raise ValueError(
                f"{'tgt_in' if ndim == 2 else 'tokens'} has batch {tgt.shape[0]} "
                f"but the source has batch {batch}"
            )

    def reorder(self, state: RNNDecodeState, index: Tensor) -> RNNDecodeState:
        """Pick batch rows ``index [B']`` of every tensor in ``state`` (beam search)."""
        return RNNDecodeState(
            hidden=_select(state.hidden, index, 1),
            context=_select(state.context, index, 0),
            annotations=_select(state.annotations, index, 0),
            keys=_select(state.keys, index, 0),
            src_mask=_select(state.src_mask, index, 0),
            weights=_select(state.weights, index, 0),
        )


class Seq2SeqRNN(_RNNSeq2Seq):
    """Fixed-context encoder-decoder: p(y_t | y_<t, c) with c the encoder's final state."""

    kind = "seq2seq-rnn"
    config_class = RNNConfig
    OPTIONS = {"emb": 32, "hidden": 64, "layers": 1, "cell": "gru", "dropout": 0.0}

    def __init__(self, config: RNNConfig) -> None:
        super().__init__()
        if not isinstance(config, RNNConfig):
            raise ValueError(f"Seq2SeqRNN needs an RNNConfig, got {type(config).__name__}")
        self.config = c = config
        self.drop = nn.Dropout(c.dropout)
        self.src_embed = nn.Embedding(c.src_vocab, c.emb, padding_idx=c.pad_id)
        self.encoder = self._rnn(c.emb, c.hidden)
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.emb, padding_idx=c.pad_id)
        self.decoder = self._rnn(c.emb + c.hidden, c.hidden)  # input [E y_{t-1}; c]
        self.out = nn.Linear(c.hidden, c.tgt_vocab)

    def encode(self, src: Tensor) -> State:
        """The fixed context: the encoder's final state over each source's real tokens.

        ``src [B, S]`` -> ``[layers, B, hidden]`` (GRU) or the LSTM pair (h_n, c_n)."""
        _, final, _ = self._encode_packed(src)
        return final

    def decode(self, context: State, tgt_in: Tensor) -> Tensor:
        """Teacher-forced decoder given ONLY the context: ``tgt_in [B, T]`` -> logits ``[B, T, V]``.

        s_0 = c; s_t = RNN([E y_{t-1}; c_top], s_{t-1}); logits_t = W_o s_t + b_o."""
        c_top = _top(context)  # [B, H]
        self._check_tgt(tgt_in, 2, c_top.shape[0])
        y = self.drop(self.tgt_embed(tgt_in))  # [B, T, emb]
        x = torch.cat([y, c_top[:, None, :].expand(-1, y.shape[1], -1)], dim=-1)  # [B, T, emb + H]
        states, _ = self.decoder(x, context)  # [B, T, H]
        return self.out(self.drop(states))  # [B, T, V]

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: ``src [B, S]``, ``tgt_in [B, T]`` (gold previous tokens) -> logits ``[B, T, V]``.

        This model has no attention (and no hook points): its decoder sees the source only through c."""
        return self.decode(self.encode(src), tgt_in)

    def start(self, src: Tensor) -> RNNDecodeState:
        """Encode ``src [B, S]``; the state holds s_0 = c and c itself."""
        context = self.encode(src)
        return RNNDecodeState(hidden=context, context=_top(context))

    def step(self, tokens: Tensor, state: RNNDecodeState) -> tuple[Tensor, RNNDecodeState]:
        """One decoder step: previous tokens ``[B]`` -> ``(logits [B, V], new state)``."""
        self._check_tgt(tokens, 1, state.context.shape[0])
        y = self.drop(self.tgt_embed(tokens))  # [B, emb]
        x = torch.cat([y, state.context], dim=-1)[:, None, :]  # [B, 1, emb + H]
        out, hidden = self.decoder(x, state.hidden)  # out [B, 1, H]
        logits = self.out(self.drop(out[:, 0]))  # [B, V]
        return logits, dataclasses.replace(state, hidden=hidden)


class AttentionRNN(HookPoints, _RNNSeq2Seq):
    """Bidirectional encoder + decoder with Bahdanau or Luong attention over all annotations.

    Hook point ``attention.weights``: the alignment ``alpha [B, T, S]`` of a teacher-forced forward
    (row t: output step t's weights over the source positions; rows sum to 1, zero on padding). It
    is recorded once the decoder has run (a Bahdanau decoder uses row t at step t), so
    :func:`~attnlab.nn.capture` reads it and a :func:`~attnlab.nn.patch` of it changes no logit.
    """

    POINTS = {"attention.weights": "[B, T, S]"}

    kind = "attention-rnn"
    config_class = AttentionRNNConfig
    OPTIONS = {**Seq2SeqRNN.OPTIONS, "attention": "bahdanau"}

    def __init__(self, config: AttentionRNNConfig) -> None:
        super().__init__()
        if not isinstance(config, AttentionRNNConfig):
            raise ValueError(f"AttentionRNN needs an AttentionRNNConfig, got {type(config).__name__}")
        self.config = c = config
        H = c.hidden
        d_a = c.attn_dim or H
        self.drop = nn.Dropout(c.dropout)
        self.src_embed = nn.Embedding(c.src_vocab, c.emb, padding_idx=c.pad_id)
        self.encoder = self._rnn(c.emb, H // 2, bidirectional=True)  # h_i = [fwd_i; bwd_i], H numbers
        self.bridge = nn.Linear(H, H)  # s_0 = tanh(W_b [fwd_S; bwd_1] + b) per layer
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.emb, padding_idx=c.pad_id)
        if c.attention == "bahdanau":
            self.attention = AdditiveAttention(H, H, d_a)
            self.decoder = self._rnn(c.emb + H, H)  # input [E y_{t-1}; c_t]
            self.out = nn.Linear(H + H + c.emb, c.tgt_vocab)  # deep output [s_t; c_t; E y_{t-1}]
        else:
            kind = c.attention.removeprefix("luong-")
            self.attention = LuongAttention(H, H, kind, d_a=d_a if kind == "concat" else None)
            self.decoder = self._rnn(c.emb, H)
            self.combine = nn.Linear(2 * H, H, bias=False)  # h~_t = tanh(W_c [c_t; s_t])
            self.out = nn.Linear(H, c.tgt_vocab)

    # -- encoder ---------------------------------------------------------------------------
    def start(self, src: Tensor) -> RNNDecodeState:
        """Encode ``src [B, S]``: annotations ``h [B, S, H]``, the attention's keys, the source
        mask and the decoder's initial state s_0 = tanh(W_b [fwd_S; bwd_1] + b)."""
        c = self.config
        annotations, final, mask = self._encode_packed(src)  # [B, S, H]
        h_n = final[0] if isinstance(final, tuple) else final  # [layers * 2, B, H/2]
        B = src.shape[0]
        both = h_n.view(c.layers, 2, B, c.hidden // 2)  # [layers, 2, B, H/2]
        both = torch.cat([both[:, 0], both[:, 1]], dim=-1)  # [layers, B, H]
        s0 = torch.tanh(self.bridge(both))  # [layers, B, H]
        hidden = (s0, torch.zeros_like(s0)) if c.cell == "lstm" else s0
        return RNNDecodeState(
            hidden=hidden,
            annotations=annotations,
            keys=self.attention.project_keys(annotations),
            src_mask=mask[:, None, :],
        )

    # -- decoder ---------------------------------------------------------------------------
    def _bahdanau_step(self, y: Tensor, state: RNNDecodeState) -> tuple[Tensor, Tensor, State]:
        """y = E y_{t-1} ``[B, emb]`` -> (deep-output features ``[B, 2H + emb]``, alpha_t ``[B, S]``, s_t)."""
        s_prev = _top(state.hidden)[:, None, :]  # [B, 1, H]
        # c_t [B, 1, H], alpha_t [B, 1, S]
        ctx, w = self.attention.attend(s_prev, state.annotations, state.keys, state.src_mask)
        x = torch.cat([y[:, None, :], ctx], dim=-1)  # [B, 1, emb + H]
        out, hidden = self.decoder(x, state.hidden)  # out [B, 1, H]
        return torch.cat([out[:, 0], ctx[:, 0], y], dim=-1), w[:, 0], hidden

    def _luong_output(self, states: Tensor, state: RNNDecodeState) -> tuple[Tensor, Tensor]:
        """Decoder states ``s [B, T, H]`` -> (h~ ``[B, T, H]``, alpha ``[B, T, S]``)."""
        # c [B, T, H], alpha [B, T, S]
        ctx, w = self.attention.attend(states, state.annotations, state.keys, state.src_mask)
        return torch.tanh(self.combine(torch.cat([ctx, states], dim=-1))), w  # [B, T, H]

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: ``src [B, S]``, ``tgt_in [B, T]`` (gold previous tokens) -> logits ``[B, T, V]``;
        the alignment ``alpha [B, T, S]`` goes to the hook point ``attention.weights``."""
        state = self.start(src)
        self._check_tgt(tgt_in, 2, src.shape[0])
        y = self.drop(self.tgt_embed(tgt_in))  # [B, T, emb]
        if self.config.attention == "bahdanau":
            feats, weights = [], []
            for t in range(tgt_in.shape[1]):  # s_t depends on s_{t-1}: one step at a time
                f, w, state.hidden = self._bahdanau_step(y[:, t], state)
                feats.append(f)
                weights.append(w)
            logits = self.out(self.drop(torch.stack(feats, dim=1)))  # [B, T, V]
            if self._hooks is not None:  # the rows are stacked only for a reader
                attn = torch.stack(weights, dim=1) if weights else y.new_zeros(y.shape[0], 0, src.shape[1])
                self._at("attention.weights", attn)  # [B, T, S]
        else:
            states, _ = self.decoder(y, state.hidden)  # [B, T, H]
            h_tilde, attn = self._luong_output(states, state)  # [B, T, H], [B, T, S]
            logits = self.out(self.drop(h_tilde))  # [B, T, V]
            self._at("attention.weights", attn)  # [B, T, S]
        return logits

    def step(self, tokens: Tensor, state: RNNDecodeState) -> tuple[Tensor, RNNDecodeState]:
        """One decoder step: previous tokens ``[B]`` -> ``(logits [B, V], new state)``."""
        self._check_tgt(tokens, 1, state.annotations.shape[0])
        y = self.drop(self.tgt_embed(tokens))  # [B, emb]
        if self.config.attention == "bahdanau":
            f, w, hidden = self._bahdanau_step(y, state)
            return self.out(self.drop(f)), dataclasses.replace(state, hidden=hidden, weights=w)  # [B, V]
        out, hidden = self.decoder(y[:, None, :], state.hidden)  # [B, 1, H]
        h_tilde, w = self._luong_output(out, state)  # [B, 1, H], [B, 1, S]
        new = dataclasses.replace(state, hidden=hidden, weights=w[:, 0])
        return self.out(self.drop(h_tilde[:, 0])), new  # [B, V]
