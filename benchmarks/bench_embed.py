"""MiniLM sentence embeddings in every number format against the peers people pick on a CPU:
attnlab float32 / bfloat16 / int8, transformers BertModel, sentence-transformers (float32 and
bfloat16), ONNX Runtime float32 (a graph exported here with torch.onnx, all graph optimisations,
batches sorted by length) and ONNX Runtime dynamic int8 — interleaved in one process, on a
seeded corpus of 512 sentences of 5-120 words and one of 2,000 queries of 3-12 words."""

from __future__ import annotations

import contextlib
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
        # no profile JSON in the current folder (onnxruntime_profile__*.json were committed once):
        # off, and if turned on by hand, written into the temporary work folder
        so.enable_profiling = False
        so.profile_file_prefix = os.path.join(workdir, "onnxruntime_profile")
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
    runs = time_interleaved({k: timed(k) for k in embedders}, repeats=repeats, warmup=0, pause=0.2)
    load_after = os.getloadavg()
    lengths = [len(e.ids) for e in tokenizer.encode_batch(sentences)]
    flops = sum(_flops_per_sentence(lengths))
    ref = results["transformers"]
    rows, raw = [], {"sentences": len(sentences), "tokens": sum(lengths), "flops": flops}
    raw["load"] = [load_before, load_after]
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


def _int8_kernels(model, tokenizer, sets: dict[str, list[str]], repeats: int) -> tuple[list, dict]:
    """The int8 kernel lever: each corpus through ``embed(dtype="int8")`` with every int8 kernel this
    machine has (``ATTNLAB_INT8_KERNEL``), interleaved: fbgemm's and oneDNN's
    ``quantized::linear_dynamic`` (before) and oneDNN's qlinear with GELU and residual fused (after)."""
    from attnlab.models import embed
    from attnlab.models.int8 import ENV, KERNELS, int8_kernel

    kernels = []
    for k in KERNELS:  # those this machine can run (int8_kernel() refuses the others)
        try:
            with _env(ENV, k):
                int8_kernel()
            kernels.append(k)
        except ValueError:
            pass

    def embed_with(kernel, texts):
        def call():
            with _env(ENV, kernel), torch.inference_mode():
                embed(model, tokenizer, texts, batch_size=BATCH, dtype="int8")

        return call

    rows, raw = [], {}
    for name, texts in sets.items():
        fns = {k: embed_with(k, texts) for k in kernels}
        for fn in fns.values():
            fn()  # packs each kernel's weights once
        runs = time_interleaved(fns, repeats=repeats, warmup=0, pause=0.2)
        raw[name] = runs
        base = runs["fbgemm"]
        rows.append(
            [name] + [f"{fmt_s(summary(runs[k]), 's', 1, 2)} ({ratio(base, runs[k]):.2f}×)" for k in kernels]
        )
    return [["corpus", *[f"{k} (fbgemm time / its time)" for k in kernels]], rows], raw


