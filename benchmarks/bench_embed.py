"""MiniLM sentence embeddings in every number format against the peers people pick on a CPU:
attnlab float32 / bfloat16 / int8, transformers BertModel, sentence-transformers (float32 and
bfloat16), ONNX Runtime float32 (a graph exported here with torch.onnx, all graph optimisations,
batches sorted by length) and ONNX Runtime dynamic int8 — interleaved in one process, on a
seeded corpus of 512 sentences of 5-120 words and one of 2,000 queries of 3-12 words."""

from __future__ import annotations

import os
import random
import tempfile

import numpy as np
import torch
from _common import fmt_s, profile_top, ratio, summary, table, target, time_interleaved
from bench_minilm import _flops_per_sentence, _hf_embedder, _tokens_computed, corpus

NAME = "embed"
TITLE = "Sentence embeddings at the machine's limit: float32, bfloat16, int8 and the peers"
BATCH = 32


def queries(vocab_path: str, n: int, seed: int = 1) -> list[str]:
    """``n`` seeded queries of 3 to 12 whole words from the vocabulary."""
    with open(vocab_path, encoding="utf-8") as f:
        words = [w.strip() for w in f]
    words = [w for w in words if w.isalpha() and w.islower() and len(w) >= 2]
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def _onnx_embedders(path: str, tokenizer, workdir: str) -> dict:
    """ONNX Runtime float32 and dynamic int8 sessions on transformers' BertModel exported here."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import BertModel

    hf = BertModel.from_pretrained(path, attn_implementation="eager").eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask, types):
            return self.m(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    f32, i8 = os.path.join(workdir, "minilm.onnx"), os.path.join(workdir, "minilm-int8.onnx")
    example = tuple(torch.ones(2, 7, dtype=torch.long) for _ in range(3))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        Hidden(hf),
        example,
        f32,
        input_names=names,
        output_names=["last_hidden_state"],
        dynamic_axes={k: {0: "batch", 1: "tokens"} for k in [*names, "last_hidden_state"]},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(f32, i8, weight_type=QuantType.QInt8)
    tok = tokenizer.__class__.from_str(tokenizer.to_str())
    tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def session(file):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = torch.get_num_threads()
        s = ort.InferenceSession(file, so, providers=["CPUExecutionProvider"])

        def embed_all(sentences):
            lengths = [len(e.ids) for e in tokenizer.encode_batch(sentences)]
            order = sorted(range(len(sentences)), key=lambda i: -lengths[i])  # by token count
            out = np.empty((len(sentences), 384), dtype=np.float32)
            for i in range(0, len(order), BATCH):
                rows = order[i : i + BATCH]
                enc = tok.encode_batch([sentences[j] for j in rows])
                feed = {
                    "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
                }
                h = s.run(None, feed)[0]  # [b, T, 384]
                m = feed["attention_mask"][..., None].astype(np.float32)  # [b, T, 1]
                v = (h * m).sum(1) / m.sum(1)  # [b, 384]
                out[rows] = v / np.linalg.norm(v, axis=1, keepdims=True)
            return torch.from_numpy(out)

        return embed_all

    return {"onnxruntime float32": session(f32), "onnxruntime int8": session(i8)}


def _st_embedder(path: str, dtype):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(path, device="cpu")
    if dtype is not None:
        st = st.to(dtype)

    def encode(texts):
        v = st.encode(
            texts,
            batch_size=BATCH,
            convert_to_tensor=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return v.float()

    return encode


KIND = {
    "attnlab float32": "float32",
    "attnlab bfloat16": "bfloat16",
    "attnlab int8": "int8",
    "transformers": "float32",
    "sentence-transformers float32": "float32",
    "sentence-transformers bfloat16": "bfloat16",
    "onnxruntime float32": "float32",
    "onnxruntime int8": "int8",
}


def _cosine(a, b):
    """Row-wise cosine ``[N]`` of ``a, b [N, d]`` in float64, each row normalised here: a peer's
    bfloat16 output is only unit-length to bfloat16 rounding (its dot product with itself can
    exceed 1)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def _compare(name: str, sentences: list[str], embedders: dict, tokenizer, peaks: dict, repeats: int) -> dict:
    results = {}
    for fn in embedders.values():
        fn(sentences[:BATCH])  # warm-up: first-call costs are not throughput

    def timed(key):
        def call():
            results[key] = embedders[key](sentences)

        return call

    load_before = os.getloadavg()
    runs = time_interleaved({k: timed(k) for k in embedders}, repeats=repeats, warmup=0)
    load_after = os.getloadavg()
    lengths = [len(e.ids) for e in tokenizer.encode_batch(sentences)]
    flops = sum(_flops_per_sentence(lengths))
    ref = results["transformers"]
    rows, raw = [], {"sentences": len(sentences), "tokens": sum(lengths), "load": [load_before, load_after]}
    for key in embedders:
        s = summary(runs[key])
        cos = _cosine(results[key], ref)  # [N]
        peak = peaks.get(KIND[key])
        frac = flops / s["median"] / peak if peak else None
        raw[key] = {
            "time": s,
            "sentences_per_s": len(sentences) / s["median"],
            "min_cosine": float(cos.min()),
            "mean_cosine": float(cos.mean()),
            "ceiling_fraction": frac,
            "ceiling": KIND[key],
        }
        rows.append(
            [
                key,
                fmt_s(s, "s", 1, 2),
                f"{len(sentences) / s['median']:.0f}",
                f"{float(cos.min()):.6f}",
                f"{float(cos.mean()):.6f}",
                f"{100 * frac:.1f}% of {KIND[key]}" if frac else "n/a",
                f"{ratio(runs['sentence-transformers float32'], runs[key]):.2f}×",
            ]
        )
    raw["runs"] = runs
    title = (
        f"{name}: {len(sentences)} sentences ({sum(lengths):,} tokens), batches of {BATCH}, time for the "
        f"whole corpus, median (min–max) of {repeats} interleaved runs; load average "
        f"{load_before[0]:.1f} → {load_after[0]:.1f}"
    )
    columns = ["embedder", "time", "sentences/s", "min cos", "mean cos", "of ceiling", "vs ST float32"]
    return {"raw": raw, "runs": runs, "table": table(title, columns, rows)}


