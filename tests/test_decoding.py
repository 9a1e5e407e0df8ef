"""Decoding: KV-cached generation equals recomputation at every step (GQA and RoPE too), beam size 1
equals greedy, beam search finds the exhaustive optimum on small random models, EOS handling and
n-best, seeded sampling with temperature / top-k / top-p, bad options."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from attnlab import decoding
from attnlab.models import GPT, AttentionRNN, AttentionRNNConfig, GPTConfig, Transformer, TransformerConfig

BOS, EOS = 1, 2


def _transformer(seed: int, vocab: int = 5, **kw) -> Transformer:
    torch.manual_seed(seed)
    cfg = dict(
        src_vocab=7,
        tgt_vocab=vocab,
        d_model=16,
        num_heads=2,
        d_ff=32,
        num_encoder_layers=1,
        num_decoder_layers=2,
        max_len=16,
        dropout=0.0,
    )
    model = Transformer(TransformerConfig(**{**cfg, **kw})).eval()
    with torch.no_grad():
        model.generator.weight.mul_(3.0)  # peakier distributions than Xavier's
    return model


def _gpt(seed: int, vocab: int = 5, **kw) -> GPT:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=vocab, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=24)
    model = GPT(GPTConfig(**{**cfg, **kw})).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model


def _rnn(seed: int, vocab: int = 5) -> AttentionRNN:
    torch.manual_seed(seed)
    model = AttentionRNN(AttentionRNNConfig(src_vocab=7, tgt_vocab=vocab, emb=8, hidden=16)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # peakier distributions
    return model


def _model(family: str, seed: int, vocab: int = 5):
    return {"transformer": _transformer, "gpt": _gpt, "rnn": _rnn}[family](seed, vocab=vocab)


def _src(seed: int, b: int = 2, s: int = 4) -> torch.Tensor:
    """Ids valid for every model here (source vocabulary 7, GPT vocabularies >= 5)."""
    return torch.randint(3, 5, (b, s), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kw", [dict(), dict(positions="rope", num_kv_heads=2), dict(num_kv_heads=1)])
def test_gpt_cached_and_uncached_logits_agree_at_every_step(kw):
    model = _gpt(0, vocab=11, **kw)
    prompt = torch.randint(0, 11, (3, 5), generator=torch.Generator().manual_seed(1))
    ids_c, logits_c = decoding.generate(model, prompt, 12, use_cache=True, return_logits=True)
    ids_u, logits_u = decoding.generate(model, prompt, 12, use_cache=False, return_logits=True)
    assert logits_c.shape == (3, 12, 11)
    torch.testing.assert_close(logits_c, logits_u, rtol=0, atol=1e-5)
    assert torch.equal(ids_c, ids_u) and torch.equal(ids_c[:, :5], prompt)
    s_c = decoding.generate(model, prompt, 12, use_cache=True, temperature=0.8, top_k=5, seed=3)
    s_u = decoding.generate(model, prompt, 12, use_cache=False, temperature=0.8, top_k=5, seed=3)
    assert torch.equal(s_c, s_u)


def test_transformer_cached_greedy_equals_recomputed_greedy():
    """attnlab.decoding.greedy (KV cache) against greedy written here by re-running forward on the prefix."""
    model = _transformer(2, vocab=9)
    src = _src(3, b=3)
    got = decoding.greedy(model, src, max_len=8)
    prefix = torch.full((3, 1), BOS)
    with torch.no_grad():
        for _ in range(8):
            nxt = model(src, prefix)[:, -1].argmax(-1)  # [B]
            prefix = torch.cat([prefix, nxt[:, None]], 1)
    want = prefix[:, 1:]
    for row, ref_row in zip(got.tolist(), want.tolist()):
        n = ref_row.index(EOS) + 1 if EOS in ref_row else len(ref_row)
        assert row[:n] == ref_row[:n] and all(t == 0 for t in row[n:])


@pytest.mark.parametrize("family", ["transformer", "gpt", "rnn"])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_size_one_equals_greedy(family, alpha):
    model = _model(family, 4, vocab=6)
    src = _src(5, b=4)
    greedy = decoding.greedy(model, src, max_len=7)
    beam = decoding.beam_search(model, src, beam_size=1, max_len=7, length_penalty=alpha)
    assert torch.equal(beam.tokens, greedy)


def _sequence_log_probs(model, src, seqs, family):
    """log p(seq | src) for each candidate sequence (teacher forcing through forward)."""
    seqs_t = torch.tensor(seqs)  # [N, L]
    n = seqs_t.shape[0]
    with torch.no_grad():
        if family != "gpt":
            tgt_in = torch.cat([torch.full((n, 1), BOS), seqs_t[:, :-1]], 1)
            logits = model(src.expand(n, -1), tgt_in)  # [N, L, V]
        else:
            full = torch.cat([src.expand(n, -1), seqs_t], 1)  # prompt then continuation
            logits = model(full)[:, src.shape[1] - 1 : -1]  # [N, L, V]
    return F.log_softmax(logits.double(), -1).gather(-1, seqs_t[..., None])[..., 0].sum(-1)  # [N]


def _exhaustive_best(model, src, vocab, max_len, alpha, family):
    best = (float("-inf"), None)
    for length in range(1, max_len + 1):
        seqs = [
            list(p)
            for p in itertools.product(range(vocab), repeat=length)
            if EOS not in p[:-1] and (p[-1] == EOS or length == max_len)
        ]
        if not seqs:
            continue
        scores = _sequence_log_probs(model, src, seqs, family) / length**alpha
        i = int(scores.argmax())
        if float(scores[i]) > best[0]:
            best = (float(scores[i]), tuple(seqs[i]))
    return best


@pytest.mark.parametrize("family", ["transformer", "gpt", "rnn"])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_beam_search_finds_the_exhaustive_optimum(family, alpha, seed):
    model = _model(family, 10 + seed)
    src = _src(20 + seed, b=1)
    want_score, want_seq = _exhaustive_best(model, src, 5, 4, alpha, family)
    result = decoding.beam_search(model, src, beam_size=400, max_len=4, length_penalty=alpha, n_best=3)
    best = result.hypotheses[0][0]
    assert best.tokens == want_seq
    assert best.score == pytest.approx(want_score, abs=1e-5)
    # every returned hypothesis's score is its own teacher-forced log-probability / length^alpha
    for h in result.hypotheses[0]:
        lp = float(_sequence_log_probs(model, src, [list(h.tokens)], family)[0])
        assert h.log_prob == pytest.approx(lp, abs=1e-5)
        assert h.score == pytest.approx(lp / len(h.tokens) ** alpha, abs=1e-5)
    scores = [h.score for h in result.hypotheses[0]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3


def test_small_beam_keeps_finished_hypotheses_while_others_continue():
    """A hypothesis that ended early stays among the candidates while longer ones grow."""
    model = _transformer(30, vocab=6)
    src = _src(31, b=3)
    result = decoding.beam_search(model, src, beam_size=3, max_len=6, length_penalty=0.0, n_best=3)
    assert result.tokens.shape[0] == 3 and result.scores.shape == (3,)
    for b, hyps in enumerate(result.hypotheses):
        assert len(hyps) == 3
        for h in hyps:
            assert EOS not in h.tokens[:-1] and len(h.tokens) <= 6
        torch.testing.assert_close(result.scores[b], torch.tensor(hyps[0].score, dtype=torch.float64))
        greedy_row = decoding.greedy(model, src[b : b + 1], max_len=6)[0].tolist()
        greedy_row = greedy_row[: greedy_row.index(EOS) + 1] if EOS in greedy_row else greedy_row
        greedy_lp = float(_sequence_log_probs(model, src[b : b + 1], [greedy_row], "transformer")[0])
        assert hyps[0].score >= greedy_lp - 1e-5  # this beam finds at least greedy's sequence here


def test_sampling_is_seeded_and_respects_top_k_and_top_p():
    model = _transformer(40, vocab=9)
    src = _src(41, b=8)
    a = decoding.sample(model, src, max_len=6, temperature=1.3, seed=7)
    b = decoding.sample(model, src, max_len=6, temperature=1.3, seed=7)
    assert torch.equal(a, b)
    assert not torch.equal(a, decoding.sample(model, src, max_len=6, temperature=1.3, seed=8))
    assert torch.equal(
        decoding.sample(model, src, max_len=6, top_k=1, seed=1), decoding.greedy(model, src, 6)
    )
    assert torch.equal(
        decoding.sample(model, src, max_len=6, top_p=1e-6, seed=2), decoding.greedy(model, src, 6)
    )
    assert torch.equal(
        decoding.sample(model, src, max_len=6, temperature=0, seed=2), decoding.greedy(model, src, 6)
    )


def test_filter_logits_exact_values():
    logits = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]))
    p = decoding.filter_logits(logits, top_p=0.8).softmax(-1)  # nucleus {0.5, 0.2, 0.15}: 0.85 >= 0.8
    torch.testing.assert_close(p, torch.tensor([[0.5, 0.2, 0.15, 0, 0]]) / 0.85)
    p = decoding.filter_logits(logits, top_k=2).softmax(-1)
    torch.testing.assert_close(p, torch.tensor([[0.5, 0.2, 0, 0, 0]]) / 0.7)
    p = decoding.filter_logits(logits, temperature=0.5).softmax(-1)  # p^2 renormalised
    q = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]) ** 2
    torch.testing.assert_close(p, q / q.sum())


def test_a_tiny_temperature_is_the_greedy_limit():
    """T = 1e-300 was NaN probabilities (a RuntimeError in multinomial): now it is T -> 0, the most
    likely token with probability 1 (ties share it), so sampling is greedy."""
    logits = torch.tensor([[0.3, 2.0, -1.0, 2.0, float("-inf")], [5.0, 1.0, 0.0, -3.0, 4.9]])
    p = decoding.filter_logits(logits, temperature=1e-300).softmax(-1)
    assert p.tolist() == [[0, 0.5, 0, 0.5, 0], [1, 0, 0, 0, 0]]
    for t in (5e-324, 1e-300, 1e-45):  # the smallest double; float32 would round these to 0
        assert torch.isfinite(decoding.filter_logits(logits, temperature=t).softmax(-1)).all()
    model = _transformer(62)
    src = _src(63, b=3)
    assert torch.equal(
        decoding.sample(model, src, max_len=6, temperature=1e-300, seed=1), decoding.greedy(model, src, 6)
    )
    with pytest.raises(ValueError, match=r"^temperature\b"):
        decoding.filter_logits(logits, temperature=float("inf"))


def test_sampling_frequencies_follow_the_filtered_distribution():
    """1-step draws from a GPT: the empirical frequencies match softmax(filter(logits)) (10k draws)."""
    model = _gpt(50, vocab=6)
    prompt = torch.randint(0, 6, (1, 3), generator=torch.Generator().manual_seed(51)).expand(10_000, -1)
    ids = decoding.generate(model, prompt, 1, temperature=1.0, top_k=3, seed=0)
    freq = torch.bincount(ids[:, -1], minlength=6).double() / 10_000
    want = decoding.filter_logits(model(prompt[:1])[:, -1].double(), top_k=3).softmax(-1)[0]
    assert int((freq > 0).sum()) == 3
    torch.testing.assert_close(freq, want.detach(), rtol=0, atol=0.02)


def test_eos_stops_rows_and_pads_after():
    model = _transformer(60, vocab=6)
    src = _src(61, b=6)
    out = decoding.greedy(model, src, max_len=10)
    for row in out.tolist():
        if EOS in row:
            assert all(t == 0 for t in row[row.index(EOS) + 1 :])
    assert out.shape[1] <= 10


def test_bad_decoding_options():
    model = _transformer(70)
    src = _src(71, b=1)
    with pytest.raises(ValueError, match=r"^beam_size\b"):
        decoding.beam_search(model, src, beam_size=0, max_len=3)
    with pytest.raises(ValueError, match="n_best=3 cannot exceed beam_size=2"):
        decoding.beam_search(model, src, beam_size=2, max_len=3, n_best=3)
    with pytest.raises(ValueError, match=r"^temperature\b.*> 0"):
        decoding.sample(model, src, max_len=3, temperature=-1)
    with pytest.raises(ValueError, match=r"^top_p\b.*\(0, 1\]"):
        decoding.sample(model, src, max_len=3, top_p=1.5)
    gpt = _gpt(72)
    with pytest.raises(ValueError, match=r"\b20\b.*max_new_tokens 5\b.*max_len=24\b.*\b4 new"):
        decoding.beam_search(gpt, torch.ones(1, 20, dtype=torch.long), 2, 5)
    with pytest.raises(ValueError, match=r"\bprompt\b.*\b24\b"):
        decoding.beam_search(gpt, torch.ones(1, 24, dtype=torch.long), 2, 1)
    with pytest.raises(ValueError, match=r"\b25 tokens\b.*\b24 positions\b"):
        decoding.generate(gpt, torch.ones(1, 25, dtype=torch.long), 1)
    with pytest.raises(ValueError, match=r"\bposition 16\b.*max_len=16\b"):
        decoding.greedy(model, src, max_len=17)


def test_generate_refuses_a_model_that_is_not_decoder_only_and_ids_outside_the_vocabulary():
    gpt = _gpt(80)  # vocabulary 5
    for model in (_transformer(81), _rnn(82)):
        with pytest.raises(ValueError, match=r"^generate\b.*decoder-only"):
            decoding.generate(model, [3, 4], 2)
        with pytest.raises(ValueError, match=r"^stream\b.*decoder-only"):
            decoding.stream(model, [3, 4], 2)
    for kw, named in [  # the argument, the range allowed and the value given
        (dict(eos_id=-1), r"^eos_id\b.*\b0\.\.4\b.*-1$"),
        (dict(eos_id=[2, 5]), r"^eos_id\b.*\b0\.\.4\b.*\[2, 5\]$"),
        (dict(eos_id=2, pad_id=999), r"^pad_id\b.*\b0\.\.4\b.*\b999$"),
        (dict(temperature=1.0, seed=1.5), r"^seed\b.*\b9223372036854775807\b.*\b1\.5$"),
    ]:
        with pytest.raises(ValueError, match=named):
            decoding.generate(gpt, [3, 4], 2, **kw)
    assert decoding.generate(gpt, [3, 4], 2, pad_id=4).shape == (1, 4)  # the ends of the range are ids
    assert decoding.generate(gpt, [3, 4], 1, eos_id=[0, 4]).shape == (1, 3)


@pytest.mark.parametrize("family", ["transformer", "rnn", "gpt"])
def test_greedy_sample_and_beam_search_take_lists_and_check_src_and_seed(family):
    """A list of ids is the tensor they make; text, a float seed and an all-padding row are named."""
    model, src = _model(family, 90), _src(91, b=2, s=3)
    rows = src.tolist()
    assert torch.equal(decoding.greedy(model, rows, max_len=4), decoding.greedy(model, src, max_len=4))
    assert torch.equal(decoding.sample(model, rows, 4, seed=3), decoding.sample(model, src, 4, seed=3))
    assert torch.equal(
        decoding.beam_search(model, rows, 2, 4).tokens, decoding.beam_search(model, src, 2, 4).tokens
    )
    with pytest.raises(ValueError, match=r"^src\b.*\btext\b"):
        decoding.greedy(model, "abc", max_len=4)
    with pytest.raises(ValueError, match=r"^seed\b.*'a'$"):
        decoding.sample(model, src, 4, seed="a")
    if family != "gpt":
        padded = torch.tensor([[3, 4, 0], [0, 0, 0]])
        with pytest.raises(ValueError, match=r"\brow 1\b.*\bpad_id 0\b"):
            decoding.greedy(model, padded, max_len=4)


@pytest.mark.parametrize("seed", [-1, 2**63, True, 1.5])
def test_a_seed_outside_zero_to_the_generators_bound_is_named(seed):
    """A negative seed was taken (torch accepts it); 2**63 reached manual_seed as a RuntimeError."""
    with pytest.raises(ValueError, match=r"^seed\b.*\b0 to 9223372036854775807\b"):
        decoding.check_seed(seed)
    with pytest.raises(ValueError, match="seed"):
        decoding.sample(_gpt(0), torch.tensor([[1, 2]]), 3, temperature=1.0, seed=seed)
    assert decoding.check_seed(0) == 0 and decoding.check_seed(None) is None


def test_generate_refuses_a_negative_seed_before_loading(tmp_path):
    from click.testing import CliRunner

    from attnlab.cli import cli

    result = CliRunner().invoke(
        cli, ["generate", str(tmp_path / "none"), "hi", "--temperature", "1", "--seed", "-1"]
    )
    assert result.exit_code == 2 and result.output.splitlines() == [
        "Error: seed must be an integer from 0 to 9223372036854775807, got -1"
    ]


def _slid(gpt, prompt: torch.Tensor, n: int) -> list[int]:
    """nanoGPT's generate, greedy: each token the argmax after the last max_len ids, re-read."""
    ids, limit = prompt[0].tolist(), gpt.config.max_len
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(gpt(torch.tensor([ids[-limit:]]))[0, -1].argmax()))
    return ids[prompt.shape[1] :]


