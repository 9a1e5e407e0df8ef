"""TransformerLens's hook names are aliases of attnlab's: each reads the same tensor, in capture and
in patch, with globs, on a GPT (``blocks.{l}``) and on BERT (``layers.{l}``); names without a twin
say where the quantity is; the table in docs/analyses.md is the code's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from attnlab.models import GPT, GPTConfig
from attnlab.models.bert import BertConfig, BertEncoder
from attnlab.nn import capture, patch
from attnlab.nn._tl_names import BLOCK_ALIASES, MODEL_ALIASES, translate


def _gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, d_model=16, num_heads=4, num_layers=2, d_ff=24, max_len=12)).eval()


def test_every_alias_reads_the_same_tensor():
    model = _gpt()
    ids = torch.randint(0, 20, (2, 6), generator=torch.Generator().manual_seed(1))
    names = [f"blocks.1.{tl}" for tl in BLOCK_ALIASES] + list(MODEL_ALIASES)
    with capture(model, names) as aliased:
        model(ids)
    with capture(model, ["*"]) as plain:
        model(ids)
    for name in names:
        twin = translate(name)
        assert twin != name and twin in plain, name
        torch.testing.assert_close(aliased[name], plain[twin], rtol=0, atol=1e-6)  # fused vs explicit layer 0
        assert name in aliased
    assert translate("blocks.*.attn.hook_pattern") == "blocks.*.self_attn.weights"
    with capture(model, ["blocks.*.attn.hook_pattern"]) as cache:
        model(ids)
    assert sorted(cache) == ["blocks.0.self_attn.weights", "blocks.1.self_attn.weights"]
    # hook_embed is the token embedding alone; attnlab's embed adds the learned positions
    torch.testing.assert_close(plain["tok_embed"], model.tok_embed(ids).detach())
    assert (plain["embed"] - plain["tok_embed"]).abs().max() > 0


def test_aliases_patch_and_read_bert_layers():
    model = _gpt()
    ids = torch.randint(0, 20, (1, 5), generator=torch.Generator().manual_seed(2))
    with patch(model, {"blocks.0.attn.hook_z": lambda z: z * 0}):
        by_alias = model(ids)
    with patch(model, {"blocks.0.self_attn.z": lambda z: z * 0}):
        by_name = model(ids)
    torch.testing.assert_close(by_alias, by_name, rtol=0, atol=0)
    torch.manual_seed(0)
    bert = BertEncoder(BertConfig(vocab_size=20, d_model=8, num_heads=2, num_layers=2, d_ff=16)).eval()
    with capture(bert, ["blocks.1.attn.hook_pattern", "blocks.0.hook_resid_post"]) as cache:
        bert(ids)
    assert sorted(cache) == ["layers.0.resid_post", "layers.1.self_attn.weights"]
    assert cache["blocks.1.attn.hook_pattern"].shape == (1, 2, 5, 5)


@pytest.mark.parametrize(
    "name, where",
    [
        ("blocks.0.attn.hook_result", "attnlab.interp.attribution.head_outputs"),
        ("hook_pos_embed", "embed - tok_embed"),
        ("blocks.1.ln1.hook_scale", "the reciprocal"),
        ("blocks.7.hook_resid_pre", "the TransformerLens alias of 'blocks.7.resid_pre'"),
    ],
)
def test_names_without_a_twin_say_where_to_look(name, where):
    with pytest.raises(ValueError, match=re.escape(where)):
        with capture(_gpt(), [name]):
            pass


def test_the_docs_table_is_the_code_table():
    page = (Path(__file__).parents[2] / "docs" / "analyses.md").read_text()
    rows = dict(
        re.findall(r"^\| `((?:blocks\.\{l\}\.)?[a-z_0-9.]*hook_[a-z_]+)` \| `([^`]+)` \|", page, re.M)
    )
    want = {f"blocks.{{l}}.{tl}": f"blocks.{{l}}.{ours}" for tl, (ours, _) in BLOCK_ALIASES.items()}
    want |= {tl: ours for tl, (ours, _) in MODEL_ALIASES.items()}
    assert rows == want
