"""One registry, owned by the model classes: each family names its config class, its training
options and how they map onto the config; configs written before a rename still load."""

from __future__ import annotations

import json
import re

import pytest
import torch

from attnlab.models import GPT, BertConfig, GPTConfig, Transformer, TransformerConfig, load, load_model
from attnlab.models.base import count_parameters
from attnlab.models.load import load_config
from attnlab.models.registry import FAMILIES, TRAINABLE, build_model, model_class
from attnlab.nn.config import BlockConfig


def test_every_family_registers_itself_and_the_trainable_ones_map_their_options():
    assert [cls.kind for cls in FAMILIES] == ["seq2seq-rnn", "attention-rnn", "transformer", "gpt", "bert"]
    assert TRAINABLE == ("seq2seq-rnn", "attention-rnn", "transformer", "gpt")  # BERT is loaded, not trained
    for kind in TRAINABLE:
        cls = model_class(kind)
        config = cls.from_options(13, **cls.options({}))
        assert isinstance(config, cls.config_class)
        torch.manual_seed(0)
        assert count_parameters(build_model(kind, 13, {})) == count_parameters(cls(config)) > 0


def test_gpt_options_land_on_the_block_and_unknown_options_are_named():
    c = GPT.from_options(11, **GPT.options({"d_model": 32, "heads": 2, "layers": 3, "window": 4}))
    assert (c.vocab_size, c.num_layers, c.max_len) == (11, 3, 256)
    assert (c.block.d_model, c.block.num_heads, c.block.d_ff, c.block.window) == (32, 2, 128, 4)
    assert c.block.norm_place == "pre" and c.d_model == c.block.d_model  # read through the config
    t = Transformer.from_options(9, **Transformer.options({"layers": 3}))
    assert (t.src_vocab, t.tgt_vocab, t.num_encoder_layers, t.num_decoder_layers, t.d_ff) == (9, 9, 3, 3, 256)
    with pytest.raises(ValueError, match=r"\bmodel 'gpt'.*\['hidden'\]"):
        GPT.options({"hidden": 8})
    with pytest.raises(ValueError, match="unknown model 'lstm9'"):
        model_class("lstm9")
    with pytest.raises(ValueError, match=r"^GPTConfig\b.*\bfield\b.*\['heads'\]"):
        GPTConfig(11, heads=2)


def test_a_gpt_config_holds_its_block_and_round_trips():
    block = BlockConfig(32, 4, 64, norm="rms", ffn="glu", activation="silu", positions="rope")
    c = GPTConfig(50, num_layers=2, block=block)
    assert c.block == block.replace(norm_place="pre")  # a GPT block is always pre-norm
    assert GPTConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert GPTConfig(50, block=block, d_model=16).block.d_model == 16  # a field by name, over the block
    assert set(c.to_dict()) == {"vocab_size", "num_layers", "max_len", "tie_weights", "pad_id", "block"}


def test_configs_written_before_the_renames_still_load(tmp_path):
    """config.json as attnlab wrote it before: a GPT's block fields flat, a Transformer's norm place
    as ``norm``, a BERT's ``eps``. Each loads as the model it was, and reading it writes nothing."""
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(23, d_model=16, num_heads=2, num_layers=2, d_ff=24, max_len=12, positions="rope"))
    gpt.save(tmp_path / "gpt")
    flat = {k: v for k, v in gpt.config.to_dict().items() if k != "block"} | gpt.config.block.to_dict()
    del flat["norm_place"]  # GPTConfig had no such field: its blocks were always pre-norm
    (tmp_path / "gpt" / "config.json").write_text(json.dumps({"model": "gpt", "config": flat}))
    before = (tmp_path / "gpt" / "config.json").read_bytes()
    again = load_model(tmp_path / "gpt").eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    assert again.config == gpt.config and torch.equal(again(ids), gpt.eval()(ids))
    assert (tmp_path / "gpt" / "config.json").read_bytes() == before

    t = TransformerConfig(7, 7, d_model=16, num_heads=2, d_ff=32, norm_place="pre", dropout=0.0)
    old = {("norm" if k == "norm_place" else k): v for k, v in t.to_dict().items()}
    assert TransformerConfig.from_dict(old) == t and t.block.norm_place == "pre"
    b = BertConfig(30, d_model=16, num_heads=2, num_layers=1, d_ff=32, norm_eps=1e-7)
    old = {("eps" if k == "norm_eps" else k): v for k, v in b.to_dict().items()}
    assert BertConfig.from_dict(old) == b and b.block.norm_eps == 1e-7


def test_load_config_reads_no_weights(tmp_path):
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(23, d_model=16, num_heads=2, num_layers=3, d_ff=24, max_len=12))
    gpt.save(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not weights")  # never opened
    assert load_config(tmp_path) == load_config(tmp_path / "config.json") == gpt.config
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(tmp_path / 'model.safetensors'))} .*\bsafetensors\b"
    ):
        load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_config(tmp_path / "other.json")


def test_the_audits_name_and_build_the_registrys_families():
    """audit --model lists the registry's AUDITED (through attnlab.names, without torch); a family
    says how an audit sizes it (from_audit) and what its config is to an audit (audit_fields), so a
    config goes to a spec and back to the same model's parameter count."""
    from attnlab import names
    from attnlab.audit import audit_params, model_spec
    from attnlab.audit.build import build
    from attnlab.audit.config import MODELS
    from attnlab.models.registry import AUDITED

    assert AUDITED == names.AUDITED == ("transformer", "gpt", "bert")
    assert MODELS == ("encoder-layer", "decoder-layer", *AUDITED)
    configs = {
        "gpt": GPTConfig(23, d_model=16, num_heads=2, num_layers=2, d_ff=24, max_len=12, tie_weights=False),
        "bert": BertConfig(23, d_model=16, num_heads=2, num_layers=2, d_ff=24, max_len=12, pooler=False),
        "transformer": TransformerConfig(
            23, 23, d_model=16, num_heads=2, d_ff=24, num_encoder_layers=2, num_decoder_layers=2, max_len=12
        ),  # fmt: skip
    }
    for kind, config in configs.items():
        spec = model_spec(config)
        assert (spec.model, spec.layers, spec.vocab) == (kind, 2, 23)
        model = model_class(kind)(config)
        assert count_parameters(build(spec, device="meta")) == count_parameters(model)
        assert audit_params(spec)["total"] == count_parameters(model)
    with pytest.raises(ValueError, match="src_vocab=23 and tgt_vocab=29"):
        model_spec(TransformerConfig(23, 29, d_model=16, num_heads=2, d_ff=24))