def _int8_engines(model, rows: dict[str, int], repeats: int) -> list[list[str]]:
    """The int8 engine lever: layer 0's four projections (W_qkv, W^O, act(x W_1 + b_1), W_2) at a
    batch's token count, packed for fbgemm (PyTorch's ``x86`` engine: before) and for oneDNN
    (after), interleaved; ms per layer."""
    from attnlab.models.precision import _int8

    layer = model.layers[0]
    attn, ffn = layer.self_attn, layer.ffn
    weights = [
        (*attn.qkv_weight(), None),
        (attn.out_proj.weight, attn.out_proj.bias, None),
        (ffn.linear1.weight, ffn.linear1.bias, ffn.activation),
        (ffn.linear2.weight, ffn.linear2.bias, None),
    ]
    out = []
    with torch.no_grad():
        packed = {e: [_int8(w, b, a, engine=e) for w, b, a in weights] for e in ("x86", "onednn")}
        for name, m in rows.items():
            xs = [torch.randn(m, w.shape[1]) for w, _, _ in weights]  # [M, d_in] per projection

            def layer_of(engine, xs=xs):
                return lambda: [f(x) for f, x in zip(packed[engine], xs)]

            runs = time_interleaved({e: layer_of(e) for e in packed}, repeats=repeats)
            before, after = (summary(runs[e]) for e in ("x86", "onednn"))
            out.append(
                [
                    f"{name} ({m} tokens)",
                    fmt_s(before, "ms", 1e3, 2),
                    fmt_s(after, "ms", 1e3, 2),
                    f"{before['median'] / after['median']:.2f}×",
                ]
            )
    return out


def _batch_profiles(model, tokenizer, sets: dict[str, list[str]]) -> list[list[str]]:
    """Top operations of one batch of 32 (self CPU time), float32 and int8, per corpus."""
    from attnlab.models import embed

    rows = []
    for name, sentences in sets.items():
        for dtype in ("float32", "int8"):
            batch = sentences[:BATCH]
            top = profile_top(lambda b=batch, d=dtype: embed(model, tokenizer, b, dtype=d), n=6, calls=5)
            total = top[0]["self_ms_per_call"]
            rows.append([name, dtype, "(all operations)", f"{total:.2f}", top[0]["count"], "100%"])
            rows += [
                [
                    name,
                    dtype,
                    f"`{r['op']}`",
                    f"{r['self_ms_per_call']:.2f}",
                    r["count"],
                    f"{r['self_ms_per_call'] / total:.0%}",
                ]
                for r in top[1:]
            ]
    return rows


