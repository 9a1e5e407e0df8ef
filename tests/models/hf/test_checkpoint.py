"""Reading Hugging Face checkpoint directories: configs, shards and their index, the tensors'
names and shapes, and every bad input the loader must name in one line."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnlab.models import GPT, load_hf
from attnlab.models.hf import model_config_from_hf
from attnlab.models.hf.checkpoint import read_hf_state, weight_files
from attnlab.tasks.tokenize import from_file

# every test here needs the session's checkpoints, which take ~15 s to make under load
pytestmark = pytest.mark.slow


def _copy(src, tmp_path, name="ckpt"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def test_configs_read_like_transformers(hf_dirs):
    import transformers

    for name, path in hf_dirs.items():
        theirs = transformers.AutoConfig.from_pretrained(path)
        ours = model_config_from_hf(path)
        assert ours.vocab_size == theirs.vocab_size, name
        assert ours.d_model == theirs.hidden_size, name
        assert ours.num_heads == theirs.num_attention_heads, name
        assert ours.num_layers == theirs.num_hidden_layers, name
        assert ours.tie_weights == theirs.tie_word_embeddings, name
        if theirs.model_type == "gpt2":
            assert ours.d_ff == (theirs.n_inner or 4 * theirs.n_embd)
            assert (ours.norm, ours.activation, ours.positions) == ("layer", "gelu_tanh", "learned")
            assert ours.norm_eps == theirs.layer_norm_epsilon
        else:
            assert ours.d_ff == theirs.intermediate_size
            assert ours.num_kv_heads == theirs.num_key_value_heads
            assert ours.rope_base == theirs.rope_parameters["rope_theta"]
            assert ours.norm_eps == theirs.rms_norm_eps
            assert ours.window == getattr(theirs, "sliding_window", None)
            assert ours.qkv_bias == (theirs.model_type == "qwen2")


def test_shards_and_index_read_as_one_state(hf_dirs, hf_oracles):
    files = weight_files(hf_dirs["llama"])
    assert len(files) > 1  # saved with a small max_shard_size
    state = read_hf_state(hf_dirs["llama"])
    theirs = hf_oracles["llama"].state_dict()
    assert set(state) == set(theirs)
    for k, v in state.items():
        assert torch.equal(v, theirs[k]), k


def test_loaded_weights_are_the_checkpoints(hf_dirs, hf_oracles):
    """GPT-2's Conv1D c_attn [d, 3d] becomes three nn.Linear weights [d, d]; a tied head is stored once."""
    model = load_hf(hf_dirs["gpt2"])
    assert isinstance(model, GPT) and not model.training
    hf = hf_oracles["gpt2"].transformer
    d = model.config.d_model
    w = hf.h[1].attn.c_attn.weight  # [d, 3d]: x @ W
    a = model.blocks[1].self_attn
    assert torch.equal(a.q_proj.weight, w[:, :d].T)
    assert torch.equal(a.v_proj.weight, w[:, 2 * d :].T)
    assert torch.equal(model.blocks[0].ffn.linear2.weight, hf.h[0].mlp.c_proj.weight.T)
    assert model.lm_head.weight is model.tok_embed.weight
    assert "lm_head.weight" not in load_file(hf_dirs["gpt2"] / "model.safetensors")
    untied = load_hf(hf_dirs["llama"])
    assert untied.lm_head.weight is not untied.tok_embed.weight


def test_bfloat16_checkpoint_loads_in_the_asked_dtype(hf_dirs, tmp_path):
    path = _copy(hf_dirs["qwen2"], tmp_path)
    state = load_file(path / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) for k, v in state.items()}, str(path / "model.safetensors"))
    model = load_hf(path)
    assert model.tok_embed.weight.dtype == torch.float32
    expected = state["model.embed_tokens.weight"].to(torch.bfloat16).float()
    assert torch.equal(model.tok_embed.weight, expected)
    assert load_hf(path, dtype=torch.bfloat16).blocks[0].self_attn.q_proj.bias.dtype == torch.bfloat16


