"""The GPT decode engine: the same logits as the layers' own forward (float64: to 1e-10) for
GPT-2- and Llama-shaped blocks at batch 1 (gemv layout) and batch 3 (packed layout), the same
greedy tokens in float32, bfloat16 weights close to float32, prepared weights rebuilt after a
parameter changes, hooks honoured, and named errors."""

from __future__ import annotations

import pytest
import torch

from attnlab.decoding import generate
from attnlab.models import GPT, GPTConfig
from attnlab.models.gpt_decode import DecodeEngine, unsupported
from attnlab.nn import capture
from attnlab.nn.static_cache import StaticKVCache

GPT2 = dict(norm="layer", ffn="mlp", activation="gelu_tanh", positions="learned")
LLAMA = dict(
    norm="rms",
    ffn="glu",
    activation="silu",
    positions="rope",
    rope_layout="half",
    num_kv_heads=2,
    qkv_bias=False,
    out_bias=False,
    ffn_bias=False,
    tie_weights=False,
)


def _model(seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=37, d_model=32, num_heads=4, num_layers=2, d_ff=48, max_len=40, **kw)
    model = GPT(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * (0.3 if p.ndim == 1 else 0.1))
    return model


def _steps(model, ids, p, engine, capacity=None):
    """Logits ``[B, T - p + 1, V]`` of prefix ``ids[:, :p]`` then each following token."""
    with torch.no_grad():
        state = model.start(ids[:, :p], capacity=capacity, engine=engine)
        out = [state.last_logits]
        for t in range(p, ids.shape[1]):
            out.append(model.step(ids[:, t], state)[0])
    return torch.stack(out, dim=1), state


@pytest.mark.parametrize("kw", [GPT2, LLAMA], ids=["gpt2", "llama"])
@pytest.mark.parametrize("batch", [1, 3])
def test_engine_matches_the_layers_forward_in_float64(kw, batch):
    model = _model(**kw).double()
    ids = torch.randint(0, 37, (batch, 20), generator=torch.Generator().manual_seed(batch))
    engine = DecodeEngine(model)
    got, state = _steps(model, ids, 6, engine, capacity=8)  # outgrows 8: the cache doubles
    with torch.no_grad():
        want = model(ids)[:, 5:]  # [B, 15, V]
    assert engine.layout_for(batch) == ("gemv" if batch == 1 else "packed")
    assert state.engine is engine and isinstance(state.caches[0], StaticKVCache)
    assert state.length == 20 and state.caches[0].capacity >= 20
    assert (got - want).abs().max().item() <= 1e-10


