"""``attnlab export RUN_DIR OUT_DIR``: a text run as a Hugging Face GPT-2 checkpoint that
``transformers`` loads, whose greedy continuation equals attnlab's token for token; the settings
GPT-2 cannot express refused by name, before anything is written."""

import json
import re

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.decoding import generate
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.hf.export import FILES, export_gpt2, gpt2_config
from attnlab.models.hf.load import load_hf
from attnlab.tasks.text_tokenizer import char_tokenizer
from attnlab.training import train
from attnlab.training.text_export import load_text_run

transformers = pytest.importorskip("transformers")  # a test dependency (pyproject [test])

PROMPT = "ROMEO:\nO "


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module", params=["char", "bpe"])
def exported(request, tmp_path_factory, play, text_config):
    """A text run trained 40 steps (char or byte-level BPE) and its export."""
    tmp = tmp_path_factory.mktemp(f"export-{request.param}")
    corpus = tmp / "play.txt"
    corpus.write_text(play(300), encoding="utf-8")
    params = {"tokenizer": request.param} | ({"vocab_size": 300} if request.param == "bpe" else {})
    config = text_config(corpus, steps=40, eval_every=0, task_params=params)
    train(config, tmp / "run", progress=False)
    r = run("export", tmp / "run", tmp / "hf", "--json")
    assert r.exit_code == 0, r.output
    return tmp / "run", tmp / "hf", json.loads(r.stdout)


def test_transformers_loads_it_and_greedy_matches_token_for_token(exported):
    run_dir, out, summary = exported
    assert sorted(summary["files"]) == sorted(FILES) and all(n > 0 for n in summary["files"].values())
    model, tok, _ = load_text_run(run_dir)
    hf = transformers.GPT2LMHeadModel.from_pretrained(out).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    ids = tok.encode(PROMPT)
    assert hf_tok(PROMPT)["input_ids"] == ids  # the same tokenizer, loaded by transformers
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.allclose(model(x), hf(x).logits, atol=1e-5)
    new = model.config.max_len - len(ids)  # transformers cannot slide past its positions
    ours = generate(model, ids, new)[0, len(ids) :].tolist()
    with torch.no_grad():
        theirs = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new, do_sample=False)
    assert theirs[0, len(ids) :].tolist() == ours
    assert hf_tok.decode(ours) == tok.decode(ours)


def test_the_export_reads_back_as_the_same_model(exported):
    run_dir, out, summary = exported
    model, _, _ = load_text_run(run_dir)
    back = load_hf(out)  # attnlab's own GPT-2 reader: the inverse mapping
    assert back.config == GPTConfig(**{**model.config.__dict__, "activation": "gelu"})
    assert all(torch.equal(back.state_dict()[k], v) for k, v in model.state_dict().items())
    assert summary["config"]["activation_function"] == "gelu"  # exact GELU (GPT-2's own is gelu_new)
    greedy = ["generate", PROMPT, "--max-new", 20, "--quiet"]
    assert run(greedy[0], out, *greedy[1:]).output == run(greedy[0], run_dir, *greedy[1:]).output


def test_untied_head_and_tanh_gelu_export_too(tmp_path):
    tok = char_tokenizer("ROMEO:\nO love, O night!\n")
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=tok.get_vocab_size(), d_model=32, num_heads=2, num_layers=2, max_len=24,
        tie_weights=False, activation="gelu_tanh", norm_eps=1e-6,
    )  # fmt: skip
    model = GPT(config).eval()
    export_gpt2(model, tok, tmp_path / "hf")
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    assert hf.config.activation_function == "gelu_new" and hf.config.layer_norm_epsilon == 1e-6
    assert not hf.config.tie_word_embeddings
    x = torch.tensor([tok.encode("ROMEO: O love").ids])
    with torch.no_grad():
        assert torch.allclose(model(x), hf(x).logits, atol=1e-5)


@pytest.mark.parametrize(
    "change,named",
    [
        ({"positions": "rope"}, "positions='rope'"),
        ({"positions": "alibi"}, "positions='alibi'"),
        ({"norm": "rms"}, "norm='rms'"),
        ({"ffn": "glu", "activation": "silu"}, "ffn='glu'"),
        ({"qkv_bias": False, "out_bias": False, "ffn_bias": False}, "qkv_bias=False"),
        ({"num_kv_heads": 1}, "num_kv_heads=1"),
        ({"window": 8}, "window=8"),
        ({"attention": "linear"}, "attention='linear'"),
        ({"attention": "ssm", "positions": "none"}, "attention='ssm'"),
    ],
)
def test_settings_gpt2_cannot_express_are_named(change, named, tmp_path):
    config = GPTConfig(vocab_size=10, d_model=16, num_heads=2, num_layers=1, max_len=16, **change)
    with pytest.raises(ValueError) as err:
        export_gpt2(GPT(config), char_tokenizer("abc"), tmp_path / "hf")
    message = str(err.value)
    assert message.startswith("cannot export to GPT-2: ") and named in message and "\n" not in message
    assert not (tmp_path / "hf").exists()
    gpt2_config(GPTConfig(vocab_size=10, attention="flash"))  # the same softmax attention: exported


def test_cli_refusals_are_one_line_and_write_nothing(exported, tmp_path, text_config, play, tiny_config):
    run_dir, out, _ = exported
    r = run("export", run_dir, out)  # an earlier export: needs --overwrite
    assert r.exit_code == 2 and re.search(
        rf"^Error: OUT_DIR {re.escape(str(out))}\b.*\bnot empty\b.*--overwrite\b", r.output
    )
    assert run("export", run_dir, out, "--overwrite", "--quiet").output == ""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = run("export", run_dir, tmp_path / "mine", "--overwrite")
    assert r.exit_code == 2 and re.search(
        rf"^Error: OUT_DIR {re.escape(str(tmp_path / 'mine'))}\b.*\(notes\.txt\)", r.output
    )
    corpus = tmp_path / "play.txt"
    corpus.write_text(play(100), encoding="utf-8")
    linear = text_config(corpus, steps=1, eval_every=0, model_params={"d_model": 16, "layers": 1,
                         "heads": 2, "max_len": 32, "attention": "linear"})  # fmt: skip
    train(linear, tmp_path / "linear", progress=False)
    r = run("export", tmp_path / "linear", tmp_path / "hf")
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and "attention='linear' (GPT-2 has softmax" in lines[0]
    assert not (tmp_path / "hf").exists()
    train(tiny_config(steps=1), tmp_path / "task", progress=False)
    r = run("export", tmp_path / "task", tmp_path / "hf")
    assert r.exit_code == 2 and re.search(
        rf"^Error: {re.escape(str(tmp_path / 'task'))}\b.*\bnot a text run\b", r.output
    )
    r = run("export", tmp_path, tmp_path / "hf")
    assert r.exit_code == 2 and re.search(
        rf"^Error: {re.escape(str(tmp_path))}\b.*\bno latest\.json\b", r.output
    )
