"""Greedy generation from Hugging Face checkpoints: attnlab (``load_hf`` + ``decoding.generate``, its
decode engine) against transformers' own ``generate`` on the same directory, same tokens, at batch 1
(per-token latency) and batch 8 (throughput); what each lever of the engine buys; bfloat16's
quality; a profile of one decoding step before and after.

The checkpoints are made here by transformers with random weights (nothing is downloaded): one
GPT-2-shaped (LayerNorm, GELU MLP, learned positions, tied head, GPT-2's vocabulary of 50,257), one
Llama-shaped (RMSNorm, SwiGLU, RoPE, GQA with 4 query heads per key/value head, untied head), and
one of the Shakespeare GPT's shape (the ``nanogpt`` text preset: 4 layers, width 128, 65 characters,
64 positions), where a step is all overhead and no bandwidth.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import torch
from _common import fmt_s, profile_top, summary, table, target, time_interleaved

NAME = "generate_hf"
TITLE = "Generation from Hugging Face checkpoints: attnlab vs transformers generate"
GOAL = 1.5  # transformers time / attnlab time, same greedy tokens (issue 28)

SHAPES = {
    "GPT-2-shaped": (
        "GPT2LMHeadModel",
        "GPT2Config",
        dict(vocab_size=50257, n_embd=384, n_layer=4, n_head=6, n_positions=1024),
    ),
    "Llama-shaped": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            vocab_size=32000,
            hidden_size=384,
            intermediate_size=1024,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=2,
            max_position_embeddings=2048,
            rope_theta=500000.0,
        ),
    ),
    "Shakespeare GPT-shaped": (
        "GPT2LMHeadModel",
        "GPT2Config",
        dict(vocab_size=65, n_embd=128, n_layer=4, n_head=4, n_positions=64, activation_function="gelu"),
    ),
}


def _checkpoint(directory: str, model_cls: str, config_cls: str, kwargs: dict):
    import transformers

    config = getattr(transformers, config_cls)(
        **kwargs, initializer_range=0.2, bos_token_id=None, eos_token_id=None, pad_token_id=None
    )
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval()
    model.save_pretrained(directory)
    return getattr(transformers, model_cls).from_pretrained(directory).eval()


def _greedy(gpt, prompt, new: int, engine, capacity):
    """Greedy tokens ``[B, new]`` through ``gpt.start``/``step`` with ``engine`` and ``capacity``."""
    with torch.no_grad():
        state = gpt.start(prompt, capacity=capacity, engine=engine)
        out = [state.last_logits.argmax(-1)]
        for _ in range(new - 1):
            out.append(gpt.step(out[-1], state)[0].argmax(-1))
    return torch.stack(out, dim=1)  # [B, new]


def _versus(theirs, ours, prompt, new: int, repeats: int) -> dict:
    """transformers' generate against attnlab's, interleaved: times, the ratio, same tokens."""
    from attnlab.decoding import generate

    outs = {}

    def attnlab_generate():
        outs["attnlab"] = generate(ours, prompt, new)[:, prompt.shape[1] :]

    def transformers_generate():
        with torch.no_grad():
            outs["transformers"] = theirs.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=0,
            )[:, prompt.shape[1] :]

    runs = time_interleaved({"attnlab": attnlab_generate, "transformers": transformers_generate}, repeats)
    # each pair ran back to back: the median of the pairs' ratios is robust to slow phases
    speed = statistics.median(a / b for a, b in zip(runs["transformers"], runs["attnlab"]))
    same = torch.equal(outs["attnlab"], outs["transformers"])
    return {"time": {k: summary(v) for k, v in runs.items()}, "speedup": speed, "same_tokens": same}


def _levers(ours, prompt, new: int, repeats: int, compile_too: bool) -> dict:
    """ms per token at batch 1 for each lever, interleaved, and the first compile's seconds."""
    from attnlab.models.gpt_decode import DecodeEngine

    cap = prompt.shape[1] + new
    levers = {
        "layers' forward, concatenating KV cache (before)": ("reference", 0),
        "+ preallocated KV cache (StaticKVCache)": ("reference", cap),
        "+ engine step: fused QKV and GLU GEMMs, no per-call checks (F.linear weights)": (
            DecodeEngine(ours, layout="linear"),
            cap,
        ),
        "+ weights laid out for one row (W^T contiguous: BLAS's streaming GEMV)": (DecodeEngine(ours), cap),
    }
    if compile_too:
        levers["+ torch.compile of the step (static shapes, masked cache)"] = (
            DecodeEngine(ours, compile=True),
            cap,
        )
    levers["bfloat16 weights, not compiled (oneDNN packed, AVX-512 BF16 / AMX)"] = (
        DecodeEngine(ours, dtype="bfloat16"),
        cap,
    )
    first = {}
    fns = {}
    for name, (engine, capacity) in levers.items():
        t0 = time.perf_counter()
        _greedy(ours, prompt, new, engine, capacity)  # warm-up (and the compile)
        first[name] = time.perf_counter() - t0
        fns[name] = lambda engine=engine, capacity=capacity: _greedy(ours, prompt, new, engine, capacity)
    runs = time_interleaved(fns, repeats, warmup=0)
    compiled = levers.get("+ torch.compile of the step (static shapes, masked cache)")
    return {
        "ms_per_token": {k: summary([t / new * 1e3 for t in v]) for k, v in runs.items()},
        "compile_s": None if compiled is None else compiled[0].compile_seconds,
        "first_call_s": first,
    }