@pytest.mark.parametrize("kw", [dict(), dict(positions="rope", num_kv_heads=2)])
def test_greedy_and_sampling_slide_past_the_context(kw):
    """20 prompt + 30 new tokens through 24 positions: every decode path (generate with and without
    the cache, greedy, sample) gives nanoGPT's cropped-context tokens; beam search refuses."""
    gpt = _gpt(80, vocab=7, **kw)
    prompt = _src(81, b=1, s=20)
    want = _slid(gpt, prompt, 30)
    assert decoding.generate(gpt, prompt, 30)[0, 20:].tolist() == want
    assert decoding.generate(gpt, prompt, 30, use_cache=False)[0, 20:].tolist() == want
    assert decoding.greedy(gpt, prompt, 30, eos_id=-1)[0].tolist() == want
    drawn = [decoding.sample(gpt, prompt, 30, temperature=1.0, seed=s, eos_id=-1)[0] for s in (3, 3, 4)]
    assert len(drawn[0]) == 30 and torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[0], drawn[2])
    streamed = decoding.generate(gpt, prompt, 30, temperature=1.0, seed=3)[0, 20:]
    assert torch.equal(streamed, drawn[0])  # stream and sample: the one loop, the same draws
    with pytest.raises(ValueError, match="beam search cannot slide"):
        decoding.beam_search(gpt, prompt, 2, 30)


def test_two_end_of_sequence_ids_stop_at_either():
    """A checkpoint may end on several ids (Llama 3 lists two): each of them stops the loop."""
    gpt = _gpt(82, vocab=7)
    prompt = _src(83, b=1, s=3)
    free = decoding.generate(gpt, prompt, 12)[0, 3:].tolist()
    first, other = free[2], next(t for t in range(7) if t not in free[:3])
    for eos in ([first, other], [other, first]):
        got = decoding.generate(gpt, prompt, 12, eos_id=eos)[0, 3:].tolist()
        assert got == free[: free.index(first) + 1]
        beam = decoding.beam_search(gpt, prompt, 1, 12, eos_id=eos).tokens[0].tolist()
        assert beam == free[: free.index(first) + 1]