@pytest.mark.parametrize("kw", [GPT2, LLAMA], ids=["gpt2", "llama"])
@pytest.mark.parametrize("layout", ["gemv", "packed", "linear"])
def test_every_layout_gives_the_reference_greedy_tokens_in_float32(kw, layout):
    model = _model(seed=3, **kw)
    prompt = torch.randint(0, 37, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model.start(prompt, capacity=0, engine="reference")
    fast = generate(model, prompt, 30, engine=DecodeEngine(model, layout=layout))
    slow = generate(model, prompt, 30, engine="reference")
    assert torch.equal(fast, slow)
    with torch.no_grad():
        first = model.start(prompt, engine=DecodeEngine(model, layout=layout)).last_logits
    assert (first - ref.last_logits).abs().max().item() <= 1e-4


def test_bfloat16_weights_stay_close_to_float32():
    model = _model(seed=1, **LLAMA)
    ids = torch.randint(0, 37, (1, 24), generator=torch.Generator().manual_seed(2))
    f32, _ = _steps(model, ids, 4, "reference")
    bf16, state = _steps(model, ids, 4, DecodeEngine(model, dtype="bfloat16"))
    assert state.caches[0].k.dtype == torch.float32  # attention and the cache stay float32
    err = (bf16.log_softmax(-1) - f32.log_softmax(-1)).abs().max().item()
    assert 0 < err <= 0.1, err  # bfloat16 keeps 8 bits: a few 1e-3 here, never the float32 numbers


def test_weights_changed_after_a_generation_are_picked_up():
    model = _model(seed=2, **GPT2)
    prompt = torch.tensor([[1, 2, 3]])
    engine = model.decode_engine()
    with torch.no_grad():
        model.start(prompt)
        model.blocks[0].ffn.linear2.weight.mul_(3.0)  # in place: the version counter moves
        got = model.start(prompt).last_logits
        want = model.start(prompt, engine="reference").last_logits
    assert model.decode_engine() is engine
    assert (got - want).abs().max().item() <= 1e-4


def test_a_hook_added_mid_generation_takes_the_layers_path():
    model = _model(**GPT2)
    with torch.no_grad():
        state = model.start(torch.tensor([[1, 2, 3, 4]]))
        assert state.engine is not None
        with capture(model, ["blocks.1.self_attn.weights"]) as seen:
            model.step(torch.tensor([5]), state)
        model.step(torch.tensor([6]), state)  # and back on the engine
    assert seen["blocks.1.self_attn.weights"].shape == (1, 4, 1, 5)
    assert state.length == 6


def test_what_the_engine_does_not_run():
    assert unsupported(_model(**GPT2)) == "gradients are enabled"
    with torch.no_grad():
        assert unsupported(_model(**GPT2)) is None
        assert "attention='explicit'" in unsupported(_model(attention="explicit"))
        assert "window" in unsupported(_model(window=4))
        assert "training" in unsupported(_model().train())
        state = _model(window=4).start(torch.tensor([[1, 2]]))  # auto: the layers' path
        assert state.engine is None


def test_bad_engine_arguments_are_named():
    model, other = _model(), _model(seed=1)
    prompt = torch.tensor([[1, 2]])
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"^engine\b.*\bDecodeEngine\b.*, got 'fast'$"):
            model.start(prompt, engine="fast")
        with pytest.raises(ValueError, match="made for another model"):
            model.start(prompt, engine=DecodeEngine(other))
        with pytest.raises(ValueError, match=r"^capacity\b.*\bnon-negative\b.*, got -1$"):
            model.start(prompt, capacity=-1)
        with pytest.raises(ValueError, match=r"\bdecode engine\b.*\bsliding window\b"):
            windowed = _model(window=4)
            windowed.start(prompt, engine=DecodeEngine(windowed))
    with pytest.raises(ValueError, match=r"^dtype\b.*\['model', 'bfloat16'\], got 'float16'"):
        DecodeEngine(model, dtype="float16")
    with pytest.raises(ValueError, match=r"^layout\b.*'gemv'.*, got 'fast'"):
        DecodeEngine(model, layout="fast")


@pytest.mark.parametrize("kw", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_the_compiled_steps_static_shape_graph_matches_the_forward(kw, monkeypatch):
    from attnlab.models import gpt_compile

    # the graph torch.compile would compile, run as written (compiling takes minutes on 2 cores):
    # every slot of the cache buffer is read, the unfilled ones masked
    monkeypatch.setattr(gpt_compile, "_compiled", gpt_compile._graph)
    model = _model(seed=4, **kw).double()
    ids = torch.randint(0, 37, (2, 18), generator=torch.Generator().manual_seed(5))
    engine = DecodeEngine(model, compile=True)
    got, state = _steps(model, ids, 5, engine, capacity=12)  # fills 12 slots, then grows (eager)
    with torch.no_grad():
        want = model(ids)[:, 4:]
    assert engine.compile_seconds is not None  # the graph ran
    assert engine.layout_for(2) == "gemv" and state.length == 18
    assert (got - want).abs().max().item() <= 1e-10
    with pytest.raises(ValueError, match=r"^compile=True\b.*\bdtype\b.*\bgemv\b"):
        DecodeEngine(model, dtype="bfloat16", compile=True)