def test_ignored_buffers_and_a_stored_tied_head(hf_dirs, tmp_path):
    path = _copy(hf_dirs["gpt2"], tmp_path)
    state = load_file(path / "model.safetensors")
    state["transformer.h.0.attn.bias"] = torch.ones(1, 1, 64, 64)  # GPT-2's old causal-mask buffer
    state["lm_head.weight"] = state["transformer.wte.weight"].clone()
    save_file(state, str(path / "model.safetensors"))
    model = load_hf(path)
    assert torch.equal(model.tok_embed.weight, state["transformer.wte.weight"])
    state["lm_head.weight"][0, 0] += 1.0
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"'lm_head\.weight'.*\btied\b.*'transformer\.wte\.weight'"):
        load_hf(path)


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_tensor_missing_extra_or_misshaped_is_named(hf_dirs, tmp_path):
    path = _copy(hf_dirs["mistral"], tmp_path)
    state = load_file(path / "model.safetensors")
    good = dict(state)
    del state["model.layers.1.mlp.up_proj.weight"]
    state["model.layers.0.self_attn.rotary.weight"] = torch.zeros(3)
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(ValueError) as exc:
        load_hf(path)
    text = _one_line(exc)
    assert "missing tensor(s) ['model.layers.1.mlp.up_proj.weight']" in text
    assert "extra tensor(s) ['model.layers.0.self_attn.rotary.weight']" in text
    save_file(good, str(path / "model.safetensors"))
    _edit_config(path, num_key_value_heads=2)  # the checkpoint's K/V are 12 wide, the config says 24
    with pytest.raises(ValueError) as exc:
        load_hf(path)
    text = _one_line(exc)
    assert "'model.layers.0.self_attn.k_proj.weight'" in text
    assert text.index("[12, 48]") < text.index("[24, 48]")  # the checkpoint's shape, then the config's


def test_bad_directories_are_one_line_errors(hf_dirs, tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json in"):
        load_hf(tmp_path)
    path = _copy(hf_dirs["llama-tied"], tmp_path)
    _edit_config(path, model_type="t5")
    with pytest.raises(ValueError, match=r"\bmodel_type 't5'.*\bqwen2\b"):
        load_hf(path)
    _edit_config(path, model_type="llama", rope_scaling={"rope_type": "longrope", "factor": 4.0})
    with pytest.raises(ValueError, match=r"\brope_scaling\b.*'longrope'"):
        load_hf(path)
    _edit_config(path, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0})
    with pytest.raises(ValueError, match=r"\bconfig\.json: rope_scaling\b.*'llama3'.*'high_freq_factor'"):
        load_hf(path)
    _edit_config(path, rope_scaling=None, head_dim=16)
    with pytest.raises(ValueError, match="head_dim=16"):
        load_hf(path)
    _edit_config(path, head_dim=None, hidden_act="tanh")
    with pytest.raises(ValueError, match=r"\bhidden_act='tanh'"):
        load_hf(path)
    gpt2 = _copy(hf_dirs["gpt2"], tmp_path, "gpt2")
    _edit_config(gpt2, scale_attn_by_inverse_layer_idx=True)
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True is not supported"):
        load_hf(gpt2)


def test_pickles_and_lost_shards_are_refused(hf_dirs, tmp_path):
    path = _copy(hf_dirs["gpt2"], tmp_path)
    (path / "model.safetensors").rename(path / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"\bpytorch_model\.bin\b.*\bmodel\.safetensors\b"):
        load_hf(path)
    sharded = _copy(hf_dirs["llama"], tmp_path, "sharded")
    last = weight_files(sharded)[-1]
    last.unlink()
    with pytest.raises(FileNotFoundError, match=f"names shard\\(s\\) \\['{last.name}'\\]"):
        load_hf(sharded)


def test_tokenizer_must_fit_the_vocabulary(hf_dirs, hf_tokenizer, tmp_path):
    tok = from_file(hf_dirs["qwen2"] / "tokenizer.json", vocab_size=319)
    assert (
        tok.encode("Attention is what the KV cache stores")
        == hf_tokenizer.encode("Attention is what the KV cache stores").ids
    )
    with pytest.raises(ValueError, match=r"\b299\b.*\bvocab_size is 200\b"):
        from_file(hf_dirs["qwen2"] / "tokenizer.json", vocab_size=200)
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        from_file(tmp_path / "tokenizer.json")


def test_save_and_load_model_round_trip(hf_dirs, tmp_path):
    from attnlab.models import load_model

    model = load_hf(hf_dirs["qwen2"])
    model.save(tmp_path / "saved")
    again = load_model(tmp_path / "saved")
    ids = torch.tensor([[5, 17, 250, 3, 99]])
    with torch.no_grad():
        assert torch.equal(model(ids), again(ids))


def test_bert_directories_load_through_the_same_door():
    from attnlab.models import BertEncoder
    from attnlab.models.pretrained import pretrained_path

    model = load_hf(pretrained_path("minilm"))
    assert isinstance(model, BertEncoder) and model.config.num_layers == 6
    assert model_config_from_hf(pretrained_path("minilm") / "config.json").d_model == 384
