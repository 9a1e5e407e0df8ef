"""embed(dtype=...) on the real MiniLM against transformers' float32 BertModel (the test-only oracle):
the bfloat16 and int8 paths' cosine bounds, the float32 path's parity, truncation counts, the
slow-bfloat16 warning, and the CPU feature report."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
import torch.nn.functional as F

from attnlab.models import embed, load_pretrained, precision
from attnlab.models.cpu import capped
from attnlab.models.pretrained import pretrained_path

pytestmark = pytest.mark.isa  # rerun under the vector-unit caps (scripts/isa-caps.sh)


def _corpus(n: int = 40, seed: int = 1) -> list[str]:
    """Seeded sentences of 5-120 whole words from the model's vocabulary, plus a few real ones."""
    words = [w.strip() for w in (pretrained_path("minilm") / "vocab.txt").open(encoding="utf-8")]
    words = [w for w in words if w.isalpha() and w.islower() and len(w) >= 2]
    rng = random.Random(seed)
    made = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 120))) for _ in range(n)]
    return made + ["A man is playing a guitar.", "Hello world", "The stock market fell sharply today."]


@pytest.fixture(scope="module")
def setup():
    import transformers  # the oracle: a hard dependency of the [test] extra

    model, tokenizer = load_pretrained("minilm")
    path = str(pretrained_path("minilm"))
    hf = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(path)
    sentences = _corpus()
    batch = hf_tok(sentences, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = hf(**batch).last_hidden_state  # [N, T, 384]
    m = batch["attention_mask"][..., None].float()  # [N, T, 1]
    reference = F.normalize((h * m).sum(1) / m.sum(1), dim=-1)  # [N, 384]
    return model, tokenizer, sentences, reference


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dtype", "min_bound", "mean_bound"),
    [
        ("float32", 0.99999, 0.999999),
        ("bfloat16", 0.9999, 0.99995),
        ("int8", None, None),
    ],
)
def test_cosine_to_float32_transformers(setup, dtype, min_bound, mean_bound, int8_cosine_bounds):
    """Measured: bfloat16 min 0.99996; int8 min 0.981 / mean 0.987 with 8-bit inputs, 0.919 with 7-bit
    ones (docs/pretrained.md). The int8 bounds depend on the CPU (the ``int8_cosine_bounds`` fixture)."""
    if dtype == "int8":
        min_bound, mean_bound = int8_cosine_bounds
    model, tokenizer, sentences, reference = setup
    vectors = embed(model, tokenizer, sentences, dtype=dtype)  # [N, 384] float32
    assert vectors.dtype == torch.float32 and vectors.shape == reference.shape
    cos = (vectors * reference).sum(-1)  # both unit vectors
    assert cos.min() >= min_bound and cos.mean() >= mean_bound, (cos.min().item(), cos.mean().item())
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(len(sentences)), rtol=0, atol=1e-5)


def test_prepared_weights_follow_the_model(setup):
    """The per-dtype weights are cached, and rebuilt when a parameter changes in place."""
    from attnlab.models.sentence import packed_layers

    model = setup[0]
    first = packed_layers(model, "bfloat16")
    assert packed_layers(model, "bfloat16") is first
    with torch.no_grad():
        model.layers[0].ffn.linear1.bias.add_(0.0)  # bumps the version counter
    assert packed_layers(model, "bfloat16") is not first


def test_truncation_is_counted(setup):
    model, tokenizer, _, _ = setup
    stats: dict = {}
    embed(model, tokenizer, ["word " * 300, "short"], stats=stats)
    assert stats == {"sentences": 2, "tokens": 256 + 3, "truncated": 1, "unknown": 0, "unknown_words": []}


