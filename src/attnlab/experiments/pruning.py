"""Is Michel et al.'s importance order better than chance? ``attnlab prune minilm``'s verdict.

The claim (Michel et al. 2019, as docs/heads.md reads it for MiniLM): removing heads least important
first keeps the embeddings closer to the unpruned model's than removing them in a random order. One
random order is one draw; :func:`compare_orders` sets the importance order's mean cosine against
every random order's (:func:`attnlab.interp.minilm_pruning.minilm_pruning` with ``random_orders``
seeds) at each count of heads removed, and judges the difference by the shared rule
(:mod:`attnlab.experiments.verdicts`, stated before the result): per count, the paired differences
``importance - random_k`` over the orders, mean ± t(n-1) standard errors; **agrees** when the interval
lies above zero, **disagrees** when below, **inconclusive** otherwise (and always with one order).
No competence gate: MiniLM is the unpruned reference it is compared with.
"""

from __future__ import annotations

from attnlab.experiments import verdicts
from attnlab.interp.minilm_pruning import prune_minilm


def compare_orders(result: dict, key: str = "mean_cosine") -> list[dict]:
    """Per row of ``result["importance_order"]`` (a :func:`minilm_pruning` result with
    ``random_orders``: ``[K][rows]``): ``removed``, ``share``, ``importance`` (its ``key``), the random
    orders' ``random_mean``, ``random_min``, ``random_max``, the ``difference`` (importance minus the
    random mean), its 95% ``interval`` over the K orders, and the ``verdict``. The unpruned row (no
    head removed, no difference to judge) is left out."""
    orders = result["random_orders"]
    out = []
    for i, row in enumerate(result["importance_order"]):
        if row["removed"] == 0:
            continue
        randoms = [curve[i][key] for curve in orders]  # [K]
        mean, lo, hi = verdicts.mean_interval([row[key] - r for r in randoms])
        out.append(
            {
                "removed": row["removed"],
                "share": row["share"],
                "importance": round(row[key], 4),
                "random_mean": round(sum(randoms) / len(randoms), 4),
                "random_min": round(min(randoms), 4),
                "random_max": round(max(randoms), 4),
                "difference": round(mean, 4),
                "interval": [round(lo, 4), round(hi, 4)],
                "verdict": verdicts.decide(lo, hi, +1),
            }
        )
    return out


def summary(rows: list[dict], orders: int) -> str:
    """One sentence: up to which count the importance order is closer than chance by the rule, and
    where it is not."""
    agree = [r for r in rows if r["verdict"] == verdicts.AGREES]
    leading = 0
    for r in rows:
        if r["verdict"] != verdicts.AGREES:
            break
        leading = r["removed"]
    rest = [r for r in rows if r["verdict"] != verdicts.AGREES]
    other = ", ".join(f"{r['removed']} heads: {r['verdict']}" for r in rest)
    head = (
        f"closer than {orders} random orders (95% interval above zero) up to {leading} heads removed"
        if leading
        else f"not closer than {orders} random orders at the first count removed"
    )
    return f"Importance order: {head} ({len(agree)} of {len(rows)} counts agree; {other or 'none other'})."


def judged_minilm(random_seed: int = 0, random_orders: int = 5) -> dict:
    """:func:`attnlab.interp.minilm_pruning.prune_minilm` with ``random_orders`` random orders, plus
    ``comparison`` (:func:`compare_orders` on the mean cosine) and ``summary`` (:func:`summary`)."""
    result = prune_minilm(random_seed, random_orders)
    rows = compare_orders(result)
    return {**result, "comparison": rows, "summary": summary(rows, random_orders)}