def _bf16_quality(ours, prompt, new: int) -> dict:
    """bfloat16 weights against float32, teacher-forced on float32's greedy tokens: the share of
    positions whose top-1 agrees, and the largest |log p| change of the chosen token."""
    from attnlab.models.gpt_decode import DecodeEngine

    tokens = _greedy(ours, prompt, new, "auto", None)  # [B, new]
    logps = {}
    for name, engine in (("float32", "auto"), ("bfloat16", DecodeEngine(ours, dtype="bfloat16"))):
        with torch.no_grad():
            state = ours.start(prompt, engine=engine)
            rows = [state.last_logits]
            for i in range(new - 1):
                rows.append(ours.step(tokens[:, i], state)[0])
        logps[name] = torch.stack(rows, dim=1).float().log_softmax(-1)  # [B, new, V]
    agree = (logps["bfloat16"].argmax(-1) == tokens).float().mean().item()
    chosen = (logps["bfloat16"] - logps["float32"]).gather(-1, tokens[..., None]).abs().max().item()
    return {"top1_agreement": agree, "max_abs_dlogp_chosen": chosen}


def _profiles(ours, prompt) -> dict:
    """Top operations of one decoding step (self CPU time), the layers' path and the engine's."""
    from attnlab.models.gpt_decode import DecodeEngine

    out = {}
    for name, engine in (("before: layers' forward", "reference"), ("after: engine", DecodeEngine(ours))):
        with torch.no_grad():
            state = ours.start(prompt, capacity=prompt.shape[1] + 64, engine=engine)
            tok = state.last_logits.argmax(-1)
            out[name] = profile_top(lambda state=state, tok=tok: ours.step(tok, state), n=8, calls=20)
        wall = []
        with torch.no_grad():
            for _ in range(20):
                t0 = time.perf_counter()
                ours.step(tok, state)
                wall.append(time.perf_counter() - t0)
        out[name][0]["wall_ms_per_call"] = statistics.median(wall) * 1e3
    return out


def _shape_run(shape: str, directory: str, sizes: dict) -> dict:
    """Every measurement of one checkpoint shape."""
    from attnlab.models import load_hf

    model_cls, config_cls, kwargs = SHAPES[shape]
    theirs = _checkpoint(directory, model_cls, config_cls, kwargs)
    ours = load_hf(directory)
    vocab, p = ours.config.vocab_size, sizes["prompt"]
    new = min(sizes["new"], ours.config.max_len - p)
    gen = torch.Generator().manual_seed(1)
    prompts = {b: torch.randint(0, vocab, (b, p), generator=gen) for b in (1, 8)}
    res = {"new": new, "parameters": sum(q.numel() for q in ours.parameters()), "config": kwargs}
    res["batch"] = {b: _versus(theirs, ours, prompts[b], new, sizes["repeats"]) for b in (1, 8)}
    res["levers"] = _levers(ours, prompts[1], new, sizes["repeats"], sizes["compile"])
    res["bf16"] = _bf16_quality(ours, prompts[1], new)
    if shape == "GPT-2-shaped" or not sizes["compile"]:
        res["profile"] = _profiles(ours, prompts[1])
    return res