@contextlib.contextmanager
def _env(name: str, value: str):
    """``os.environ[name] = value`` for the block; the previous value (or its absence) restored."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _batch_profiles(model, tokenizer, sets: dict[str, list[str]]) -> tuple[list[list[str]], dict]:
    """Top operations of one batch of 32 (self CPU time), float32 and int8, per corpus: the table's
    rows and ``{(corpus, dtype): top}``."""
    from attnlab.models import embed

    rows, tops = [], {}
    for name, sentences in sets.items():
        for dtype in ("float32", "int8"):
            batch = sentences[:BATCH]
            top = profile_top(lambda b=batch, d=dtype: embed(model, tokenizer, b, dtype=d), n=6, calls=5)
            tops[name, dtype] = top
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
    return rows, tops


def _rates(top: list[dict], lengths: list[int]) -> dict:
    """GFLOP/s of the projections and of the attention in one profiled float32 batch of sentences of
    ``lengths`` tokens (MiniLM: d = 384, d_ff = 1536, 6 layers), and each one's share of the time.
    Projections: 2 (4d² + 2 d d_ff) FLOPs a token a layer; attention (QK^T and AV): 4 L² d a sentence."""
    d, d_ff, layers = 384, 1536, 6
    ms = {r["op"]: r["self_ms_per_call"] for r in top}
    gemm = next((v for k, v in ms.items() if "linear_pointwise" in k), None)
    attn = next((v for k, v in ms.items() if "flash_attention" in k), None)
    total = top[0]["self_ms_per_call"]
    out = {}
    if gemm:
        flops = sum(lengths) * 2 * (4 * d * d + 2 * d * d_ff) * layers
        out["projections"] = (flops / gemm / 1e6, gemm / total)
    if attn:
        out["attention"] = (sum(4 * L * L * d for L in lengths) * layers / attn / 1e6, attn / total)
    return out  # {part: (GFLOP/s, share of the batch's time)}


def _embedders(path: str, model, tokenizer, workdir: str) -> dict:
    """Every candidate: ``{name: fn(sentences) -> [N, 384] embeddings}``."""
    from attnlab.models import embed

    def ours(dtype):
        return lambda texts: embed(model, tokenizer, texts, batch_size=BATCH, dtype=dtype)

    return {
        "attnlab float32": ours("float32"),
        "attnlab bfloat16": ours("bfloat16"),
        "attnlab int8": ours("int8"),
        "transformers": _hf_embedder(path, tokenizer),
        "sentence-transformers float32": _st_embedder(path, None),
        "sentence-transformers bfloat16": _st_embedder(path, torch.bfloat16),
        **_onnx_embedders(path, tokenizer, workdir),
    }


def _limits(raw: dict, pairs: dict, peaks: dict, rates: dict, padding: float) -> tuple[str, str]:
    """Why float32 and int8 fall short of their targets on this machine, from its own measurements:
    each side's fraction of its ceiling from the pair's own runs (:func:`_pairs`)."""
    from attnlab.models.cpu import mkl_isa

    def fraction(pair, name, dtype):
        return raw["flops"] / summary(pairs[pair][name])["median"] / peaks[dtype]

    f32, ort32 = (fraction(PAIRS[1], n, "float32") for n in PAIRS[1])
    i8, ort8 = (fraction(PAIRS[3], n, "int8") for n in PAIRS[3])
    ceiling = peaks["float32"] / 1e9
    f32_limit = (
        f"attnlab float32 runs at {100 * f32:.0f}% of the float32 matmul ceiling ({ceiling:.0f} GFLOP/s), "
        f"ONNX Runtime at {100 * ort32:.0f}%."
    )
    if "projections" in rates and "attention" in rates:
        (gemm, gemm_share), (attn, attn_share) = rates["projections"], rates["attention"]
        f32_limit += (
            f" In one profiled batch the projections run at {gemm:.0f} GFLOP/s ({100 * gemm / ceiling:.0f}% "
            f"of the ceiling, {100 * gemm_share:.0f}% of the time) and the attention at {attn:.0f} GFLOP/s "
            f"({100 * attn_share:.0f}% of the time): its d_k = 32 products are small GEMMs, which PyTorch's "
            "attention kernel hands to MKL"
        )
        if mkl_isa() != "avx512":
            f32_limit += f", whose code path here is {mkl_isa() or 'unknown'} (as MKL reports it)"
        f32_limit += "."
    f32_limit += (
        f" sentence-transformers computes {padding:.3f}× attnlab's tokens; ONNX Runtime, with every "
        "sentence sorted too, is bound by the same GEMMs, so what remains is attnlab's lead outside them"
    )
    i8_limit = (
        f"attnlab int8 runs at {100 * i8:.0f}% of the int8 matmul ceiling ({peaks['int8'] / 1e9:.0f} GOP/s), "
        f"ONNX Runtime int8 at {100 * ort8:.0f}%: the int8 ceiling is "
        f"{peaks['int8'] / peaks['float32']:.1f}× the float32 one, so the float32 attention (see the "
        "one-batch profiles) weighs more"
    )
    return f32_limit, i8_limit


PAIRS = [
    ("attnlab float32", "sentence-transformers float32"),
    ("attnlab float32", "onnxruntime float32"),
    ("attnlab bfloat16", "sentence-transformers float32"),
    ("attnlab int8", "onnxruntime int8"),
]


def _pairs(sentences: list[str], embedders: dict, repeats: int) -> dict:
    """Each target's two embedders alone, interleaved (A, B, A, B, ...) with a pause before each
    call: ``{(ours, peer): {name: [seconds]}}``. In the table of all eight, a candidate runs after a
    different one each time (transformers' padded batches, ONNX Runtime's spinning threads), which
    moved attnlab int8 between 1.42 and 1.92 s in one run; alone with its peer it moved 1.57-1.76 s."""
    return {
        pair: time_interleaved({k: lambda k=k: embedders[k](sentences) for k in pair}, repeats, 0, pause=0.2)
        for pair in PAIRS
    }


def _pair_table(pairs: dict, runs: dict, n: int) -> dict:
    rows = [
        [
            f"{ours} / {peer}",
            fmt_s(summary(r[ours]), "s", 1, 2),
            fmt_s(summary(r[peer]), "s", 1, 2),
            f"{ratio(r[peer], r[ours]):.2f}×",
            f"{ratio(runs[peer], runs[ours]):.2f}×",
        ]
        for (ours, peer), r in pairs.items()
    ]
    return table(
        f"The targets' ratios: the {n} sentences of 5–120 words, each pair alone, interleaved, median "
        "(min–max); beside it the same ratio from the table of all eight",
        ["pair", "attnlab", "peer", "peer time / attnlab time", "in the table of all eight"],
        rows,
    )


def _targets(pairs: dict, raw: dict, limits: tuple[str, str], amx: bool) -> list[dict]:
    """The targets, each ratio from its pair's own interleaved runs (:func:`_pairs`)."""
    r_st, r_ort, r_bf, r_i8 = (ratio(pairs[p][p[1]], pairs[p][p[0]]) for p in PAIRS)
    orti8 = "onnxruntime int8"
    cos32, cosbf = raw["attnlab float32"]["min_cosine"], raw["attnlab bfloat16"]["min_cosine"]
    cos_i8, cos_ort_i8 = raw["attnlab int8"]["min_cosine"], raw[orti8]["min_cosine"]
    f32_limit, i8_limit = limits
    bf_goal = 2.5 if amx else 1.3
    return [
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


NOTES = [
    "Cosines are to float32 transformers BertModel (mean pooling, L2 normalisation); the fraction of "
    "the ceiling divides useful FLOPs (attnlab audit cost at each sentence's real token count) per "
    "second by the matching dtype's matmul ceiling.",
    "ONNX Runtime: transformers' BertModel exported here with torch.onnx (opset 17), "
    "ORT_ENABLE_ALL, as many intra-op threads as torch, batches of 32 sorted by token count; int8 is "
    "onnxruntime.quantization.quantize_dynamic (QInt8 weights).",
    "Other engineers' jobs may share this 2-core machine: the load averages before and after each "
    "comparison are in the table titles; every ratio is between runs interleaved in one process.",
]


def _tables(
    sections: dict, pairs: dict, peaks: dict, kernel_table: list, profile_rows: list, rates: dict
) -> list:
    """Every table of the report after the two corpora's: the pairs, the ceilings, the int8 kernel
    lever, the one-batch profiles and the float32 rates."""
    from attnlab.models.precision import kernels

    main = sections["512 sentences of 5–120 words"]
    rate_rows = [[part, f"{r:.0f}", f"{100 * share:.0f}%"] for part, (r, share) in rates.items()]
    return [
        _pair_table(pairs, main["runs"], main["raw"]["sentences"]),
        table(
            "Matmul ceilings (attnlab audit peak --dtype), best of n = 256, 512, 1024",
            ["dtype", "GFLOP/s", "kernels of the attnlab path"],
            [[d, f"{p / 1e9:.0f}", kernels(d)] for d, p in peaks.items()],
        ),
        table(
            'The int8 kernel lever: each corpus through embed(dtype="int8") with each int8 kernel '
            "(ATTNLAB_INT8_KERNEL), interleaved; median (min–max)",
            *kernel_table,
        ),
        table(
            "One batch of 32 (the longest sentences of each corpus come first after sorting, so these "
            "are the first 32 in corpus order), profiled over 5 calls: self CPU time of the top "
            "operations",
            ["corpus", "dtype", "operation", "self ms per batch", "calls per batch", "share"],
            profile_rows,
        ),
        table(
            "float32, the first 32 long sentences: the rate of the projections (oneDNN's prepacked "
            "GEMM) and of the attention (PyTorch's flash kernel), from the profile above",
            ["part", "GFLOP/s", "share of the batch's time"],
            rate_rows,
        ),
    ]


def run(ctx: dict) -> dict:
    from attnlab.audit.peak import measure_peak
    from attnlab.models import load_pretrained
    from attnlab.models.precision import cpu_features, features_line
    from attnlab.models.pretrained import pretrained_path

    quick = ctx.get("quick", False)
    # On a shared, oversubscribed machine PyTorch's OpenMP pool loses most of its time in barriers
    # (measured here at load 16 on 2 cores: 200 queries in 4.1 s on 1 thread, 31.9 s on 2); the
    # thread count is the same for every peer and recorded with the results.
    threads = int(os.environ.get("ATTNLAB_BENCH_THREADS", "0")) or torch.get_num_threads()
    torch.set_num_threads(threads)
    path = str(pretrained_path("minilm"))
    sets = {"long": corpus(f"{path}/vocab.txt", 64 if quick else 512)}
    sets["queries"] = queries(f"{path}/vocab.txt", 200 if quick else 2000)
    model, tokenizer = load_pretrained("minilm")
    peaks = {d: measure_peak(seconds=1.0 if quick else 3.0, dtype=d)["peak_flops"] for d in KIND.values()}
    repeats = 1 if quick else int(os.environ.get("ATTNLAB_BENCH_REPEATS", "3"))
    kernel_table, kernel_raw = _int8_kernels(model, tokenizer, sets, repeats)
    profile_rows, tops = _batch_profiles(model, tokenizer, sets)
    with tempfile.TemporaryDirectory() as workdir:
        embedders = _embedders(path, model, tokenizer, workdir)
        with torch.inference_mode():
            sections = {
                "512 sentences of 5–120 words": _compare(
                    "long", sets["long"], embedders, tokenizer, peaks, repeats
                ),
                "2,000 queries of 3–12 words": _compare(
                    "queries", sets["queries"], embedders, tokenizer, peaks, repeats
                ),
            }
            pairs = _pairs(sets["long"], embedders, 1 if quick else max(5, repeats))
    main = sections["512 sentences of 5–120 words"]
    lengths = [len(e.ids) for e in tokenizer.encode_batch(sets["long"])]
    computed = _tokens_computed(sets["long"], lengths)
    padding = computed["sentence-transformers"] / computed["attnlab"]
    rates = _rates(
        tops["long", "float32"], [len(e.ids) for e in tokenizer.encode_batch(sets["long"][:BATCH])]
    )
    limits = _limits(main["raw"], pairs, peaks, rates, padding)
    return {
        "name": NAME,
        "title": TITLE,
        "raw": {
            "cpu": cpu_features(),
            "threads": threads,
            "peaks": peaks,
            "int8_kernels": kernel_raw,
            "pairs": {f"{a} / {b}": r for (a, b), r in pairs.items()},
            "float32_rates": rates,
            **{k: v["raw"] for k, v in sections.items()},
        },
        "targets": _targets(pairs, main["raw"], limits, cpu_features()["flags"]["amx_bf16"]),
        "reports": [{"what": "CPU features", "shown": features_line()}],
        "tables": [v["table"] for v in sections.values()]
        + _tables(sections, pairs, peaks, kernel_table, profile_rows, rates),
        "notes": [
            f"CPU: {features_line()}; {threads} thread(s) for every peer (torch and ONNX Runtime).",
            *NOTES,
        ],
    }
