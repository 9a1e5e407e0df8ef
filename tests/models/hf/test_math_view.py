"""The served math view on Hugging Face folders that transformers wrote (GPT-2, Llama with GQA,
Mistral's window, Qwen2): the row equals the attention view's, the equation recomputes with
attnlab.ref, RoPE is shown before and after the turn, and the GQA group is named."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import ref
from attnlab.models.load import load
from attnlab.serve import views

TEXT = "Attention lets every token look at every other token."


@pytest.mark.parametrize("name", ["gpt2", "llama", "mistral", "qwen2"])
def test_the_math_view_recomputes_on_every_folder_kind(name, hf_dirs):
    loaded = load(hf_dirs[name])
    block = loaded.model.config.block
    layer, head, position = 1, block.num_heads - 1, 6
    out = views.answer("math", loaded, {"text": TEXT, "layer": layer, "head": head, "position": position})
    row = views.unpack(views.attention(loaded, TEXT)["weights"])[layer, head, position]  # [T]
    assert torch.equal(torch.tensor(out["weights"], dtype=torch.float32), row)
    k, v = views.unpack(out["k"]).double().numpy(), views.unpack(out["v"]).double().numpy()  # [T, d_k]
    q, mask = torch.tensor(out["q"]).numpy(), torch.tensor(out["mask"]).numpy()
    a = ref.masked_softmax(k @ q * out["scale"], mask)  # softmax(K q / sqrt(d_k) + M)
    assert out["scale"] == 1 / math.sqrt(out["d_k"])
    assert abs(a - row.double().numpy()).max() < 1e-6
    assert abs(a @ v - torch.tensor(out["z"]).numpy()).max() < 1e-6
    assert not mask[position + 1 :].any() and mask[: position + 1].sum() >= 1  # causal
    group = block.num_heads // (block.num_kv_heads or block.num_heads)
    first = (head // group) * group  # the query heads sharing this head's key/value head, named layer.head
    assert out["group"] == [f"{layer}.{h}" for h in range(first, first + group)]
    rotated = name != "gpt2"
    assert (out["q_pre"] != out["q"]) == rotated  # RoPE turns q (position 6 is not 0)
