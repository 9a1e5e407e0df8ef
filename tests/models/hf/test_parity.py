"""attnlab's GPT with each transformers-made checkpoint against transformers itself (float32):
logits on unpadded and padded batches, every layer's hidden state and attention weights, and
greedy generation with the KV cache (Mistral's window at sequences longer than the window)."""

from __future__ import annotations

import pytest
import torch

from attnlab.decoding import generate
from attnlab.models import load_hf

# every test here needs the session's checkpoints, which take ~15 s to make under load
pytestmark = pytest.mark.slow

TOL = 1e-4  # float32, both sides; measured differences are ~1e-6 (docs/pretrained.md)


def _ids(vocab: int, batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def models(hf_dirs):
    return {name: load_hf(path) for name, path in hf_dirs.items()}


def test_logits_match_transformers(hf_name, models, hf_oracles):
    model, oracle = models[hf_name], hf_oracles[hf_name]
    ids = _ids(model.config.vocab_size, 3, 21)  # 21 > Mistral's window of 8
    with torch.no_grad():
        diff = (model(ids) - oracle(ids).logits).abs().max()
    assert diff < TOL


def test_padded_batch_logits_match_transformers(hf_name, models, hf_oracles):
    """Left padding (row 0), right padding (row 1), none (row 2): logits at real tokens agree."""
    model, oracle = models[hf_name], hf_oracles[hf_name]
    ids = _ids(model.config.vocab_size, 3, 19, seed=1)
    real = torch.ones(3, 19, dtype=torch.bool)
    real[0, :6] = False
    real[1, 12:] = False
    with torch.no_grad():
        ours = model(ids, attention_mask=real)
        theirs = oracle(ids, attention_mask=real.long()).logits
    assert (ours - theirs)[real].abs().max() < TOL
    with torch.no_grad():  # the unpadded row is the same as alone
        assert (ours[2] - model(ids[2:])[0]).abs().max() < 1e-5


def test_hidden_states_and_attention_weights_match(hf_name, models, hf_oracles):
    from attnlab.models.hf.compare import compare_layers

    model = models[hf_name]
    rows = compare_layers(model, hf_oracles[hf_name], _ids(model.config.vocab_size, 2, 17, seed=2))
    assert len(rows) == model.config.num_layers + 1  # the embeddings, then every layer
    for row in rows:
        assert row["hidden"] < TOL, row
        assert row["weights"] is None or row["weights"] < TOL, row


def test_greedy_32_tokens_with_the_cache_are_transformers(causal_name, models, hf_oracles, hf_tokenizer):
    model, oracle = models[causal_name], hf_oracles[causal_name]
    prompt = torch.tensor([hf_tokenizer.encode("Attention lets every token look at").ids])
    ours = generate(model, prompt, 32)
    theirs = oracle.generate(prompt, max_new_tokens=32, min_new_tokens=32, do_sample=False, pad_token_id=0)
    assert ours.tolist() == theirs.tolist()


def test_mistral_cache_rolls_at_the_window_and_weighs_what_the_audit_says(models, hf_tokenizer):
    """Prompt 7 + 32 new tokens > W = 8: every layer holds exactly W positions, and their bytes are
    the audit's KV cache of a W-token window, 2·L·h_kv·d_k·4 bytes per position."""
    from attnlab.audit.cost import kv_cache_bytes
    from attnlab.decoding import stream
    from attnlab.nn.rolling_cache import RollingKVCache

    model = models["mistral"]
    c = model.config
    prompt = torch.tensor([hf_tokenizer.encode("Attention lets every token look at").ids])
    steps = stream(model, prompt, 32)
    held = []
    for _ in steps:
        held.append(max(cache.held for cache in steps.state.caches))
    assert max(held) == c.window and prompt.shape[1] + 32 > c.window
    assert all(isinstance(cache, RollingKVCache) for cache in steps.state.caches)
    assert steps.state.length == prompt.shape[1] + 31  # the last token is chosen, not fed
    nbytes = sum(cache.nbytes for cache in steps.state.caches)
    assert nbytes == kv_cache_bytes(
        c.num_layers, c.num_kv_heads, c.d_model // c.num_heads, 4, tokens=c.window
    )


def test_sampling_top_k_1_and_beam_1_are_greedy(models, hf_tokenizer):
    from attnlab.decoding import beam_search

    model = models["qwen2"]
    prompt = torch.tensor([hf_tokenizer.encode("The keys and values").ids])
    greedy = generate(model, prompt, 12)
    assert torch.equal(generate(model, prompt, 12, temperature=0.7, top_k=1, seed=3), greedy)
    assert (
        beam_search(model, prompt, 1, 12, eos_id=-1).tokens.tolist() == greedy[:, prompt.shape[1] :].tolist()
    )
    a = generate(model, prompt, 12, temperature=1.0, top_p=0.9, seed=5)
    assert torch.equal(a, generate(model, prompt, 12, temperature=1.0, top_p=0.9, seed=5))
