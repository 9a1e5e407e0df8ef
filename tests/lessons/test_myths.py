"""Every myth's demonstration, checked against numbers computed here by hand or taken from the notes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.lessons.myths import MYTHS, get_myth

E = math.e


def _close(a, b, tol=1e-9):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=tol, rtol=0)


def check_1(ev):
    assert ev["memory_shape"] == [1, 5, 8] and ev["output_shape"] == [1, 3, 8]
    assert ev["distinct_contexts"] == 3


def check_2(ev):
    # plain notes sec. 4: scores [1, 0] -> [e/(e+1), 1/(e+1)] = [0.731, 0.269]; unscaled [8, 0] -> e^8/(e^8+1)
    assert _close(ev["scaled"], [E / (E + 1), 1 / (E + 1)])
    assert _close(ev["unscaled"], [E**8 / (E**8 + 1), 1 / (E**8 + 1)])
    assert ev["min_row_spread_random"] > 0.05


def check_3(ev):
    assert _close(ev["weights"], [0.5, 0.5]) and _close(ev["z"], [0.5, 1.0])  # notes sec. 2
    assert _close(ev["keys_mix"], [0.0])


def check_4(ev):
    assert _close(ev["row_sums"], [1, 1, 1], 1e-12)
    cols = np.array(ev["column_sums"])
    assert cols.shape == (5,) and abs(cols.sum() - 3.0) < 1e-12  # 3 rows of mass spread over 5 columns
    assert np.abs(cols - 1).max() > 0.1


def check_5(ev):
    assert ev["min_relative_difference"] > 0.5  # real MiniLM: the three matrices are far apart
    assert ev["asymmetry_shared"] == 0.0 and ev["asymmetry_distinct"] > 1.0


def check_6(ev):
    assert ev["change_at_other_tokens"] > 1e-3
    assert 0.0 < ev["off_diagonal_mass"] < 1.0


def check_7(ev):
    assert ev["ffn_change_elsewhere"] == 0.0
    assert ev["attention_change_elsewhere"] > 1e-3
    assert ev["left_multiplication_valid"] is False


def check_8(ev):
    assert ev["per_layer"] == 3_152_384 and ev["stack"] == 6 * 3_152_384 == 18_914_304  # notes sec. 4
    assert ev["tensors"] == 6 * 16  # 4 projections + 2 FFN linears (weight, bias) + 2 norms x 2: none shared
    assert ev["init_min_pair_difference"] > 0.5 and ev["minilm_min_pair_difference"] > 0.5


def check_9(ev):
    d = 512
    assert ev["counts"] == {h: 4 * d * d + 4 * d for h in (1, 2, 4, 8)}  # 1,050,624 each
    assert set(ev["per_projection"].values()) == {d * d}


def check_10(ev):
    for row in ev["rows"]:
        t = row["T"]
        assert row["score_entries"] == 2 * t * t  # B=1, h=2
        assert row["qk_macs"] == row["av_macs"] == 2 * t * t * 8
        assert row["projection_macs"] == 4 * t * 16 * 16
    assert ev["doubling_ratio"] == 4.0
    growth = ev["kinds_doubling"]  # audit_cost's terms: the dense causal ones nearly x4, the rest x2
    assert 3.0 < growth["dense causal"] < 4.0
    assert growth["linear attention"] == growth["SSM"] == 2.0
    assert 1.99 < growth["window W=256"] < 2.01


def check_11(ev):
    assert ev["argmax"] == [3, 2, 1, 0]
    # off-target scores are 0 against 9 on target: diagonal weight 1/(e^9 + 3) for each of the 4 rows
    assert _close(ev["diagonal_mass"], 1 / (E**9 + 3), 1e-12)
    assert _close(ev["row_sums"], [1, 1, 1, 1], 1e-12)


def check_12(ev):
    assert abs(ev["sigma_1"]["scaled_std"] - 1.0) < 0.05  # the notes' variance argument holds at sigma=1
    assert abs(ev["sigma_4"]["scaled_std"] - 16.0) < 0.8  # Var(q.k)/d_k = sigma^4 = 256
    assert ev["sigma_4"]["mean_max_weight"] > 0.9 > ev["sigma_1"]["mean_max_weight"]
    assert ev["sigma_4"]["median_max_gradient"] < 0.01 < ev["sigma_1"]["median_max_gradient"]


def check_13(ev):
    assert ev["row_shape"] == ev["column_shape"] == [3, 2] and ev["max_difference"] == 0.0


def check_14(ev):
    assert ev["concat"] == [1, 2, 3, 4] and ev["right"] == [4, 6] and ev["column"] == [4, 6]  # notes sec. 6
    assert ev["left"] == "shape error"


def check_15(ev):
    assert ev["accuracy"] == {3: 1.0, 30: 1.0, 300: 1.0} and ev["order_collision"] is True


def check_16(ev):
    assert _close(ev["weights"], [0.7, 0.3]) and _close(ev["contributions"], [0.007, 3.0])
    assert (ev["argmax_weight"], ev["argmax_contribution"]) == (0, 1)


def check_17(ev):
    assert ev["alignment_shape"] == [3, 6] and ev["context_shape"] == [3, 5]
    assert _close(ev["row_sums"], [1, 1, 1], 1e-12)


def check_18(ev):
    assert ev["scaled_row_sum"] == 0.5 and abs(ev["softmax_row_sum"] - 1) < 1e-12  # (1 + 2 - 2) / 2
    assert ev["shape_before"] == ev["shape_after"] == [1, 3]


def check_19(ev):
    assert ev["no_positions"] < 1e-12
    assert ev["sinusoidal"] > 1e-2 and ev["causal_mask"] > 1e-2


def check_20(ev):
    assert ev["heads"] == 6 * 12 and ev["row_sum_error"] < 1e-5  # MiniLM: 6 layers x 12 heads, real weights
    assert ev["sink_heads"] >= 10  # many heads do little but attend to [CLS]/[SEP]
    assert ev["closest_pair_tv"] < 0.2 < ev["median_pair_tv"]  # a near-duplicate pair among distinct heads


def check_21(ev):
    d, f = 512, 2048
    assert (ev["MHA"], ev["FFN"], ev["norms"]) == (1_050_624, 2_099_712, 2_048)  # notes sec. 4
    assert ev["total"] == ev["module"] == ev["torch"] == 4 * d * d + 2 * d * f + f + 9 * d == 3_152_384
    assert ev["weights_only"] == 4 * d * d + 2 * d * f


def check_22(ev):
    assert ev["per_head_shape"] == [512, 64] and ev["per_head_weights"] == 512 * 64 == 32_768


def check_23(ev):
    d, f = 16, 64
    n = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d
    assert [r["parameters"] for r in ev["rows"]] == [n, n]
    assert [r["output_shape"] for r in ev["rows"]] == [[1, 10, 16], [1, 100, 16]]
    assert [r["score_entries"] for r in ev["rows"]] == [4 * 100, 4 * 10_000]


def check_24(ev):
    assert ev["encoder_change"] > 1e-3 and ev["decoder_change"] == 0.0
    assert ev["encoder_attention"] == ["attn"] and ev["decoder_attention"] == ["cross_attn", "self_attn"]


def check_25(ev):
    assert ev["post_vs_torch"] < 1e-10 and ev["pre_vs_torch"] > 1e-2
    assert ev["post_max_abs_mean"] < 1e-12 and abs(ev["post_mean_std"] - 1) < 1e-3


def check_26(ev):
    assert ev["naive_is_nan"] is True and _close(ev["stable"], [E / (E + 1), 1 / (E + 1)])
    assert ev["small_difference"] < 1e-15


def check_27(ev):
    for t, w in ev["weights"].items():
        assert _close(w, E**3 / (E**3 + t - 1), 1e-12)
    acc = ev["accuracy"]  # the quick extrapolation experiment's RoPE model, trained at T = 16
    assert acc["rope"][16] >= 0.95 and acc["rope"][128] < 0.8  # perfect at L, far from it at 8L
    assert ev["chance"] == 1 / 16 and acc["rope"][128] > ev["chance"] + 0.2  # ... yet far above chance
    assert all(acc["pi"][t] >= 0.95 for t in (16, 32, 64, 128))  # interpolated positions recover it


def check_28(ev):
    for row in ev["flops"].values():
        assert row["qk"] == row["av"] == 2 * 1024 * 1024 * 512  # 2 * T^2 * d, independent of h
        assert row["projections"] == 4 * 2 * 1024 * 512 * 512


def check_29(ev):
    assert set(ev["max_difference"]) == {16, 64, 128}
    assert max(ev["max_difference"].values()) < 1e-12


CHECKS = {int(name.split("_")[1]): fn for name, fn in dict(globals()).items() if name.startswith("check_")}


def test_every_myth_has_a_check_and_numbers_run_1_to_n():
    assert [m.number for m in MYTHS] == list(range(1, len(MYTHS) + 1))
    assert set(CHECKS) == {m.number for m in MYTHS}


SLOW = {27}  # trains the quick extrapolation experiment's RoPE model (about 5 s of CPU)


@pytest.mark.parametrize(
    "number", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(CHECKS)]
)
def test_demonstration(number):
    myth = get_myth(number)
    lines, evidence = myth.demonstrate()
    assert lines and all(isinstance(line, str) for line in lines)
    CHECKS[number](evidence)


def test_issue_list_is_covered():
    """The 14 misconceptions named in issue 8 each appear (keyword match on the claims)."""
    claims = " ".join(m.claim.lower() for m in MYTHS)
    for words in (
        ["two rnns"],
        ["uniform"],
        ["sum of the keys"],
        ["softmax", "queries"],
        ["w^q = w^k = w^v"],
        ["only in the decoder"],
        ["ffn attends"],
        ["share their weights"],
        ["more heads"],
        ["linear in sequence length"],
        ["diagonal"],
        ["saturates"],
        ["transposed outputs"],
        ["w^o multiplies on the left"],
    ):
        assert all(w in claims for w in words), words


def test_every_myth_names_its_source_in_words():
    from attnlab.lessons.myths import COURSE, NOTES, PLAIN

    for m in MYTHS:
        assert any(s in m.source for s in (NOTES, PLAIN, COURSE)), m.number
        assert "seed" not in m.source and "§" not in m.source, m.source
        assert m.claim and m.why_false


def test_registry_is_complete_and_keyed_by_number():
    """Every number 1..N is present once, with a claim, a source, an explanation and a demo."""
    from attnlab.lessons.myths import TOPICS

    assert [m.number for m in MYTHS] == list(range(1, len(MYTHS) + 1))
    assert len(MYTHS) >= 29
    for m in MYTHS:
        assert m.claim.strip() and m.source.strip() and m.why_false.strip() and callable(m.demo)
        assert m.topic in TOPICS and m.demo.__module__ == f"attnlab.lessons.myths.{m.topic}"
        assert get_myth(m.number) is m


def test_registry_refuses_duplicates_and_gaps(monkeypatch):
    from attnlab.lessons.myths import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    with pytest.raises(ValueError, match="registered twice"):
        registry.myth(1, claim="c", source="s", why_false="w")(lambda: ([], {}))
    with pytest.raises(ValueError, match="non-empty source"):
        registry.myth(len(MYTHS) + 5, claim="c", source=" ", why_false="w")(lambda: ([], {}))
    registry.myth(len(MYTHS) + 2, claim="c", source="s", why_false="w")(lambda: ([], {}))
    with pytest.raises(ValueError, match=f"missing \\[{len(MYTHS) + 1}\\]"):
        registry.ordered()


@pytest.mark.parametrize("bad", [0, len(MYTHS) + 1, "x", "1.5", -3])
def test_unknown_myth_is_a_value_error(bad):
    with pytest.raises(ValueError, match="unknown myth"):
        get_myth(bad)
