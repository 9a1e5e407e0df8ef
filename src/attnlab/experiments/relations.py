"""Do MiniLM's heads specialise? Every head scored on hand-labelled syntax and coreference pairs.

The Week 19 course page: "Heads specialise: some track the previous token, some syntax (verb ->
subject), some coreference (pronoun -> noun)". The Week 1 notes: "distinct or interpretable
specializations are not guaranteed". Both are checked on the real all-MiniLM-L6-v2 (6 layers x 12
heads) with two small hand-labelled sets shipped in the package (``experiments/data/relations.json``,
22 sentences each, written for attnlab, among them "The animal didn't cross the street because it
was too tired"): subject -> verb (from the verb to its subject, often across another noun: "The
keys to the cabinet are ...") and pronoun -> antecedent.

Scoring follows Clark et al. (2019, "What does BERT look at?"): attention is made word-level (the
"from" word's first token; the weights to a word's tokens summed), and a head is right on a pair
when the word it attends to most, leaving out [CLS], [SEP] and the "from" word itself, is the
labelled word. A head's accuracy is the share of pairs it gets right. The position baseline
predicts the word at a fixed offset from the "from" word (the best offset in -8..8). Picking the
best of 72 heads on 22 pairs flatters it, so each pick is also scored split-half: chosen on the even
pairs and scored on the odd ones, and the other way round. Weights are read through
:func:`attnlab.nn.hooks.capture`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from importlib.resources import files
from pathlib import Path

import torch

from attnlab.experiments.claim_result import ClaimResult, figure, save, write
from attnlab.models.capabilities import require_encoder
from attnlab.models.load import load
from attnlab.nn.hooks import capture

CLAIM = (
    "Heads specialise: some track the previous token, some syntax (verb -> subject), some coreference "
    "(pronoun -> noun)."
)
SOURCE = (
    "the Week 19 course page, lesson 'Multi-head attention'; against it the Week 1 notes, section 3: "
    "'distinct or interpretable specializations are not guaranteed'"
)
RELATIONS = {"subject_verb": "verb -> subject", "pronoun_antecedent": "pronoun -> antecedent"}
OFFSETS = tuple(k for k in range(-8, 9) if k != 0)
EXAMPLE = "The animal didn't cross the street because it was too tired."


def weights_point(layer: int) -> str:
    """The hook point of layer ``layer``'s attention weights ``[B, h, T, T]`` (the one hook name
    this module uses)."""
    return f"layers.{layer}.self_attn.weights"


@dataclasses.dataclass(frozen=True)
class Settings:
    """``model``: ``"minilm"`` or a BERT checkpoint folder; ``data``: a relations JSON file (None:
    the shipped one). ``seed`` is unused (nothing is random) and kept for the common command."""

    model: str = "minilm"
    data: str | None = None
    seed: int = 0


QUICK = Settings()


def load_pairs(path: str | Path | None = None) -> dict[str, list[dict]]:
    """``{relation: [{"text", "from", "to"}, ...]}``; each labelled word must occur exactly once
    (a ``ValueError`` names the sentence otherwise)."""
    if path is None:
        raw = (files("attnlab.experiments") / "data" / "relations.json").read_text(encoding="utf-8")
    else:
        raw = Path(path).read_text(encoding="utf-8")
    data = json.loads(raw)
    out = {}
    for relation in RELATIONS:
        pairs = data.get(relation)
        if not isinstance(pairs, list) or not pairs:
            raise ValueError(f"relations data needs a non-empty list {relation!r}")
        for p in pairs:
            for key in ("from", "to"):
                if len(word_spans(p["text"], p[key])) != 1:
                    raise ValueError(f"{relation}: {p[key]!r} must occur exactly once in {p['text']!r}")
        out[relation] = pairs
    return out


def word_spans(text: str, word: str) -> list[tuple[int, int]]:
    """Character spans of ``word`` as a whole word in ``text`` (case-sensitive)."""
    return [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text)]


def _word_of(encoding, text: str, word: str) -> int:
    """The tokenizer's word index of ``word`` (its first token's word id)."""
    start = word_spans(text, word)[0][0]
    for (a, _), w in zip(encoding.offsets, encoding.word_ids):
        if w is not None and a == start:
            return w
    raise ValueError(f"no token starts at {word!r} in {text!r}")  # pragma: no cover


def word_attention(weights: torch.Tensor, word_ids: list, query_word: int) -> torch.Tensor:
    """``[L, h, W]``: from the query word's first token to every word (its tokens' weights summed).

    ``weights``: ``[L, h, T, T]``; ``word_ids``: per token, its word index or None ([CLS], [SEP])."""
    q = word_ids.index(query_word)
    n_words = max(w for w in word_ids if w is not None) + 1
    out = torch.zeros(*weights.shape[:2], n_words, dtype=weights.dtype)
    for t, w in enumerate(word_ids):
        if w is not None:
            out[..., w] += weights[:, :, q, t]
    return out


def score_pairs(model, tokenizer, pairs: list[dict]) -> dict:
    """Per pair: the word each head attends to most, the word at every offset, and the target."""
    layers = len(model.layers)
    picks, offsets, targets, candidates = [], [], [], []
    for p in pairs:
        enc = tokenizer.encode(p["text"])
        ids = torch.tensor([enc.ids])
        with torch.no_grad(), capture(model, [weights_point(i) for i in range(layers)]) as cache:
            model(ids)
        weights = torch.cat([cache[weights_point(i)] for i in range(layers)])  # [L, h, T, T]
        query, target = _word_of(enc, p["text"], p["from"]), _word_of(enc, p["text"], p["to"])
        words = word_attention(weights, list(enc.word_ids), query)  # [L, h, W]
        words[..., query] = -1.0  # a word attending to itself does not count
        picks.append(words.argmax(-1))  # [L, h]
        offsets.append([query + k for k in OFFSETS])
        targets.append(target)
        candidates.append(words.shape[-1] - 1)
    return {"picks": torch.stack(picks), "offsets": offsets, "targets": targets, "candidates": candidates}


def _accuracy(s: dict, rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Head accuracies ``[L, h]`` and offset accuracies ``[len(OFFSETS)]`` over the pairs ``rows``."""
    t = torch.tensor([s["targets"][i] for i in rows])
    heads = (s["picks"][rows] == t[:, None, None]).float().mean(0)
    offs = torch.tensor([[s["offsets"][i][j] == s["targets"][i] for j in range(len(OFFSETS))] for i in rows])
    return heads, offs.float().mean(0)


