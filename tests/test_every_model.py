"""Every command that takes a model, on every kind of source :func:`attnlab.models.load` reads.

Sources: ``minilm`` (a pretrained package), a GPT-2 and a Llama folder written by ``transformers``'
own ``save_pretrained`` (random weights, a BPE ``tokenizer.json``), a run of ``attnlab train`` on a
task, a text run (a char GPT), and a saved GPT with a ``tokenizer.json`` beside it. Each cell asserts
a number: the layers ``explore`` draws equal the model's, the tokens ``generate`` prints equal
:func:`attnlab.decoding.generate` (greedy) on the model ``load`` gives, the parameters ``audit
params --config`` counts equal the loaded model's, an encoder's self-cosine is 1.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.decoding import generate
from attnlab.models import load
from attnlab.models.base import count_parameters
from attnlab.training import TrainConfig, train

SOURCES = ("minilm", "gpt2", "llama", "task-run", "text-run", "saved")
DECODERS = ("gpt2", "llama", "text-run", "saved")
TEXT = "the keys and values"
PROMPT = "the keys"  # + 6 new tokens fit the text run's 16 positions


def _hf_helpers():
    """tests/models/hf/conftest.py (test modules cannot import from tests/ under importlib mode)."""
    path = Path(__file__).parent / "models" / "hf" / "conftest.py"
    spec = importlib.util.spec_from_file_location("hf_checkpoints", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    """``{kind of source: what --model / DIR takes}``, each built once (a few seconds in all)."""
    root = tmp_path_factory.mktemp("every-model")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread beats two contending on a loaded machine
    hf = _hf_helpers()
    tokenizer = hf.train_tokenizer()
    out = {"minilm": "minilm"}
    for name in ("gpt2", "llama"):
        out[name] = str(hf.make_checkpoint(root / name, name, tokenizer))
    small = {"d_model": 16, "heads": 2, "layers": 1}
    common = dict(steps=3, batch_size=8, warmup=1, eval_size=4, seed=0)
    task = TrainConfig(
        task="reverse", model="gpt", train_size=64, task_params={"min_len": 3, "max_len": 5},
        model_params=small, **common,
    )  # fmt: skip
    train(task, root / "task-run", progress=False)
    (root / "play.txt").write_text("the keys and values of every token, the cache of the night.\n" * 40)
    text = TrainConfig(
        task="text", model="gpt", task_params={"source": str(root / "play.txt"), "context": 16},
        model_params={**small, "max_len": 16}, **common,
    )  # fmt: skip
    train(text, root / "text-run", progress=False)
    saved = load(out["gpt2"]).model
    saved.save(root / "saved")
    shutil.copy(root / "gpt2" / "tokenizer.json", root / "saved" / "tokenizer.json")
    out |= {
        "task-run": str(root / "task-run"),
        "text-run": str(root / "text-run"),
        "saved": str(root / "saved"),
    }
    yield out
    torch.set_num_threads(threads)


def _run(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _layers(model) -> int:
    c = model.config
    return getattr(c, "num_layers", None) or c.num_encoder_layers


def _digest(folder: str) -> dict[str, int]:
    return {str(p): hash(p.read_bytes()) for p in sorted(Path(folder).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", SOURCES)
def test_load_reads_every_source_without_writing(sources, kind):
    before = _digest(sources[kind]) if kind != "minilm" else None
    loaded = load(sources[kind])
    want = {"minilm": "pretrained", "gpt2": "hf", "llama": "hf", "saved": "saved"}.get(kind, "run")
    layers = {"minilm": 6, "gpt2": 2, "llama": 2, "saved": 2}.get(kind, 1)
    assert (loaded.origin, _layers(loaded.model), loaded.model.training) == (want, layers, False)
    text = "cab" if kind == "task-run" else TEXT
    assert loaded.tokenizer.unknown(text) == [] and len(loaded.tokenizer.encode(text, strict=True)) >= 3
    assert before is None or _digest(sources[kind]) == before


@pytest.mark.parametrize("kind", SOURCES)
def test_explore_draws_every_layer(sources, kind, tmp_path):
    sentence = "cab" if kind == "task-run" else PROMPT
    code, out, err = _run("explore", sentence, "--model", sources[kind], "--out", tmp_path / "page.html")
    assert code == 0, err
    drawn = [int(x.split(",")[0]) for x in out.split("[")[1:]]  # "name [L, h, T_q, T_k]" per view
    assert drawn and set(drawn) == {_layers(load(sources[kind]).model)}


@pytest.mark.parametrize("kind", DECODERS)
def test_generate_prints_the_greedy_tokens(sources, kind):
    code, out, err = _run("generate", sources[kind], PROMPT, "--max-new", 6, "--json")
    assert code == 0, err
    model, tokenizer = load(sources[kind])
    want = generate(model, PROMPT, 6, tokenizer=tokenizer)[0, -6:].tolist()
    assert json.loads(out)["tokens"] == want


@pytest.mark.parametrize("kind", ["minilm", "task-run"])
def test_generate_refuses_what_is_not_a_text_decoder_in_one_line(sources, kind):
    code, _, err = _run("generate", sources[kind], TEXT)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("Error: "), err


@pytest.mark.parametrize("kind", SOURCES)
def test_embed_takes_encoders_and_names_a_decoder(sources, kind):
    code, out, err = _run("embed", TEXT, TEXT, "--model", sources[kind], "--json")
    if kind == "minilm":
        data = json.loads(out)
        assert code == 0 and data["dim"] == 384 and abs(data["cosine"][0][1] - 1) < 1e-5
    else:
        assert code == 2 and err.strip().splitlines() == [err.strip()] and "embed needs an encoder" in err


@pytest.mark.parametrize("kind", SOURCES)
def test_audit_config_counts_the_loaded_models_parameters(sources, kind):
    code, out, err = _run("audit", "params", "--config", sources[kind], "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["total"] == report["module_total"] == count_parameters(load(sources[kind]).model)


def test_python_generate_takes_text_ids_or_a_tensor_and_refuses_the_rest(sources):
    model, tokenizer = load(sources["llama"])
    ids = tokenizer.encode(TEXT)
    by_text = generate(model, TEXT, 4, tokenizer=tokenizer)
    assert torch.equal(by_text, generate(model, ids, 4)) and torch.equal(
        by_text, generate(model, torch.tensor(ids), 4)
    )
    assert by_text.shape == (1, len(ids) + 4)
    for bad, message in [(TEXT, "needs tokenizer="), (3.5, "got float"), ([1.5], "token ids")]:
        with pytest.raises(ValueError, match=message):
            generate(model, bad, 4)


def test_unknown_characters_are_one_warning_line_or_a_char_runs_error(sources, tmp_path):
    code, _, err = _run("explore", "the cat 🦜 sat", "--out", tmp_path / "page.html")  # minilm: [UNK]
    assert code == 0 and err.strip().splitlines() == [
        "Warning: characters the tokenizer cannot represent: '🦜' (U+1F99C); encoded as [UNK]"
    ]
    code, _, err = _run("generate", sources["text-run"], "the 🦜", "--max-new", 2)  # a char run refuses it
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'🦜' (U+1F99C)" in err