def _rows(raw: dict) -> tuple[list, list, list]:
    """The rows of the three tables: attnlab vs transformers, the levers, the step profiles."""
    rows, lever_rows, prof_rows = [], [], []
    for shape, r in raw["shapes"].items():
        for b, v in r["batch"].items():
            t = {k: r["new"] * b / s["median"] for k, s in v["time"].items()}  # tokens/s
            rows.append(
                [
                    f"{shape} ({r['parameters'] / 1e6:.1f}M), batch {b}",
                    f"{v['time']['attnlab']['median'] / r['new'] * 1e3:.2f} ms",
                    f"{t['attnlab']:.0f}",
                    f"{v['time']['transformers']['median'] / r['new'] * 1e3:.2f} ms",
                    f"{t['transformers']:.0f}",
                    f"{v['speedup']:.2f}×",
                    "yes" if v["same_tokens"] else "**no**",
                ]
            )
        base = r["levers"]["ms_per_token"]
        first = next(iter(base.values()))["median"]
        for name, s in base.items():
            extra = ""
            if name.startswith("+ torch.compile") and r["levers"]["compile_s"] is not None:
                extra = f" (first compile {r['levers']['compile_s']:.0f} s)"
            lever_rows.append([shape, name + extra, fmt_s(s, "ms", 1, 2), f"{first / s['median']:.2f}×"])
        q = r["bf16"]
        lever_rows.append(
            [
                shape,
                "bfloat16 quality vs float32 (teacher-forced)",
                f"top-1 agrees {q['top1_agreement']:.0%}",
                f"max Δlog p {q['max_abs_dlogp_chosen']:.3f}",
            ]
        )
        for name, top in r.get("profile", {}).items():
            head = top[0]
            prof_rows.append(
                [
                    shape,
                    name,
                    "(all operations)",
                    f"{head['self_ms_per_call']:.3f}",
                    head["count"],
                    f"{head['wall_ms_per_call']:.3f} ms per step unprofiled",
                ]
            )
            total = head["self_ms_per_call"]
            prof_rows += [
                [
                    shape,
                    name,
                    f"`{e['op']}`",
                    f"{e['self_ms_per_call']:.3f}",
                    e["count"],
                    f"{e['self_ms_per_call'] / total:.0%}",
                ]
                for e in top[1:6]
            ]
    return rows, lever_rows, prof_rows


def _tables(raw: dict, sizes: dict) -> list[dict]:
    rows, lever_rows, prof_rows = _rows(raw)
    return [
        table(
            f"Greedy generation after a {sizes['prompt']}-token prompt (new tokens: {sizes['new']}, or up "
            f"to the model's positions), float32, {raw['threads']} thread; per token = generation time "
            f"/ new tokens; median of {sizes['repeats']} interleaved runs; the ratio is the median of the "
            "ratios of runs made back to back",
            [
                "model, batch",
                "attnlab per token",
                "attnlab tokens/s",
                "transformers per token",
                "transformers tokens/s",
                "transformers / attnlab",
                "same tokens",
            ],
            rows,
        ),
        table(
            "What each lever buys: ms per generated token at batch 1, each row adding to the one above "
            "(bfloat16 adds to the laid-out weights, without compile); levers interleaved in one process",
            ["model", "lever", "ms per token", "speed-up over before"],
            lever_rows,
        ),
        table(
            "One decoding step at batch 1 (profiled, 20 steps): self CPU time of the top operations "
            "(the profiler's own cost inflates the many small ones), and the wall time of 20 unprofiled "
            "steps",
            ["model", "path", "operation", "self ms per step", "calls per step", "share / note"],
            prof_rows,
        ),
    ]


def run(ctx: dict) -> dict:
    from attnlab.models.precision import features_line

    quick = ctx.get("quick", False)
    sizes = {"prompt": 16, "new": 32 if quick else 64, "repeats": 2 if quick else 5, "compile": not quick}
    # one thread for both: decoding a small model is a chain of small kernels, and on a shared
    # 2-core machine two threads per process spend their time waiting for each other
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    raw = {"shapes": {}, "threads": torch.get_num_threads(), "cpu": features_line()}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in SHAPES:
            raw["shapes"][shape] = _shape_run(shape, os.path.join(tmp, shape), sizes)
    raw["loadavg"] = {"start": load_start, "end": os.getloadavg()}
    targets = []
    for shape, r in raw["shapes"].items():
        for b, v in r["batch"].items():
            what = "per-token latency" if b == 1 else "throughput"
            speed, same = v["speedup"], v["same_tokens"]
            targets.append(
                target(
                    f"{shape} greedy generation, batch {b} ({what}), transformers time / attnlab time",
                    f"≥ {GOAL}× (same tokens)",
                    speed,
                    speed >= GOAL and same,
                    f"{speed:.2f}×" + ("" if same else ", tokens differ"),
                    "see 'Where time goes': a batch-1 step streams every weight once from memory",
                )
            )
    return {
        "name": NAME,
        "title": TITLE,
        "raw": raw,
        "targets": targets,
        "tables": _tables(raw, sizes),
        "notes": [
            "Same directory for both: transformers saves it (`save_pretrained`, random weights with "
            "initializer_range 0.2 so that greedy choices are clear), attnlab reads it with `load_hf`. "
            "Both use their KV cache; transformers runs its default attention (SDPA).",
            f"CPU: {raw['cpu']}. Load average {load_start[0]:.1f} at the start, "
            f"{raw['loadavg']['end'][0]:.1f} at the end (a shared machine: the candidates are "
            "interleaved so that all see the same load).",
            "bfloat16 quality is measured on these random-weight models, whose large weights "
            "(initializer_range 0.2) amplify rounding from layer to layer: a bound, not a trained "
            "model's figure (docs/performance.md, 'Where time goes', has a trained one).",
        ],
    }
