"""Audits of published Hugging Face configs: the exact parameter counts of GPT-2 small/medium/large/XL,
BERT base/large, Llama-2-7B, TinyLlama-1.1B and Mistral-7B, each checked against transformers' own
model built from the same config on the meta device (no memory, no weights), and their KV caches."""

from __future__ import annotations

import json
import re

import pytest
import torch

from attnlab.models import GPT
from attnlab.models.hf import model_config_from_hf

GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "activation_function": "gelu_new"}
BERT = {
    "model_type": "bert",
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
}
LLAMA = {
    "vocab_size": 32000,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "rope_scaling": None,
}
# name -> (config.json from the model cards' published values, the published exact parameter count)
CONFIGS = {
    "gpt2": ({**GPT2, "n_embd": 768, "n_layer": 12, "n_head": 12}, 124_439_808),
    "gpt2-medium": ({**GPT2, "n_embd": 1024, "n_layer": 24, "n_head": 16}, 354_823_168),
    "gpt2-large": ({**GPT2, "n_embd": 1280, "n_layer": 36, "n_head": 20}, 774_030_080),
    "gpt2-xl": ({**GPT2, "n_embd": 1600, "n_layer": 48, "n_head": 25}, 1_557_611_200),
    "bert-base": (
        {
            **BERT,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
        },
        109_482_240,
    ),
    "bert-large": (
        {
            **BERT,
            "hidden_size": 1024,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "intermediate_size": 4096,
        },
        335_141_888,
    ),
    "llama-2-7b": (
        {
            **LLAMA,
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
        6_738_415_616,
    ),
    "tinyllama-1.1b": (
        {
            **LLAMA,
            "model_type": "llama",
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "num_hidden_layers": 22,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "max_position_embeddings": 2048,
            "tie_word_embeddings": False,
        },
        1_100_048_384,
    ),
    "mistral-7b": (
        {
            **LLAMA,
            "model_type": "mistral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "max_position_embeddings": 32768,
            "sliding_window": 4096,
            "tie_word_embeddings": False,
        },
        7_241_732_096,
    ),
}


@pytest.fixture(scope="module")
def config_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("configs")
    out = {}
    for name, (config, _) in CONFIGS.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
        out[name] = root / name
    return out


def _transformers_count(path) -> int:
    """transformers' own model of the config (BertModel with its pooler; the LM for decoders), on meta."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(path)
    cls = transformers.AutoModel if config.model_type == "bert" else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = cls.from_config(config)
    return sum(p.numel() for p in model.parameters())  # a tied matrix is one parameter, counted once


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_published_counts_are_transformers_and_attnlab(name, config_dirs):
    published = CONFIGS[name][1]
    assert _transformers_count(config_dirs[name]) == published
    config = model_config_from_hf(config_dirs[name] / "config.json")
    if name.startswith("bert"):
        from attnlab.models.bert import BertEncoder as cls
    else:
        cls = GPT
    with torch.device("meta"):
        model = cls(config)
    assert sum(p.numel() for p in model.parameters()) == published


def _cli_json(capsys, *args: str) -> dict:
    from attnlab.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*args, "--json"])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize("name", ["gpt2-xl", "bert-large", "llama-2-7b", "tinyllama-1.1b", "mistral-7b"])
def test_audit_params_config_reproduces_the_published_count(name, config_dirs, capsys):
    report = _cli_json(capsys, "audit", "params", "--config", str(config_dirs[name] / "config.json"))
    assert report["total"] == report["module_total"] == CONFIGS[name][1]


def test_audit_cost_config_gives_the_kv_cache_of_gqa_and_the_window(config_dirs, capsys):
    """bf16 (2 bytes): Llama-2-7B 2·32·32·128·2 = 524,288 bytes per token; Mistral-7B's 8 KV heads
    a quarter of that, and at 8,192 tokens its window keeps 4,096 positions (512 MiB, not 1 GiB)."""
    llama = _cli_json(capsys, "audit", "cost", "--config", str(config_dirs["llama-2-7b"]), "--bytes", "2")
    assert llama["kv_cache"]["bytes_per_token"] == 2 * 32 * 32 * 128 * 2 == 524_288
    mistral = _cli_json(
        capsys, "audit", "cost", "--config", str(config_dirs["mistral-7b"]), "--bytes", "2", "--seq", "8192"
    )
    assert mistral["kv_cache"]["bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131_072
    assert mistral["kv_cache"]["tokens_cached"] == 4096
    assert mistral["kv_cache"]["bytes_per_sequence"] == 131_072 * 4096 == 512 * 2**20


def test_audit_config_errors_are_one_line(config_dirs, tmp_path, capsys):
    from attnlab.cli import main

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 512}))
    for args, message in [
        (
            ["--config", str(tmp_path / "config.json")],
            "model_type 't5' is not supported; supported: bert, gpt2",
        ),
        (["--config", str(tmp_path / "nothing.json")], "no such file"),
        (["--config", str(config_dirs["gpt2"]), "--preset", "gpt2"], "--config"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(["audit", "params", *args])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_audit_cost_config_measure_reconciles_on_a_mistral_shaped_model(tmp_path, capsys):
    """RMSNorm, SwiGLU (3 matrices), GQA 4:1 and a window of 8 at T = 32: the analytic FLOPs equal
    what FlopCounterMode counts on the model built from the config (explicit path)."""
    config = {
        "model_type": "mistral",
        "vocab_size": 311,
        "hidden_size": 48,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "sliding_window": 8,
        "max_position_embeddings": 128,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = _cli_json(
        capsys, "audit", "cost", "--config", str(tmp_path), "--seq", "32", "--measure", "--path", "explicit"
    )
    measured = report["measured"]
    assert measured["analytic_total"] == measured["measured_total"] > 0
    assert not measured["warnings"]
    assert report["kv_cache"]["tokens_cached"] == 8


def test_audit_cost_config_takes_the_bytes_from_torch_dtype(config_dirs, tmp_path, capsys):
    """Llama-2-7B's KV cache is 2·32·32·128 = 262,144 values per token: 524,288 bytes in the
    config's bfloat16 (2 bytes), 1,048,576 in float32; an explicit --bytes wins; the text says which."""
    per_token = {}
    for dtype in ("bfloat16", "float16", "float32", None):
        folder = tmp_path / str(dtype)
        folder.mkdir()
        extra = {} if dtype is None else {"torch_dtype": dtype}
        (folder / "config.json").write_text(json.dumps({**CONFIGS["llama-2-7b"][0], **extra}))
        report = _cli_json(capsys, "audit", "cost", "--config", str(folder))
        per_token[dtype] = (report["config"]["bytes_per_value"], report["kv_cache"]["bytes_per_token"])
        assert report["config"]["bytes_source"] == (
            "the config names no torch_dtype: float32"
            if dtype is None
            else f"torch_dtype {dtype} of the config"
        )
    assert per_token == {
        "bfloat16": (2, 524_288),
        "float16": (2, 524_288),
        "float32": (4, 1_048_576),
        None: (4, 1_048_576),
    }
    report = _cli_json(capsys, "audit", "cost", "--config", str(tmp_path / "bfloat16"), "--bytes", "4")
    assert report["config"]["bytes_per_value"] == 4 and report["config"]["bytes_source"] == "--bytes"

    from attnlab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["audit", "cost", "--config", str(tmp_path / "bfloat16")])
    out = capsys.readouterr().out.splitlines()
    assert exc.value.code == 0 and "bytes per value: 2 (torch_dtype bfloat16 of the config)" in out
    (tmp_path / "int4").mkdir()
    (tmp_path / "int4" / "config.json").write_text(
        json.dumps({**CONFIGS["llama-2-7b"][0], "torch_dtype": "int4"})
    )
    with pytest.raises(SystemExit) as exc:
        main(["audit", "cost", "--config", str(tmp_path / "int4")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert re.search(r"\btorch_dtype 'int4'.*\bfloat32, float16, bfloat16, float64\b.*--bytes N\b", err)