def run(ctx: dict) -> dict:
    from attnlab.audit.peak import measure_peak
    from attnlab.models import embed, load_pretrained
    from attnlab.models.precision import cpu_features, features_line, kernels
    from attnlab.models.pretrained import pretrained_path

    quick = ctx.get("quick", False)
    # On a shared, oversubscribed machine PyTorch's OpenMP pool loses most of its time in barriers
    # (measured here at load 16 on 2 cores: 200 queries in 4.1 s on 1 thread, 31.9 s on 2); the
    # thread count is the same for every peer and recorded with the results.
    threads = int(os.environ.get("ATTNLAB_BENCH_THREADS", "0")) or torch.get_num_threads()
    torch.set_num_threads(threads)
    path = str(pretrained_path("minilm"))
    long = corpus(f"{path}/vocab.txt", 64 if quick else 512)
    short = queries(f"{path}/vocab.txt", 200 if quick else 2000)
    model, tokenizer = load_pretrained("minilm")
    peaks = {d: measure_peak(seconds=1.0 if quick else 3.0, dtype=d)["peak_flops"] for d in KIND.values()}

    def ours(dtype):
        return lambda texts: embed(model, tokenizer, texts, batch_size=BATCH, dtype=dtype)

    with tempfile.TemporaryDirectory() as workdir:
        embedders = {
            "attnlab float32": ours("float32"),
            "attnlab bfloat16": ours("bfloat16"),
            "attnlab int8": ours("int8"),
            "transformers": _hf_embedder(path, tokenizer),
            "sentence-transformers float32": _st_embedder(path, None),
            "sentence-transformers bfloat16": _st_embedder(path, torch.bfloat16),
            **_onnx_embedders(path, tokenizer, workdir),
        }
        repeats = 1 if quick else int(os.environ.get("ATTNLAB_BENCH_REPEATS", "3"))
        lengths = {
            k: [len(e.ids) for e in tokenizer.encode_batch(v[:BATCH])]
            for k, v in (("long", long), ("queries", short))
        }
        engine_rows = _int8_engines(model, {k: sum(v) for k, v in lengths.items()}, 5 if quick else 20)
        profile_rows = _batch_profiles(model, tokenizer, {"long": long, "queries": short})
        with torch.inference_mode():
            sections = {
                "512 sentences of 5–120 words": _compare("long", long, embedders, tokenizer, peaks, repeats),
                "2,000 queries of 3–12 words": _compare(
                    "queries", short, embedders, tokenizer, peaks, repeats
                ),
            }
    main = sections["512 sentences of 5–120 words"]
    runs, raw = main["runs"], main["raw"]
    st, ort32, orti8 = "sentence-transformers float32", "onnxruntime float32", "onnxruntime int8"
    r_st = ratio(runs[st], runs["attnlab float32"])
    r_ort = ratio(runs[ort32], runs["attnlab float32"])
    r_bf = ratio(runs[st], runs["attnlab bfloat16"])
    r_i8 = ratio(runs[orti8], runs["attnlab int8"])
    cos32 = raw["attnlab float32"]["min_cosine"]
    cosbf = raw["attnlab bfloat16"]["min_cosine"]
    cos_i8, cos_ort_i8 = raw["attnlab int8"]["min_cosine"], raw[orti8]["min_cosine"]
    flags = cpu_features()["flags"]
    amx = flags["amx_bf16"]
    # What bounds the float32 ratios: the same float32 GEMM at the same ceiling on both sides, so
    # attnlab's edge is the padding sentence-transformers computes and attnlab does not
    lengths = [len(e.ids) for e in tokenizer.encode_batch(long)]
    computed = _tokens_computed(long, lengths)
    padding = computed["sentence-transformers"] / computed["attnlab"]
    f32_frac = raw["attnlab float32"]["ceiling_fraction"] or 0.0
    ort_frac = raw[ort32]["ceiling_fraction"] or 0.0
    f32_limit = (
        f"attnlab float32 runs at {100 * f32_frac:.0f}% of the float32 matmul ceiling "
        f"({peaks['float32'] / 1e9:.0f} GFLOP/s, AVX-512 FMA), ONNX Runtime at {100 * ort_frac:.0f}%; "
        "the peers run the same kind of GEMM, and sentence-transformers computes "
        f"{padding:.3f}× attnlab's tokens (padding after its character-length sort), so the same GEMM "
        "throughput bounds attnlab near that ratio plus what it saves outside the GEMMs"
    )
    i8_frac = raw["attnlab int8"]["ceiling_fraction"] or 0.0
    ort_i8_frac = raw[orti8]["ceiling_fraction"] or 0.0
    i8_limit = (
        f"attnlab int8 runs at {100 * i8_frac:.0f}% of the int8 matmul ceiling ({peaks['int8'] / 1e9:.0f} "
        f"GOP/s), ONNX Runtime int8 at {100 * ort_i8_frac:.0f}%: below the float32 path's share, the "
        "int8 GEMMs are ~3x faster and the float32 attention, LayerNorm and per-call input quantisation "
        "they leave weigh more (see the one-batch profiles)"
    )
    bf_goal = 2.5 if amx else 1.3
    targets = [
        target(
            "float32 sentences/s, attnlab / sentence-transformers",
            "≥ 1.25×",
            r_st,
            r_st >= 1.25,
            f"{r_st:.2f}×",
            "" if r_st >= 1.25 else f32_limit,
        ),
        target(
            "float32 sentences/s, attnlab / ONNX Runtime float32",
            "≥ 1.25×",
            r_ort,
            r_ort >= 1.25,
            f"{r_ort:.2f}×",
            "" if r_ort >= 1.25 else f32_limit,
        ),
        target("float32 min cosine to transformers", "≥ 0.99999", cos32, cos32 >= 0.99999, f"{cos32:.7f}"),
        target(
            "bfloat16 sentences/s, attnlab / sentence-transformers float32",
            f"≥ {bf_goal}× ({'AMX' if amx else 'no AMX'})",
            r_bf,
            r_bf >= bf_goal,
            f"{r_bf:.2f}×",
        ),
        target(
            "bfloat16 min cosine to float32 transformers", "≥ 0.9999", cosbf, cosbf >= 0.9999, f"{cosbf:.6f}"
        ),
        target(
            "int8 sentences/s, attnlab / ONNX Runtime int8, at a higher min cosine",
            "> 1× and higher cosine",
            r_i8,
            r_i8 > 1 and cos_i8 > cos_ort_i8,
            f"{r_i8:.2f}×, min cosine {cos_i8:.4f} vs {cos_ort_i8:.4f}",
            "" if r_i8 > 1 else i8_limit,
        ),
    ]
    return {
        "name": NAME,
        "title": TITLE,
        "raw": {
            "cpu": cpu_features(),
            "threads": threads,
            "peaks": peaks,
            **{k: v["raw"] for k, v in sections.items()},
        },
        "targets": targets,
        "reports": [{"what": "CPU features", "shown": features_line()}],
        "tables": [v["table"] for v in sections.values()]
        + [
            table(
                "Matmul ceilings (attnlab audit peak --dtype), best of n = 256, 512, 1024",
                ["dtype", "GFLOP/s", "kernels of the attnlab path"],
                [[d, f"{p / 1e9:.0f}", kernels(d)] for d, p in peaks.items()],
            ),
            table(
                "The int8 engine lever: layer 0's four projections at one batch's token count (the first "
                "32 sentences of each corpus), packed for fbgemm (before) and for oneDNN (after), "
                "interleaved",
                ["batch", "fbgemm (x86 engine)", "oneDNN", "speed-up"],
                engine_rows,
            ),
            table(
                "One batch of 32 (the longest sentences of each corpus come first after sorting, so these "
                "are the first 32 in corpus order), profiled over 5 calls: self CPU time of the top "
                "operations",
                ["corpus", "dtype", "operation", "self ms per batch", "calls per batch", "share"],
                profile_rows,
            ),
        ],
        "notes": [
            f"CPU: {features_line()}; {threads} thread(s) for every peer (torch and ONNX Runtime).",
            "Cosines are to float32 transformers BertModel (mean pooling, L2 normalisation); the fraction of "
            "the ceiling divides useful FLOPs (attnlab audit cost at each sentence's real token count) per "
            "second by the matching dtype's matmul ceiling.",
            "ONNX Runtime: transformers' BertModel exported here with torch.onnx (opset 17), "
            "ORT_ENABLE_ALL, as many intra-op threads as torch, batches of 32 sorted by token count; int8 is "
            "onnxruntime.quantization.quantize_dynamic (QInt8 weights).",
            "Other engineers' jobs share this 2-core machine: the load averages before and after each "
            "comparison are in the table titles; every ratio is between runs interleaved in one process.",
        ],
    }
