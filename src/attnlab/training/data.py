"""Task examples -> padded id tensors, and the resumable order in which training sees them.

Seq2seq models get ``src = x + [EOS]``, ``tgt_in = [BOS] + y`` (teacher forcing: the decoder reads
the gold prefix) and ``tgt_out = y + [EOS]``. A decoder-only GPT gets one sequence
``[BOS] + x + [SEP] + y + [EOS]`` with the loss only on the ``y + [EOS]`` part.

The batch at step ``s`` is a pure function of ``(seed, s)``: the training set is shuffled once
per epoch with a generator seeded by ``(seed, epoch)``, so a resumed run sees exactly the batches
an uninterrupted run would. Under DDP, rank ``r`` of ``W`` takes rows ``r, r+W, ...`` of the
global batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from attnlab.tasks import BOS, EOS, PAD, SEP, CharTokenizer, Example, Task
from attnlab.tasks.dates import Dates, source_lengths


def pad_rows(rows: Sequence[Sequence[int]], width: int | None = None) -> torch.Tensor:
    """Right-pad integer rows with ``PAD`` -> LongTensor ``[N, width]``."""
    width = max((len(r) for r in rows), default=0) if width is None else width
    out = torch.full((len(rows), max(width, 1)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def encode_seq2seq(examples: Sequence[Example], tok: CharTokenizer):
    """-> ``(src [N, S], tgt_in [N, T], tgt_out [N, T])`` LongTensors, PAD-padded."""
    src = pad_rows([tok.encode(e.src) + [EOS] for e in examples])
    tgt_in = pad_rows([[BOS] + tok.encode(e.tgt) for e in examples])
    tgt_out = pad_rows([tok.encode(e.tgt) + [EOS] for e in examples])
    return src, tgt_in, tgt_out


def gpt_prompt(text: str, tok: CharTokenizer) -> list[int]:
    """The prompt a GPT continues: ``[BOS] + x + [SEP]``."""
    return [BOS] + tok.encode(text) + [SEP]


def encode_gpt(examples: Sequence[Example], tok: CharTokenizer):
    """-> ``(ids [N, L], labels [N, L])``: ``ids`` is the sequence without its last token,
    ``labels`` the next token at each position, PAD (ignored by the loss) except on ``y + [EOS]``."""
    ids, labels = [], []
    for e in examples:
        prompt = gpt_prompt(e.src, tok)
        seq = prompt + tok.encode(e.tgt) + [EOS]
        ids.append(seq[:-1])
        # position j predicts seq[j+1]; the target part starts at seq index len(prompt)
        labels.append([PAD] * (len(prompt) - 1) + seq[len(prompt) :])
    return pad_rows(ids), pad_rows(labels)


def longest_source(task: Task) -> int | None:
    """The most symbols a source of ``task`` can have (None: the task does not say)."""
    if isinstance(task, Dates):  # its formats' lengths, cut at max_len
        fits = [n for n in source_lengths(task.formats) if task.max_len is None or n <= task.max_len]
        return max(fits, default=None)
    most = task.params().get("max_len")
    return most if isinstance(most, int) else None


def positions_needed(task: Task, decoder_only: bool) -> int | None:
    """Tokens in the longest sequence a model reads for ``task`` (the positions it must have), as
    encoded above: ``x + [EOS]`` and ``[BOS] + y`` for seq2seq, ``[BOS] + x + [SEP] + y`` for a GPT
    (its input; the final EOS is only a label). None when the task does not bound its sources."""
    longest = longest_source(task)
    if longest is None:
        return None
    target = task.max_target_len("a" * longest)
    return longest + target + 2 if decoder_only else max(longest, target) + 1


def _trim(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Drop the all-PAD columns at the right of each tensor."""
    out = []
    for t in tensors:
        used = (t != PAD).any(0).nonzero()
        width = int(used.max()) + 1 if len(used) else 1
        out.append(t[:, :width])
    return tuple(out)


class TrainData:
    """The encoded training set and the seeded, resumable batch order.

    Args:
        examples: the training examples (fixed for the run).
        tok: the task's tokenizer.
        decoder_only: encode for a GPT (one sequence) instead of (src, tgt_in, tgt_out).
        batch_size: global batch size ``B`` (summed over DDP ranks).
        seed: shuffling seed.
    """

    def __init__(
        self,
        examples: Sequence[Example],
        tok: CharTokenizer,
        *,
        decoder_only: bool,
        batch_size: int,
        seed: int,
    ):
        if batch_size > len(examples):
            raise ValueError(
                f"batch size {batch_size} is larger than the training set ({len(examples)} examples)"
            )
        self.n, self.batch_size, self.seed = len(examples), batch_size, seed
        self.decoder_only = decoder_only
        self.tensors = encode_gpt(examples, tok) if decoder_only else encode_seq2seq(examples, tok)
        self.batches_per_epoch = self.n // batch_size  # the last partial batch is dropped

    def indices(self, step: int) -> np.ndarray:
        """Row indices of the global batch at ``step`` (0-based)."""
        epoch, i = divmod(step, self.batches_per_epoch)
        perm = np.random.default_rng([self.seed, epoch, 0xBA7C]).permutation(self.n)
        return perm[i * self.batch_size : (i + 1) * self.batch_size]

    def batch(self, step: int, rank: int = 0, world: int = 1) -> tuple[torch.Tensor, ...]:
        """This rank's share of the batch at ``step``, right-trimmed of all-PAD columns."""
        idx = torch.as_tensor(self.indices(step)[rank::world])
        return _trim(*(t[idx] for t in self.tensors))
