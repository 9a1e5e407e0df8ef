"""A transformers-made Llama whose weights hold NaN or infinity: found once at load and named by the
checkpoint's own tensor name. Generation refuses (the CLI with exit 2, served ``generate`` with a
400, the library with a ``ValueError``); the analyses warn and run."""

from __future__ import annotations

import http.client
import json
import re
import shutil
from urllib.parse import urlsplit

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnlab.cli import main
from attnlab.decoding import generate, greedy
from attnlab.models import load
from attnlab.nn.nonfinite import NonFiniteError, NonFiniteWeightsWarning, find_nonfinite_weights

pytestmark = pytest.mark.slow  # the session's checkpoints take ~15 s to make under load

Q = "model.layers.0.self_attn.q_proj.weight"


def _damaged(hf_dirs, tmp_path, name: str, value: float):
    """A copy of the unsharded ``llama-tied`` checkpoint with tensor ``name`` (its first row) set to
    ``value``."""
    folder = shutil.copytree(hf_dirs["llama-tied"], tmp_path / "llama-bad")
    state = load_file(folder / "model.safetensors")
    state[name][0] = value
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture
def nan_q(hf_dirs, tmp_path):
    return _damaged(hf_dirs, tmp_path, Q, float("nan"))


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_generate_refuses_naming_the_tensor(nan_q, capsys):
    code, out, err = _run(capsys, "generate", str(nan_q), "hello", "--max-new", "5")
    assert code == 2 and out == "" and Q in err and re.search(r"\b32 of 1024\b.*\bnan\b", err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_infinity_in_the_final_norm_is_refused_too(hf_dirs, tmp_path, capsys):
    folder = _damaged(hf_dirs, tmp_path, "model.norm.weight", float("inf"))
    code, _, err = _run(capsys, "generate", str(folder), "hello", "--max-new", "5")
    assert code == 2 and re.search(r"\bmodel\.norm\.weight \(1 of 32\b.*\binf\)", err), err
    with pytest.raises(NonFiniteError, match="model.norm.weight"):
        load(folder, finite=True)


def test_analyses_warn_once_naming_the_tensor_and_run(nan_q, capsys, tmp_path):
    code, out, err = _run(capsys, "heads", str(nan_q), "--length", "4", "--batch", "1", "--json")
    assert code == 0 and json.loads(out) and err.count(f"Warning: {nan_q}") == 1 and Q in err
    # the explorer cannot draw NaN weights: the warning says why before its one-line refusal
    page = tmp_path / "page.html"
    code, _, err = _run(capsys, "explore", "The keys", "--model", str(nan_q), "--out", str(page))
    lines = err.strip().splitlines()
    assert code == 2 and not page.exists() and len(lines) == 2 and Q in lines[0]
    assert lines[0].startswith("Warning:") and lines[1].startswith("Error:") and "NaN" in lines[1]


def test_the_library_records_the_names_at_load_and_generation_refuses(nan_q):
    with pytest.warns(NonFiniteWeightsWarning, match=Q):
        model, tokenizer = load(nan_q)
    assert model.nonfinite_weights == (f"{Q} (32 of 1024 entries are nan)",)
    with pytest.raises(NonFiniteError, match="q_proj"):
        generate(model, "The keys", 3, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="q_proj"):
        greedy(model, torch.tensor([[1, 2]]), 3)
    assert find_nonfinite_weights(model) == ("blocks.0.self_attn.q_proj.weight (32 of 1024 entries are nan)",)


def test_served_generate_answers_400_naming_the_tensor(nan_q):
    from attnlab.serve import server
    from attnlab.serve.app import create_app

    with pytest.warns(NonFiniteWeightsWarning):
        models = server.load_models([str(nan_q)])
    sock = server.bind("127.0.0.1", 0)
    app = create_app(models, server.hosts_for("127.0.0.1", sock.getsockname()[1]))
    with server.background(app, sock) as url:
        parts = urlsplit(url)
        answers = {}
        for view in ("generate", "tokens"):
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
            body = json.dumps({"text": "The keys", **({"n": 3} if view == "generate" else {})}).encode()
            conn.request("POST", f"/api/{view}", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            answers[view] = r.status, json.loads(r.read())
            conn.close()
    status, data = answers["generate"]
    assert status == 400 and Q in data["error"] and "\n" not in data["error"]
    assert answers["tokens"][0] == 200, answers["tokens"]  # the other views still answer