def test_bad_dtype_and_the_slow_bfloat16_warning(setup, monkeypatch):
    model, tokenizer, _, _ = setup
    with pytest.raises(ValueError, match="dtype must be one of float32, bfloat16, int8; got 'float16'"):
        embed(model, tokenizer, ["x"], dtype="float16")
    monkeypatch.setattr(precision, "fast_bfloat16", lambda: False)
    monkeypatch.setattr(precision, "_warned_slow_bf16", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        embed(model, tokenizer, ["x"], dtype="bfloat16")
        embed(model, tokenizer, ["y"], dtype="bfloat16")
    slow = [w for w in caught if "without AMX-BF16 or AVX-512 BF16" in str(w.message)]
    assert len(slow) == 1  # once per process


EVERYTHING = set(precision.FEATURES)


@pytest.mark.parametrize(
    ("environ", "left"),
    [
        ({}, EVERYTHING),
        ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, {"avx2"}),
        ({"ATEN_CPU_CAPABILITY": "avx2"}, {"avx2", "avx_vnni"}),
        ({"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}, {"avx2"}),
        (
            {"ONEDNN_MAX_CPU_ISA": "avx512_core_bf16"},
            {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16"},
        ),
        ({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, EVERYTHING),  # MKL's path is read from MKL (mkl_isa)
        ({"FBGEMM_ENABLE_INSTRUCTIONS": "AVX512_E1"}, {"avx2", "avx512f", "avx512_vnni", "avx_vnni"}),
        ({"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}, {"avx2"}),
        ({"ATEN_CPU_CAPABILITY": "default"}, set()),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, EVERYTHING),  # the top tier caps nothing
        ({"ONEDNN_MAX_CPU_ISA": "bogus"}, EVERYTHING),  # a value the library ignores caps nothing
    ],
)
def test_the_caps_on_the_vector_units_take_features_away(environ, left):
    """A process capped by ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA / FBGEMM_ENABLE_INSTRUCTIONS sees
    the features the weakest cap leaves, as a weaker CPU would; MKL's cap is read from MKL itself."""
    assert capped(EVERYTHING, environ) == {f: f in left for f in precision.FEATURES}
    assert capped({"avx2"}, environ)["avx512f"] is False  # a cap never adds what the CPU lacks


def test_cpu_features_come_from_proc_cpuinfo(monkeypatch):
    monkeypatch.delenv("ATTNLAB_INT8_KERNEL", raising=False)
    info = precision.cpu_features()
    text = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read()
    flags = next(line for line in text.splitlines() if line.startswith("flags")).split(":", 1)[1].split()
    assert info["hardware"] == {f: f in flags for f in precision.FEATURES}
    assert info["flags"] == capped(set(flags))  # what the caps in this environment leave
    have = {f for f, on in info["flags"].items() if on}
    assert precision.fast_bfloat16() == ("amx_bf16" in have or "avx512_bf16" in have)
    onednn = "onednn" in torch.backends.quantized.supported_engines
    amx, vnni = "amx_int8" in have, "avx512_vnni" in have
    unit = "AMX-INT8" if amx and onednn else "AVX-512 VNNI" if vnni and onednn else "fbgemm"
    engine = "onednn" if (amx or vnni) and onednn else torch.backends.quantized.engine
    said = precision.kernels("int8")
    assert unit in said and precision.int8_engine() == engine
    assert ("qlinear_pointwise" in said) == (precision.int8_kernel() == "onednn qlinear")
    before = torch.backends.quantized.engine
    precision.MAKERS["int8"](torch.randn(8, 4), None)
    assert torch.backends.quantized.engine == before  # packing under oneDNN leaves the global engine


@pytest.mark.parametrize(
    ("dtype", "act", "tol"),
    [("float32", "gelu", 1e-5), ("float32", "silu", 1e-5), ("bfloat16", "gelu", 0.06)],
)
def test_prepacked_linear_equals_f_linear(dtype, act, tol):
    """The prepacked (oneDNN) linear with its fused activation against torch's F.linear + activation
    in float64; bfloat16 within bf16 rounding of inputs and output (|y| <= ~8 here)."""
    from attnlab.nn.layers import ACTIVATIONS

    torch.manual_seed(0)
    w, b, x = (
        torch.randn(96, 40) / 6,
        torch.randn(96),
        torch.randn(33, 40),
    )  # [d_out, d_in], [d_out], [N, d_in]
    y = precision.MAKERS[dtype](w, b, act)(x)  # [33, 96]
    want = ACTIVATIONS[act](F.linear(x.double(), w.double(), b.double()))  # [33, 96]
    assert y.shape == (33, 96) and y.dtype == getattr(torch, dtype)
    torch.testing.assert_close(y.double(), want, rtol=0, atol=tol)
    assert precision.MAKERS[dtype](w, b)(x[:0]).shape == (0, 96)


def test_a_weight_off_the_cpu_takes_f_linear():
    """oneDNN's prepacked linear is a CPU kernel: a weight elsewhere (here on the meta device, as a
    CUDA one would) gets F.linear, whose output lives with it."""
    w, b = torch.randn(6, 4, device="meta"), torch.randn(6, device="meta")
    y = precision.MAKERS["float32"](w, b, "gelu")(torch.randn(3, 4, device="meta"))
    assert y.device.type == "meta" and y.shape == (3, 6)
