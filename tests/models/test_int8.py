"""The int8 linears (attnlab.models.int8): the scales PyTorch's dynamic quantisation would choose,
products within 8-bit rounding of float64, every kernel agreeing, the fused GELU and residual sum
equal to the unfused ones, and bad input refused."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch
import torch.nn.functional as F

from attnlab.models import int8

pytestmark = pytest.mark.isa  # rerun under the vector-unit caps (scripts/isa-caps.sh)

QLINEAR = (
    hasattr(torch.ops.onednn, "qlinear_pointwise") and "onednn" in torch.backends.quantized.supported_engines
)
_FLAGS = int8.cpu_features()["flags"]  # capped as the environment caps the libraries
# u8 x s8 pairs summed in int32 (full 8-bit inputs); without these, AVX2's vpmaddubsw saturates in int16
INT32_SUMS = _FLAGS["avx512_vnni"] or _FLAGS["avx_vnni"] or _FLAGS["amx_int8"]
ONEDNN = "onednn" in torch.backends.quantized.supported_engines
USABLE = {"fbgemm": True, "onednn linear_dynamic": ONEDNN, "onednn qlinear": QLINEAR and INT32_SUMS}
KERNELS = [k for k in int8.KERNELS if USABLE[k]]


def _data(seed=0, d_out=48, d_in=32, n=20):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d_out, d_in, generator=g) / d_in**0.5  # [d_out, d_in]
    return w, torch.randn(d_out, generator=g), torch.randn(n, d_in, generator=g)  # b [d_out], x [n, d_in]


@pytest.mark.parametrize("shift", [0.0, 3.0, -3.0])
def test_input_scale_and_zero_point_are_pytorchs_dynamic_choice(shift):
    """Over [min(x, 0), max(x, 0)] with all 8 bits: the same scale, zero point and bytes as
    torch.quantize_per_tensor_dynamic, whose bytes the result still holds after the quantised
    tensor is gone (it is a view of its storage)."""
    x = torch.randn(7, 33) + shift  # all positive, all negative, or both
    q, s, z = int8.quantize_input(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = torch.quantize_per_tensor_dynamic(x, torch.quint8, False)
    gc.collect()
    assert q.dtype == torch.uint8 and q.shape == x.shape
    assert s == pytest.approx(ref.q_scale(), rel=1e-6) and z == ref.q_zero_point()
    assert torch.equal(q, ref.int_repr())
    assert (q.float() - z).mul(s).sub(x).abs().max() <= s / 2 + 1e-6  # round to nearest


def test_non_finite_input_is_refused():
    x = torch.randn(4, 8)
    x[1, 2] = float("nan")
    with pytest.raises(ValueError, match="inf or NaN"):
        int8.quantize_input(x)


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_is_within_eight_bit_rounding_of_float64(kernel):
    w, b, x = _data()
    exact = F.linear(x.double(), w.double(), b.double())  # [20, 48]
    y = int8.int8_linear(w, b, kernel=kernel)(x)
    assert y.dtype == torch.float32 and y.shape == (20, 48)
    # |error| <= sum_j |x_j| s_W/2 + |w_j| s_x/2 per output: a few 1e-3 of the largest product
    assert (y.double() - exact).abs().max() <= 0.02 * exact.abs().max()
    assert int8.int8_linear(w, b, kernel=kernel)(x[:0]).shape == (0, 48)


@pytest.mark.skipif(not QLINEAR or INT32_SUMS, reason="needs oneDNN's qlinear on a CPU without VNNI/AMX")
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_qlinear_without_int32_sums_is_refused_naming_the_feature(how, monkeypatch):
    """Without VNNI or AMX-INT8 oneDNN's qlinear sums u8 x s8 pairs in saturating int16: on an AVX2
    CPU its largest error was 0.30 of the largest output. It is refused, by argument or variable."""
    w, b, _ = _data()
    if how == "environment":
        monkeypatch.setenv(int8.ENV, "onednn qlinear")
        with pytest.raises(ValueError, match=int8.ENV) as caught:
            int8.int8_kernel()
    else:
        with pytest.raises(ValueError, match="onednn qlinear") as caught:
            int8.int8_linear(w, b, kernel="onednn qlinear")
    assert "avx512_vnni" in str(caught.value) and "amx_int8" in str(caught.value)


def test_kernels_agree_with_each_other():
    w, b, x = _data(1)
    ys = {k: int8.int8_linear(w, b, kernel=k)(x) for k in KERNELS}
    first = next(iter(ys.values()))
    for k, y in ys.items():
        assert (y - first).abs().max() <= 0.02 * first.abs().max(), k


@pytest.mark.skipif(not USABLE["onednn qlinear"], reason="needs oneDNN's qlinear and VNNI or AMX-INT8")
def test_fused_gelu_and_residual_equal_the_unfused_ones():
    """The same quantised product, with GELU or a residual sum inside the kernel."""
    w, b, x = _data(2)
    plain = int8.int8_linear(w, b, kernel="onednn qlinear")
    gelu = int8.int8_linear(w, b, "gelu", kernel="onednn qlinear")
    torch.testing.assert_close(gelu(x), F.gelu(plain(x)), rtol=0, atol=1e-5)
    r = torch.randn(20, 48)
    want = plain(x) + r
    got = plain(x, r)  # written into r's memory (the caller's residual stream, no longer needed)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert got.data_ptr() == r.data_ptr()
    assert int8.int8_linear(w, b, "silu", kernel="onednn qlinear")(x).shape == (20, 48)  # unfused
    with pytest.raises(ValueError, match=r"\bresidual\b.*\bwithout an activation$"):
        gelu(x, r)


def test_the_kernel_follows_the_cpu_and_bad_names_are_refused():
    flags = _FLAGS
    want = (
        "onednn qlinear" if (flags["avx512_vnni"] or flags["amx_int8"]) and ONEDNN and QLINEAR else "fbgemm"
    )
    assert int8.int8_kernel() == want
    w, b, _ = _data()
    with pytest.raises(ValueError, match="'mkl'"):
        int8.int8_linear(w, b, kernel="mkl")
    before = torch.backends.quantized.engine
    int8.int8_linear(w, b, kernel="onednn linear_dynamic" if ONEDNN else "fbgemm")
    assert torch.backends.quantized.engine == before  # packing under another engine leaves the global one


def test_the_kernel_can_be_chosen_by_environment(monkeypatch):
    monkeypatch.setenv(int8.ENV, "fbgemm")
    assert int8.int8_kernel() == "fbgemm"
    monkeypatch.setenv(int8.ENV, "cublas")
    with pytest.raises(ValueError, match="ATTNLAB_INT8_KERNEL.*'cublas'"):
        int8.int8_kernel()


def test_embeddings_with_each_kernel_are_close_to_float32_and_cached_per_kernel(
    monkeypatch, int8_cosine_bounds
):
    """MiniLM through embed(dtype="int8") with the default kernel and with fbgemm: each within int8
    rounding of float32 (cosine >= MIN_COSINE for this CPU's input width), and not the same numbers
    (the cache keys on the kernel)."""
    from attnlab.models import embed, load_pretrained

    model, tokenizer = load_pretrained("minilm")
    texts = ["The cat sat on the mat.", "Attention is all you need, they said.", "A short one."]
    ref = embed(model, tokenizer, texts)  # [3, 384] float32
    monkeypatch.delenv(int8.ENV, raising=False)
    default = embed(model, tokenizer, texts, dtype="int8")
    monkeypatch.setenv(int8.ENV, "fbgemm")
    fbgemm = embed(model, tokenizer, texts, dtype="int8")
    for got in (default, fbgemm):
        assert F.cosine_similarity(got, ref).min() >= int8_cosine_bounds[0]
    assert int8.int8_kernel() == "fbgemm"
    monkeypatch.delenv(int8.ENV)
    if int8.int8_kernel() != "fbgemm":  # two kernels here: two sets of packed layers
        assert not torch.equal(default, fbgemm)


@pytest.mark.parametrize(
    "x", [torch.zeros(3, 4), torch.full((3, 4), 1e-42), torch.randn(3, 4, dtype=torch.float64)]
)
def test_degenerate_and_float64_inputs_get_pytorchs_scale(x):
    """All zeros and values whose scale's inverse overflows float32 get PyTorch's fallback scale
    (0.1); float64 is quantised as float32."""
    q, s, z = int8.quantize_input(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = torch.quantize_per_tensor_dynamic(x.float(), torch.quint8, False)
    assert s == pytest.approx(ref.q_scale(), rel=1e-6) and z == ref.q_zero_point()
    assert torch.equal(q, ref.int_repr())
    with pytest.raises(ValueError, match="empty input"):
        int8.quantize_input(x[:0])


def test_a_weight_off_the_cpu_is_refused_by_name():
    w = torch.randn(4, 3, device="meta")
    with pytest.raises(ValueError, match=r"^int8\b.*\bCPU\b.*\bon meta\b"):
        int8.int8_linear(w, None)
