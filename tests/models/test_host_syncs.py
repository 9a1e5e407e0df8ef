"""No host synchronisation inside a forward or a decode step: a value read back from the device
(``.item()``, ``int(t)``, ``bool(t)``, ``aminmax`` to the host) would stall every layer on a GPU.
Counted with torch.profiler on the CPU: the read-backs are ``aten::item`` /
``aten::_local_scalar_dense`` events (before: 24 in one forward of a 2-layer GPT, 12 of each).
Bad token ids are still named, on the way to the error."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from attnlab.models.bert import BertConfig, BertEncoder
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.transformer import Transformer, TransformerConfig

SYNCS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero")

GPT2 = dict(num_layers=2, max_len=32, d_model=32, num_heads=4)
LLAMA = dict(
    GPT2,
    num_kv_heads=2,
    positions="rope",
    rope_layout="half",
    norm="rms",
    ffn="glu",
    activation="silu",
    qkv_bias=False,
    out_bias=False,
    ffn_bias=False,
    tie_weights=False,
)


def syncs(fn) -> list[str]:
    """The host read-backs in one call of ``fn`` (after a warm-up call)."""
    with torch.no_grad():
        fn()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
    return [e.name for e in prof.events() if e.name in SYNCS]


def _ids(b: int = 2, t: int = 12) -> torch.Tensor:
    return torch.randint(1, 50, (b, t), generator=torch.Generator().manual_seed(0))


def _padding() -> torch.Tensor:
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0
    return mask


@pytest.mark.parametrize("family", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_a_decoder_forward_and_decode_step_read_nothing_back(family):
    torch.manual_seed(0)
    model = GPT(GPTConfig(50, **family)).eval()
    ids = _ids()
    assert syncs(lambda: model(ids)) == []
    assert syncs(lambda: model(ids, attention_mask=_padding())) == []
    tokens = torch.tensor([3, 4])
    for engine in ("reference", "auto"):  # the layers' forward and the decode engine
        state = model.start(ids, engine=engine)
        assert syncs(lambda state=state: model.step(tokens, state)) == [], engine


def test_a_bert_forward_reads_nothing_back():
    torch.manual_seed(0)
    bert = BertEncoder(BertConfig(vocab_size=50, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_len=32))
    bert.eval()
    ids = _ids()
    assert syncs(lambda: bert(ids)) == []
    assert syncs(lambda: bert(ids, attention_mask=_padding(), token_type_ids=torch.zeros_like(ids))) == []


def test_an_encoder_decoder_step_reads_nothing_back():
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(
            50, 50, d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=2
        )
    ).eval()
    state = model.start(_ids())
    assert syncs(lambda: model.step(torch.tensor([3, 4]), state)) == []


def test_bad_ids_are_still_named_and_debug_checks_read_them_first(monkeypatch):
    torch.manual_seed(0)
    model = GPT(GPTConfig(50, **GPT2)).eval()
    bert = BertEncoder(BertConfig(vocab_size=50, num_layers=1, d_model=32, num_heads=4, d_ff=64, max_len=32))
    bad = torch.tensor([[1, 50]])
    with pytest.raises(ValueError, match=r"^ids\b.* 50\b.*\b0\.\.49\b"):
        model(bad)
    with pytest.raises(ValueError, match=r"^prompt\b.* -1\b"):
        model.start(torch.tensor([[-1, 2]]))
    state = model.start(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"^tokens\b.* 77\b"):
        model.step(torch.tensor([77]), state)
    with pytest.raises(ValueError, match=r"^input_ids\b.*\[0, 50\).*\bmax 50\b"):
        bert(bad)
    with pytest.raises(ValueError, match=r"^token_type_ids\b.*\[0, 2\).*\bmax 2\b"):
        bert(torch.tensor([[1, 2]]), token_type_ids=torch.tensor([[0, 2]]))
    # the debug switch reads the range before any work: one read-back, the same error
    monkeypatch.setenv("ATTNLAB_DEBUG_CHECKS", "1")
    assert len(syncs(lambda: model(torch.tensor([[1, 2]])))) > 0
    with pytest.raises(ValueError, match=r"^ids\b.* 50\b"):
        model(bad)
