"""Presets and the block options: exact counts against the oracles' own parameter counts.

GPT-2 and BERT presets are compared with Hugging Face ``transformers`` models built from the same
configs on the meta device (no weights, no download); the Transformer paper's models with
``torch.nn.Transformer``; RMSNorm, SwiGLU, GQA and the bias switches with Llama and Qwen2.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch
import transformers
from click.testing import CliRunner

from attnlab.audit import PRESETS, ModelSpec, audit_params
from attnlab.cli import cli
from attnlab.nn.config import BlockConfig


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # a tied tensor once


def _hf(name: str) -> torch.nn.Module:
    """The transformers model of preset ``name``, built on the meta device from its published config."""
    gpt2 = {
        "gpt2": {},
        "gpt2-medium": dict(n_embd=1024, n_layer=24, n_head=16),
        "gpt2-large": dict(n_embd=1280, n_layer=36, n_head=20),
        "gpt2-xl": dict(n_embd=1600, n_layer=48, n_head=25),
    }
    bert = {
        "bert-base": {},
        "bert-large": dict(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
        ),
        "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    }
    with torch.device("meta"):
        if name in LLAMA_FAMILY:  # the published config.json sizes of each checkpoint
            return transformers.AutoModelForCausalLM.from_config(LLAMA_FAMILY[name]())
        if name in gpt2:
            return transformers.GPT2LMHeadModel(transformers.GPT2Config(**gpt2[name]))  # head tied to wte
        return transformers.BertModel(transformers.BertConfig(**bert[name]))  # with the pooler


# meta-llama/Llama-2-7b-hf, mistralai/Mistral-7B-v0.1, TinyLlama/TinyLlama-1.1B-intermediate-step-
# 1431k-3T, Qwen/Qwen2-0.5B: the sizes of their config.json files (built on the meta device, no download)
LLAMA_FAMILY = {
    "llama-2-7b": lambda: transformers.LlamaConfig(
        hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
        intermediate_size=11008, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False,
    ),
    "mistral-7b": lambda: transformers.MistralConfig(
        hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, vocab_size=32000, max_position_embeddings=32768, sliding_window=4096,
        tie_word_embeddings=False,
    ),
    "tinyllama": lambda: transformers.LlamaConfig(
        hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
        intermediate_size=5632, vocab_size=32000, max_position_embeddings=2048, tie_word_embeddings=False,
    ),
    "qwen2-0.5b": lambda: transformers.Qwen2Config(
        hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
        intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=True,
    ),
}  # fmt: skip

HF_PRESETS = ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "bert-base", "bert-large", "minilm"]
HF_PRESETS += list(LLAMA_FAMILY)


@pytest.mark.slow
@pytest.mark.parametrize("name", HF_PRESETS)
def test_preset_equals_transformers_count(name):
    r = audit_params(name)
    assert r["total"] == r["formula_total"] == r["module_total"] == _count(_hf(name))


def test_published_counts():
    # the numbers people quote, now exact: GPT-2 small with its tied head, BERT-base with the pooler
    assert audit_params("gpt2", build_module=False)["total"] == 124_439_808
    assert audit_params("bert-base", build_module=False)["total"] == 109_482_240
    assert audit_params("minilm", build_module=False)["total"] == 22_713_216
    # the Llama family (untied unless noted), as transformers counts the published configs
    assert audit_params("llama-2-7b", build_module=False)["total"] == 6_738_415_616
    assert audit_params("mistral-7b", build_module=False)["total"] == 7_241_732_096
    assert audit_params("tinyllama", build_module=False)["total"] == 1_100_048_384
    assert audit_params("qwen2-0.5b", build_module=False)["total"] == 494_032_768  # tied, Q/K/V biases


@pytest.mark.parametrize(
    "name, d, f, published", [("transformer-base", 512, 2048, "65M"), ("transformer-big", 1024, 4096, "213M")]
)
def test_transformer_paper_table_3(name, d, f, published):
    """One [V, d] matrix shared by source, target and the generator (whose bias [V] stays): the
    encoder-decoder of torch.nn.Transformer (minus its two final norms) + V·d + V."""
    h, V = d // 64, 37000
    with torch.device("meta"):
        torch_model = torch.nn.Transformer(d, h, 6, 6, f, dropout=0.0, batch_first=True)
    final_norms = 2 * 2 * d  # nn.Transformer ends each stack with a LayerNorm; the post-norm paper does not
    r = audit_params(name)
    assert r["total"] == r["module_total"] == _count(torch_model) - final_norms + V * d + V
    assert r["preset"]["published"] == published and "37,000" in r["preset"]["vocab_note"]
    assert abs(r["total"] / 1e6 - float(published[:-1])) / float(published[:-1]) < 0.03


def _llama_like(hf_config, **block) -> ModelSpec:
    c = hf_config
    b = BlockConfig(
        d_model=c.hidden_size,
        num_heads=c.num_attention_heads,
        num_kv_heads=c.num_key_value_heads,
        d_ff=c.intermediate_size,
        norm="rms",
        norm_place="pre",
        ffn="glu",
        activation="silu",
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        positions="rope",
        rope_layout="half",
        **block,
    )
    return ModelSpec("gpt", b, c.num_hidden_layers, c.vocab_size, c.max_position_embeddings, tie_head=False)


@pytest.mark.slow
def test_rmsnorm_swiglu_gqa_no_bias_equal_llama():
    """Llama: RMSNorm (γ only), SwiGLU (three matrices), GQA, no biases, RoPE, untied head."""
    c = transformers.LlamaConfig(
        vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=3,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    with torch.device("meta"):
        oracle = _count(transformers.LlamaForCausalLM(c))
    r = audit_params(_llama_like(c))  # also builds attnlab's GPT with this block
    assert r["total"] == r["formula_total"] == r["module_total"] == oracle
    assert r["by_group"]["positions"] == 0 and r["biases_total"] == 0


@pytest.mark.slow
def test_qkv_bias_only_equals_qwen2():
    c = transformers.Qwen2Config(
        vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=128, tie_word_embeddings=False,
    )  # fmt: skip
    with torch.device("meta"):
        oracle = _count(transformers.Qwen2ForCausalLM(c))
    spec = _llama_like(c)
    spec = dataclasses.replace(spec, block=spec.block.replace(qkv_bias=True))
    r = audit_params(spec)
    assert r["total"] == r["module_total"] == oracle
    assert r["biases_total"] == 2 * (256 + 2 * 4 * 32)  # b_Q [d] and b_K, b_V [h_kv·d_k] per layer


def _count_both(**kw) -> dict:
    """audit_params of an encoder layer, checked against the attnlab module it builds."""
    r = audit_params(ModelSpec.from_sizes(d_model=64, heads=4, d_ff=128, **kw))
    assert r["total"] == r["formula_total"] == r["module_total"], kw
    assert {g: v for g, v in r["by_group"].items() if v} == r["module_by_group"], kw
    return r


def test_block_options_change_the_count_as_the_formula_says():
    n = _count_both()["total"]
    assert _count_both(norm_kind="rms")["total"] == n - 2 * 64  # two norms lose β
    assert _count_both(ffn="glu", activation="silu")["total"] == n + 64 * 128 + 128  # W_3 and b_3
    assert _count_both(ffn="none")["total"] == 4 * 64 * 64 + 4 * 64 + 2 * 64  # attention + one LayerNorm
    assert _count_both(qkv_bias=False, ffn_bias=False)["biases_total"] == 64 + 2 * 64  # b_O + two β
    assert _count_both(kv_heads=1, bias=False)["total"] == n - 2 * 64 * 48 - (
        4 * 64 + 128 + 64
    )  # GQA K, V; no biases


def test_model_configs_are_accepted():
    from attnlab.models import GPTConfig, TransformerConfig
    from attnlab.models.bert import BertConfig

    g = GPTConfig(vocab_size=50257, d_model=768, num_heads=12, num_layers=12, d_ff=3072, max_len=1024)
    assert audit_params(g)["total"] == audit_params("gpt2")["total"]
    b = BertConfig(vocab_size=30522)
    assert audit_params(b, build_module=False)["total"] == 109_482_240
    t = TransformerConfig(src_vocab=37000, tgt_vocab=37000, share_embeddings=True)
    assert (
        audit_params(t, build_module=False)["total"]
        == audit_params("transformer-base", build_module=False)["total"]
    )
    block = BlockConfig(d_model=512, num_heads=8, d_ff=2048)
    assert audit_params(block)["total"] == 3_152_384


def test_preset_registry_drives_the_cli():
    r = CliRunner().invoke(cli, ["audit", "params", "--help"])
    assert r.exit_code == 0
    assert "--preset [" + "|".join(PRESETS) + "]" in " ".join(r.output.split())
    r = CliRunner().invoke(cli, ["audit", "params", "--preset", "transformer-base"])
    assert r.exit_code == 0, r.output
    assert "published: 65M" in r.output and "V = 37,000" in r.output and "shared embedding" in r.output
    r = CliRunner().invoke(cli, ["audit", "params", "--preset", "gpt2", "--json"])
    assert json.loads(r.output)["total"] == 124_439_808
    r = CliRunner().invoke(cli, ["audit", "params", "--preset", "gpt2", "--heads", "4"])
    assert r.exit_code == 2 and r.output.startswith("Error:") and "--heads" in r.output
    r = CliRunner().invoke(cli, ["audit", "params", "--preset", "gpt3"])
    assert r.exit_code == 2 and re.search(r"^Error: --preset\b.*\bgpt2-medium\b.*; got 'gpt3'", r.output)


def test_bert_prints_the_activation_it_uses():
    r = CliRunner().invoke(
        cli,
        [
            "audit",
            "params",
            "--model",
            "bert",
            "--vocab",
            "100",
            "--d-model",
            "32",
            "--heads",
            "4",
            "--d-ff",
            "64",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "activation GELU" in r.output.splitlines()[0]
    r = CliRunner().invoke(cli, ["audit", "params", "--d-model", "32", "--heads", "4", "--d-ff", "64"])
    assert "activation ReLU" in r.output.splitlines()[0]


def test_untie_and_share_options():
    tied = audit_params(ModelSpec.from_sizes("gpt", d_model=32, heads=4, d_ff=64, vocab=100, max_len=16))
    untied = audit_params(
        ModelSpec.from_sizes("gpt", d_model=32, heads=4, d_ff=64, vocab=100, max_len=16, tie_head=False)
    )
    assert untied["total"] == untied["module_total"] == tied["total"] + 32 * 100
    kw = dict(d_model=32, heads=4, d_ff=64, vocab=100)
    apart = audit_params(ModelSpec.from_sizes("transformer", **kw))
    shared = audit_params(ModelSpec.from_sizes("transformer", share_embeddings=True, **kw))
    assert shared["total"] == shared["module_total"] == apart["total"] - 2 * 32 * 100


def test_glu_cost_reconciles_with_the_counter():
    """A GLU FFN is 3·d·f MACs per token (gate, up, down), equal to FlopCounterMode on the built block."""
    from attnlab.audit import Workload, audit_cost

    spec = ModelSpec.from_sizes(
        d_model=32, heads=4, kv_heads=2, d_ff=64, ffn="glu", activation="silu", norm_kind="rms", bias=False
    )
    r = audit_cost(spec, Workload(seq=9, causal=True), measure=True, path="explicit")
    assert r["measured"]["warnings"] == [] and all(row["equal"] for row in r["measured"]["rows"])
    assert next(t for t in r["terms"] if t["term"] == "FFN")["macs"] == 3 * 9 * 32 * 64


def test_mistral_preset_keeps_its_window_in_the_kv_cache():
    """Mistral 7B at T = 8,192: 2·32·8·128·4 = 262,144 bytes per token, and its window of 4,096
    keys caches 4,096 positions (1 GiB), where Llama 2 7B (no window, 32 KV heads) caches all 8,192."""
    r = CliRunner().invoke(cli, ["audit", "cost", "--preset", "mistral-7b", "--seq", "8192", "--json"])
    kv = json.loads(r.output)["kv_cache"]
    assert (kv["bytes_per_token"], kv["tokens_cached"], kv["bytes_per_sequence"]) == (262_144, 4096, 2**30)
    assert kv["sequence_tokens"] == 8192
    text = CliRunner().invoke(cli, ["audit", "cost", "--preset", "mistral-7b", "--seq", "8192"]).output
    assert "1.00 GiB (1,073,741,824 B) per sequence of 8192 tokens (the window keeps 4096)" in text
    r = CliRunner().invoke(cli, ["audit", "cost", "--preset", "llama-2-7b", "--seq", "8192", "--json"])
    kv = json.loads(r.output)["kv_cache"]
    assert (kv["bytes_per_token"], kv["tokens_cached"]) == (1_048_576, 8192)