def split_half(s: dict) -> tuple[float, float]:
    """(head, offset) accuracy when the best is chosen on one half of the pairs and scored on the other."""
    n = len(s["targets"])
    halves = (list(range(0, n, 2)), list(range(1, n, 2)))
    heads_total, offs_total = 0.0, 0.0
    for pick, score in (halves, halves[::-1]):
        h_pick, o_pick = _accuracy(s, pick)
        h_score, o_score = _accuracy(s, score)
        heads_total += float(h_score.flatten()[h_pick.argmax()]) * len(score)
        offs_total += float(o_score[o_pick.argmax()]) * len(score)
    return heads_total / n, offs_total / n


def summarise(s: dict) -> dict:
    """The best head and best offset, their accuracies, split-half accuracies and chance."""
    heads, offs = _accuracy(s, list(range(len(s["targets"]))))
    flat = int(heads.argmax())
    layer, head = divmod(flat, heads.shape[1])
    held_heads, held_offs = split_half(s)
    return {
        "pairs": len(s["targets"]),
        "head_accuracy": [[round(float(v), 4) for v in row] for row in heads],
        "best_head": [layer, head],
        "best_head_accuracy": float(heads.flatten()[flat]),
        "best_head_split_half": held_heads,
        "best_offset": OFFSETS[int(offs.argmax())],
        "best_offset_accuracy": float(offs.max()),
        "best_offset_split_half": held_offs,
        "chance": sum(1 / c for c in s["candidates"]) / len(s["candidates"]),
        "heads_above_offset": int((heads > offs.max()).sum()),
    }


def _example(model, tokenizer, head: list[int]) -> dict:
    """Where 'it' in the example sentence (the plain-language notes link 'it' to 'animal') attends in
    ``head``: the top word and the weight on 'animal'."""
    enc = tokenizer.encode(EXAMPLE)
    layer = head[0]
    with torch.no_grad(), capture(model, [weights_point(layer)]) as cache:
        model(torch.tensor([enc.ids]))
    words = word_attention(cache[weights_point(layer)], list(enc.word_ids), _word_of(enc, EXAMPLE, "it"))
    row = words[0, head[1]]  # [W]
    names = {w: EXAMPLE[a:b] for (a, b), w in zip(enc.offsets, enc.word_ids) if w is not None}
    top = int(row.argmax())
    return {
        "top_word": names[top],
        "top_weight": float(row[top]),
        "animal_weight": float(row[_word_of(enc, EXAMPLE, "animal")]),
    }


