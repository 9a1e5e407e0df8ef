"""Greedy generation from Hugging Face checkpoints: attnlab (``load_hf`` + ``decoding.generate`` with the
KV cache) against transformers' own ``generate`` on the same directory, same tokens.

The checkpoints are made here by transformers with random weights (nothing is downloaded): one
GPT-2-shaped (LayerNorm, GELU MLP, learned positions, tied head, GPT-2's vocabulary of 50,257) and
one Llama-shaped (RMSNorm, SwiGLU, RoPE, GQA with 4 query heads per key/value head, untied head).
"""

from __future__ import annotations

import os
import statistics
import tempfile

import torch
from _common import fmt_s, summary, table, target, time_interleaved

NAME = "generate_hf"
TITLE = "Generation from Hugging Face checkpoints: attnlab vs transformers generate"

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


def run(ctx: dict) -> dict:
    from attnlab.decoding import generate
    from attnlab.models import load_hf

    quick = ctx.get("quick", False)
    new, p, repeats = (32, 16, 2) if quick else (64, 16, 7)
    # one thread for both: decoding a small model is a chain of small kernels, and on a shared
    # 2-core machine two threads per process spend their time waiting for each other
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    rows, targets, raw = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape, (model_cls, config_cls, kwargs) in SHAPES.items():
            directory = os.path.join(tmp, shape)
            theirs = _checkpoint(directory, model_cls, config_cls, kwargs)
            ours = load_hf(directory)
            vocab = ours.config.vocab_size
            prompt = torch.randint(0, vocab, (1, p), generator=torch.Generator().manual_seed(1))
            outs = {}

            def attnlab_generate(ours=ours, prompt=prompt, outs=outs):
                outs["attnlab"] = generate(ours, prompt, new)

            def transformers_generate(theirs=theirs, prompt=prompt, outs=outs):
                with torch.no_grad():
                    outs["transformers"] = theirs.generate(
                        prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0
                    )

            runs = time_interleaved(
                {"attnlab": attnlab_generate, "transformers": transformers_generate}, repeats=repeats
            )
            # each pair ran back to back: the median of the pairs' ratios is robust to slow phases
            speed = statistics.median(a / b for a, b in zip(runs["transformers"], runs["attnlab"]))
            same = outs["attnlab"].tolist() == outs["transformers"].tolist()
            params = sum(q.numel() for q in ours.parameters())
            raw[shape] = {
                "time": {k: summary(v) for k, v in runs.items()},
                "speedup": speed,
                "same_tokens": same,
                "parameters": params,
                "config": kwargs,
            }
            tok_s = {k: new / summary(v)["median"] for k, v in runs.items()}
            rows.append(
                [
                    f"{shape} ({params / 1e6:.1f}M parameters)",
                    fmt_s(raw[shape]["time"]["attnlab"], "s", 1, 3),
                    f"{tok_s['attnlab']:.0f}",
                    fmt_s(raw[shape]["time"]["transformers"], "s", 1, 3),
                    f"{tok_s['transformers']:.0f}",
                    f"{speed:.2f}×",
                    "yes" if same else "**no**",
                ]
            )
            targets.append(
                target(
                    f"{shape} greedy generation of {new} tokens, transformers time / attnlab time",
                    "≥ 1.0× (same tokens)",
                    speed,
                    speed >= 1.0 and same,
                    f"{speed:.2f}×" + ("" if same else ", tokens differ"),
                    "Python overhead per step (one decoding step of a small model is ~40 small kernels)",
                )
            )
    raw["loadavg"] = {"start": load_start, "end": os.getloadavg()}
    raw["threads"] = torch.get_num_threads()
    return {
        "name": NAME,
        "title": TITLE,
        "raw": raw,
        "targets": targets,
        "tables": [
            table(
                f"Greedy generation of {new} tokens after a {p}-token prompt, batch 1, float32, "
                f"{torch.get_num_threads()} thread; median (min–max) of {repeats} interleaved runs; the "
                "ratio is the median of the ratios of runs made back to back",
                [
                    "model",
                    "attnlab",
                    "attnlab tokens/s",
                    "transformers",
                    "transformers tokens/s",
                    "transformers / attnlab",
                    "same tokens",
                ],
                rows,
            )
        ],
        "notes": [
            "Same directory for both: transformers saves it (`save_pretrained`, random weights with "
            "initializer_range 0.2 so that greedy choices are clear), attnlab reads it with `load_hf`. "
            "Both use their KV cache; transformers runs its default attention (SDPA).",
            f"Load average {load_start[0]:.1f} at the start, {raw['loadavg']['end'][0]:.1f} at the end "
            "(a shared machine: the two candidates are interleaved so that both see the same load).",
        ],
    }
