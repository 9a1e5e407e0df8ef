"""Pruning MiniLM's heads: importance from paraphrase pairs, agreement on held-out sentences.

Importance (Michel et al.): the loss MiniLM was trained with, in-batch contrastive ranking over
paraphrase pairs (softmax over 20 cos(a_i, b_j), the target j = i), on :data:`CALIBRATION`. The
metric, on the separate :data:`HELD_OUT` sentences: the mean cosine between each sentence's pruned
and unpruned embedding, and top-1 retrieval agreement (the share of sentences whose nearest other
sentence is the same under both models).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab._checks import positive_int
from attnlab.interp.ablation import head_importance
from attnlab.interp.prune import pruning_curve, removal_order
from attnlab.models.load import load
from attnlab.models.sentence import pool
from attnlab.tasks.tokenize import wrap

RANDOM_ORDERS = 5  # random removal orders the importance order is compared against

CALIBRATION = [
    ("A man is playing a guitar.", "Someone plays the guitar."),
    ("The children are running in the park.", "Kids run around the park."),
    ("She is cooking dinner for her family.", "A woman prepares an evening meal for her relatives."),
    ("The train was late this morning.", "This morning the train arrived behind schedule."),
    ("He fixed the broken bicycle.", "The damaged bike was repaired by him."),
    ("It is raining heavily outside.", "There is a downpour outdoors."),
    ("The company reported higher profits.", "The firm announced increased earnings."),
    ("A dog is catching a frisbee.", "The dog grabs a flying disc."),
    ("They planted trees along the river.", "Trees were planted beside the river by them."),
    ("The museum opens at nine.", "The museum's doors open at 9 a.m."),
    ("I lost my keys yesterday.", "Yesterday I misplaced my keys."),
    ("The baby is sleeping quietly.", "The infant sleeps peacefully."),
    ("Scientists discovered a new species of frog.", "Researchers found a previously unknown frog."),
    ("The road is closed for repairs.", "Repairs have shut the road."),
    ("She won the chess tournament.", "She came first in the chess competition."),
    ("The soup is too salty.", "There is too much salt in the soup."),
]

HELD_OUT = [
    "A woman is slicing an onion.",
    "Someone is cutting vegetables in the kitchen.",
    "The stock market fell sharply today.",
    "Share prices dropped steeply this afternoon.",
    "A cat sleeps on the warm windowsill.",
    "The kitten is napping in the sun by the window.",
    "The team celebrated their victory.",
    "The players cheered after winning the match.",
    "He is reading a book in the library.",
    "A man studies a novel among the bookshelves.",
    "The plane landed safely despite the storm.",
    "Despite bad weather the aircraft touched down without harm.",
    "Attention lets a model look at every input token.",
    "Each output can weigh all of the input positions.",
    "The bridge was built in the nineteenth century.",
    "Construction of the bridge dates from the 1800s.",
    "She painted the fence white.",
    "The fence got a fresh coat of white paint from her.",
    "Two boys are playing football on the beach.",
    "Kids kick a ball around on the sand.",
    "The doctor examined the patient carefully.",
    "The physician gave the sick man a thorough check-up.",
    "Fresh bread smells wonderful.",
    "The scent of newly baked loaves is lovely.",
]


def _encode(model, tokenizer, sentences: list[str]) -> torch.Tensor:
    """Mean-pooled, L2-normalised embeddings ``[N, d]`` through ``model.forward`` (which a pruned or
    masked model runs like any other), one padded batch (``tokenizer``: any attnlab tokenizer, or a
    ``tokenizers.Tokenizer``)."""
    batch = wrap(tokenizer)(sentences)  # input_ids, attention_mask [N, T]
    ids, mask = batch["input_ids"], batch["attention_mask"]
    hidden = model(ids, attention_mask=mask).last_hidden_state  # [N, T, d]
    return F.normalize(pool(hidden, mask, "mean"), dim=-1)  # [N, d]


def ranking_loss(model, tokenizer, pairs=CALIBRATION) -> torch.Tensor:
    """In-batch contrastive loss: cross-entropy of softmax_j(20 cos(a_i, b_j)) against j = i."""
    a = _encode(model, tokenizer, [p[0] for p in pairs])  # [P, d]
    b = _encode(model, tokenizer, [p[1] for p in pairs])  # [P, d]
    return F.cross_entropy(20.0 * a @ b.T, torch.arange(len(pairs)))


def agreement(reference: torch.Tensor):
    """A metric for :func:`attnlab.interp.prune.pruning_curve`: the pruned model's held-out
    embeddings against ``reference [N, d]`` (the unpruned model's): mean cosine and top-1 agreement."""

    def top1(e: torch.Tensor) -> torch.Tensor:
        sim = e @ e.T  # [N, N]
        sim.fill_diagonal_(-2.0)
        return sim.argmax(dim=1)  # [N]

    ref_top = top1(reference)

    def metric(model, tokenizer) -> dict:
        with torch.no_grad():
            e = _encode(model, tokenizer, HELD_OUT)  # [N, d]
        return {
            "mean_cosine": float((e * reference).sum(dim=1).mean()),
            "top1_agreement": float((top1(e) == ref_top).float().mean()),
        }

    return metric


def minilm_pruning(model, tokenizer, *, random_seed: int = 0, random_orders: int = RANDOM_ORDERS) -> dict:
    """Michel et al.'s importance of MiniLM's 72 heads, and the held-out agreement with 0..90% of
    the heads removed, least important first and in ``random_orders`` random orders (seeds
    ``random_seed``, ``random_seed + 1``, ...): one random order is one draw, no spread.

    Returns ``{"importance": [L][h], "importance_order": rows, "random_order": rows,
    "random_orders": [rows] * random_orders}`` (``random_order``: the first of them); each row:
    ``fraction``, ``removed``, ``params``, ``mean_cosine``, ``top1_agreement``.
    """
    random_orders = positive_int("random_orders", random_orders)
    model.eval()
    importance = head_importance(model, lambda m, pairs: ranking_loss(m, tokenizer, pairs), [CALIBRATION])
    with torch.no_grad():
        reference = _encode(model, tokenizer, HELD_OUT)  # [N, d]
    score = agreement(reference)

    def metric(pruned):
        return score(pruned, tokenizer)

    randoms = [
        pruning_curve(model, removal_order(importance, random_seed=random_seed + k), metric)
        for k in range(random_orders)
    ]
    return {
        "importance": [[round(v, 4) for v in row] for row in importance.tolist()],
        "importance_order": pruning_curve(model, removal_order(importance), metric),
        "random_order": randoms[0],
        "random_orders": randoms,
    }


def prune_minilm(random_seed: int = 0, random_orders: int = RANDOM_ORDERS) -> dict:
    """:func:`minilm_pruning` of MiniLM as :func:`attnlab.models.load` gives it."""
    model, tokenizer = load("minilm")
    return minilm_pruning(model, tokenizer, random_seed=random_seed, random_orders=random_orders)