def run(
    settings: Settings = QUICK, out_dir: str | Path | None = None, *, log=print, progress=True
) -> ClaimResult:
    """Score every head on both relations; with ``out_dir`` write JSON, table and plot."""

    t0 = time.perf_counter()
    pairs = load_pairs(settings.data)
    loaded = load(settings.model)
    require_encoder(loaded.model, "relations", repr(settings.model))
    if not hasattr(loaded.tokenizer, "backend"):
        raise ValueError(f"relations reads words through a tokenizer.json; {settings.model!r} has none")
    model, tokenizer = loaded.model, loaded.tokenizer.backend  # the backend gives each token's word
    summary = {}
    for relation, items in pairs.items():
        summary[relation] = summarise(score_pairs(model, tokenizer, items))
        log(f"{RELATIONS[relation]}: {len(items)} pairs scored on every head")
    example = _example(model, tokenizer, summary["pronoun_antecedent"]["best_head"])
    result = _result(settings, summary, example, time.perf_counter() - t0)
    if out_dir is not None:
        write(result, out_dir, plot)
    return result


MARGIN = 0.15  # split-half accuracy above the position baseline's that counts as specialised


def _reading(name: str, r: dict) -> str:
    """One sentence: does the best head beat position once both are chosen on the other half?"""
    gap = r["best_head_split_half"] - r["best_offset_split_half"]
    if gap >= MARGIN:
        return (
            f"For {name} a head is specialised beyond position ({gap:+.2f} split-half), "
            "as the course page says."
        )
    return (
        f"For {name} no head beats position by {MARGIN} once chosen fairly ({gap:+.2f} split-half): in this "
        "model the course page's example is not found, as the Week 1 notes allow."
    )


def _result(settings: Settings, summary: dict, example: dict, seconds: float) -> ClaimResult:
    header = [
        "relation",
        "pairs",
        "best head",
        "accuracy",
        "split-half",
        "best offset",
        "offset accuracy",
        "offset split-half",
        "chance",
        "heads above offset",
    ]
    rows, parts = [], []
    for relation, r in summary.items():
        head = f"{r['best_head'][0]}.{r['best_head'][1]}"
        rows.append(
            [
                RELATIONS[relation],
                str(r["pairs"]),
                head,
                f"{r['best_head_accuracy']:.2f}",
                f"{r['best_head_split_half']:.2f}",
                f"{r['best_offset']:+d}",
                f"{r['best_offset_accuracy']:.2f}",
                f"{r['best_offset_split_half']:.2f}",
                f"{r['chance']:.2f}",
                f"{r['heads_above_offset']} of 72",
            ]
        )
        parts.append(
            f"{RELATIONS[relation]}: head {head} is right on {r['best_head_accuracy']:.0%} of the pairs "
            f"({r['best_head_split_half']:.0%} when chosen on the other half), the best fixed offset "
            f"({r['best_offset']:+d} words) on {r['best_offset_accuracy']:.0%} "
            f"({r['best_offset_split_half']:.0%}), chance {r['chance']:.0%}"
        )
    coref = summary["pronoun_antecedent"]["best_head"]
    verdict = (
        "; ".join(parts)
        + ". "
        + " ".join(_reading(RELATIONS[rel], r) for rel, r in summary.items())
        + f" In '{EXAMPLE}', head {coref[0]}.{coref[1]} sends {example['animal_weight']:.0%} "
        "of the attention "
        f"of 'it' to 'animal' (its top word: '{example['top_word']}'). Where a head attends is still not "
        "proof of what the model uses (the Week 19 course page: weights are not faithful explanations "
        "on their own)."
    )
    notes = [
        f"{settings.model}: 6 layers x 12 heads, heads written layer.head from 0; word-level attention "
        "from the 'from' word's first token, [CLS], [SEP] and the word itself left out; offsets -8..8 "
        "words; pairs: attnlab's hand-labelled set (experiments/data/relations.json)."
    ]
    return ClaimResult(
        "relations",
        CLAIM,
        SOURCE,
        header,
        rows,
        verdict,
        {"relations": summary, "example": example},
        dataclasses.asdict(settings),
        seconds,
        notes,
    )


def plot(result: ClaimResult, path: Path) -> None:
    """Every head's accuracy (layer x head) for each relation, the best head marked."""
    fig, axes = figure(2, width=5.2, height=3.2)
    for ax, (relation, r) in zip(axes, result.data["relations"].items()):
        acc = r["head_accuracy"]
        image = ax.imshow(acc, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        layer, head = r["best_head"]
        ax.scatter([head], [layer], marker="s", s=120, facecolors="none", edgecolors="red")
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(
            f"{RELATIONS[relation]} (offset {r['best_offset']:+d}: {r['best_offset_accuracy']:.2f})",
            fontsize=8,
        )
        fig.colorbar(image, ax=ax, fraction=0.04)
    save(fig, path, "MiniLM: share of pairs each head gets right")
