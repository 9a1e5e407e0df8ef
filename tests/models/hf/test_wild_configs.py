"""Checkpoints and configs from the wild: the transformers 4.x ``rope_scaling`` form, fields of the
wrong JSON type, sizes no machine holds, and an index that names shards outside its folder. Each
bad one is one ``ValueError`` naming the key; the good ones load as transformers loads them."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from attnlab.models import load_hf
from attnlab.models.hf import model_config_from_hf

pytestmark = pytest.mark.slow  # the session's checkpoints

INDEX = "model.safetensors.index.json"


def _copy(src, tmp_path, name="ckpt"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _edit_config(path, drop=(), **changes):
    config = json.loads((path / "config.json").read_text())
    for key in drop:
        config.pop(key, None)
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    "scaling,max_len",
    [
        ({"type": "linear", "factor": 2.0}, 96),  # the 4.x key "type", as Hub Llama configs carry it
        ({"type": "dynamic", "factor": 2.0}, 192),  # dynamic NTK reaches factor x the trained length
        ({"rope_type": "linear", "factor": 3.0}, 96),
    ],
)
def test_rope_scaling_of_either_form_is_transformers(hf_dirs, tmp_path, scaling, max_len):
    import transformers

    path = _copy(hf_dirs["llama-tied"], tmp_path)
    _edit_config(path, drop=("rope_parameters",), rope_theta=10000.0, rope_scaling=scaling)
    ours = load_hf(path)
    assert ours.config.rope_scaling["rope_type"] == scaling.get("type", scaling.get("rope_type"))
    assert ours.config.max_len == max_len
    theirs = transformers.LlamaForCausalLM.from_pretrained(path).eval()
    ids = torch.randint(0, 300, (1, 90), generator=torch.Generator().manual_seed(0))  # past 64: scaled
    with torch.no_grad():
        assert (ours(ids) - theirs(ids).logits).abs().max() < 1e-4  # measured 5e-6 .. 8e-6


MISTYPED = {  # config change -> the one line it must give (after "<file>: ")
    "tie_word_embeddings": (
        {"tie_word_embeddings": "false"},
        "tie_word_embeddings must be true or false, got 'false'",
    ),
    "attention_bias": ({"attention_bias": "no"}, "attention_bias must be true or false, got 'no'"),
    "mlp_bias": ({"mlp_bias": 1}, "mlp_bias must be true or false, got 1"),
    "num_key_value_heads 0": (
        {"num_key_value_heads": 0},
        "num_key_value_heads must be a positive integer, got 0",
    ),
    "num_hidden_layers 2.0": (
        {"num_hidden_layers": 2.0},
        "num_hidden_layers must be a positive integer, got 2.0",
    ),
    "hidden_size text": ({"hidden_size": "32"}, "hidden_size must be a positive integer, got '32'"),
    "head_dim true": ({"head_dim": True}, "head_dim must be a positive integer, got True"),
    "rope_scaling []": ({"rope_scaling": []}, "rope_scaling must be null or an object, got []"),
    "rope_parameters []": ({"rope_parameters": []}, "rope_parameters must be null or an object, got []"),
    "rope_theta text": (
        {"rope_parameters": None, "rope_theta": "1e4"},
        "rope_theta must be a finite number > 0, got '1e4'",
    ),
    "rms_norm_eps -1": ({"rms_norm_eps": -1}, "rms_norm_eps must be a finite number > 0, got -1"),
    "hidden_act list": ({"hidden_act": ["silu"]}, "hidden_act must be a string, got ['silu']"),
    "layer_types 3": ({"layer_types": 3}, "layer_types must be a list of strings, got 3"),
    "rope factor text": (
        {"rope_scaling": {"type": "linear", "factor": "2"}},
        "rope_scaling['factor'] must be a finite number > 0, got '2'",
    ),
}


def test_fields_of_the_wrong_type_are_named(hf_dirs, tmp_path):
    """Each was read as true (``bool("false")``), as plain multi-head (``0 or heads``) or as no
    scaling (``[] or None``), or was a TypeError deep inside."""
    path = _copy(hf_dirs["llama-tied"], tmp_path)
    original = (path / "config.json").read_text()
    for case, (changes, message) in MISTYPED.items():
        (path / "config.json").write_text(original)
        _edit_config(path, **changes)
        with pytest.raises(ValueError) as exc:
            model_config_from_hf(path)
        assert str(exc.value) == f"{path / 'config.json'}: {message}", case


def test_gpt2_and_bert_fields_are_typed_too(hf_dirs, tmp_path):
    gpt2 = _copy(hf_dirs["gpt2"], tmp_path, "gpt2")
    for changes, message in [
        ({"tie_word_embeddings": "false"}, "tie_word_embeddings must be true or false, got 'false'"),
        ({"n_inner": 0}, "n_inner must be a positive integer, got 0"),
        ({"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon must be a finite number > 0, got '1e-5'"),
    ]:
        _edit_config(gpt2, **changes)
        with pytest.raises(ValueError) as exc:
            model_config_from_hf(gpt2)
        assert str(exc.value) == f"{gpt2 / 'config.json'}: {message}"
        _edit_config(gpt2, **{k: None for k in changes})  # null: the default again
    assert model_config_from_hf(gpt2).tie_weights is True
    bert = tmp_path / "bert"
    bert.mkdir()
    hf = dict(model_type="bert", vocab_size=50, hidden_size=16, num_attention_heads=2, intermediate_size=32)
    (bert / "config.json").write_text(json.dumps({**hf, "num_hidden_layers": 10**12}))
    with pytest.raises(ValueError, match=r"\bnum_layers=1,000,000,000,000\b.*\b10,000\b"):
        model_config_from_hf(bert)
    (bert / "config.json").write_text(json.dumps({**hf, "num_hidden_layers": "2"}))
    with pytest.raises(ValueError, match=r"\bnum_hidden_layers\b.*\bpositive integer\b.*, got '2'$"):
        model_config_from_hf(bert)
    (bert / "config.json").write_text(json.dumps({**hf, "num_hidden_layers": 1}))
    (bert / "1_Pooling").mkdir()
    (bert / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": "false"}))
    with pytest.raises(ValueError, match=r"\bpooling_mode_cls_token\b.*, got 'false'$"):
        model_config_from_hf(bert)


def test_sizes_are_refused_before_anything_is_allocated(hf_dirs, tmp_path):
    """10^12 layers hung (a Python loop per layer, 4.6 GB and growing); n_embd 10^6 asks for 89 TiB."""
    path = _copy(hf_dirs["gpt2"], tmp_path)
    _edit_config(path, n_layer=10**12)
    for read in (model_config_from_hf, load_hf):  # audit --config counts; generate loads
        with pytest.raises(ValueError) as exc:
            read(path)
        assert str(exc.value) == (
            f"{path / 'config.json'}: num_layers=1,000,000,000,000 is beyond any model (at most 10,000)"
        )
    _edit_config(path, n_layer=2, n_embd=10**6)
    assert model_config_from_hf(path).d_model == 10**6  # counting it is arithmetic
    with pytest.raises(ValueError, match=r"\b24,000,393,000,000 parameters\b.*\b89,408\.4 GiB\b"):
        load_hf(path)


def _index(path):
    return json.loads((path / INDEX).read_text())


def _write_index(path, index):
    (path / INDEX).write_text(json.dumps(index))


def test_index_shards_are_confined_to_the_checkpoint_folder(hf_dirs, tmp_path):
    """A shard outside the folder was opened and parsed; now each is refused before it is opened."""
    root = tmp_path / "a" / "b"
    path = _copy(hf_dirs["llama"], root)
    index = _index(path)
    first = next(iter(index["weight_map"]))
    shard = index["weight_map"][first]
    shutil.copy(path / shard, tmp_path / shard)  # a real shard two folders up
    where = f"{path / INDEX} names shard"
    cases = {
        "../../etc/passwd": f"{where} '../../etc/passwd', which is outside {path}",
        "/proc/self/environ": f"{where} '/proc/self/environ', which is outside {path}",
        f"../../{shard}": f"{where} '../../{shard}', which is outside {path}",
    }
    for name, message in cases.items():
        _write_index(path, {**index, "weight_map": {**index["weight_map"], first: name}})
        with pytest.raises(ValueError) as exc:
            load_hf(path)
        assert str(exc.value) == message
    _write_index(path, {**index, "weight_map": {**index["weight_map"], first: ["x"]}})
    with pytest.raises(ValueError) as exc:
        load_hf(path)
    assert str(exc.value) == f"{path / INDEX}: weight_map[{first!r}] must be a shard's file name, got ['x']"
    _write_index(path, index)
    (path / shard).unlink()
    os.symlink(tmp_path / shard, path / shard)  # a link in the folder to a file outside it
    with pytest.raises(ValueError) as exc:
        load_hf(path)
    assert str(exc.value) == (
        f"{where} {shard!r}, a link to {tmp_path / shard}, outside {path} "
        "(shards must be files in the checkpoint folder)"
    )
    (path / shard).unlink()
    os.rename(tmp_path / shard, path / ("real-" + shard))
    os.symlink("real-" + shard, path / shard)  # a link that stays inside is fine
    assert load_hf(path).config.num_layers == 2


def test_json_nested_100000_deep_is_one_line(hf_dirs, tmp_path):
    path = _copy(hf_dirs["llama"], tmp_path)
    (path / INDEX).write_text("[" * 100_000 + "]" * 100_000)  # a RecursionError in json.loads
    with pytest.raises(ValueError) as exc:
        load_hf(path)
    assert str(exc.value) == f"{path / INDEX} is damaged (JSON nested too deeply to read)"
    (path / "config.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(ValueError) as exc:
        model_config_from_hf(path)
    assert str(exc.value) == f"{path / 'config.json'} is damaged (JSON nested too deeply to read)"


def test_eos_ids_and_gpt2_switches_are_typed(hf_dirs, tmp_path):
    from attnlab.models.hf.checkpoint import eos_ids

    path = _copy(hf_dirs["gpt2"], tmp_path)
    _edit_config(path, eos_token_id=[5, 7])
    assert eos_ids(path) == [5, 7]
    for eos in ("2", [1, "x"], True, -1):  # int("x") was a ValueError of Python's wording
        _edit_config(path, eos_token_id=eos)
        with pytest.raises(ValueError) as exc:
            eos_ids(path)
        assert (
            str(exc.value)
            == f"{path / 'config.json'}: eos_token_id must be a token id or a list of them, got {eos!r}"
        )
    _edit_config(path, eos_token_id=None, scale_attn_weights=1)  # 1 == True in Python, not in JSON
    with pytest.raises(ValueError) as exc:
        model_config_from_hf(path)
    assert str(exc.value) == (
        f"{path / 'config.json'}: scale_attn_weights=1 is not supported "
        "(attnlab implements scale_attn_weights=True)"
    )
