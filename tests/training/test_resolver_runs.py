"""``attnlab.models.load`` on folders written by ``attnlab train``: a task run and a text run."""

import hashlib

import pytest
import torch

from attnlab.models import load
from attnlab.training import train


def _digest(folder):
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_task_run_loads_with_its_alphabet_and_is_not_rewritten(tmp_path, tiny_config):
    result = train(
        tiny_config(model="gpt", model_params={"d_model": 16, "heads": 2, "layers": 1}),
        tmp_path,
        progress=False,
    )
    before = _digest(tmp_path)
    loaded = load(tmp_path)
    assert loaded.origin == "run" and loaded.kind == "gpt" and loaded.task["name"] == "reverse"
    ids = torch.tensor([loaded.tokenizer.encode("".join(loaded.tokenizer.symbols[:4]), strict=True)])
    torch.testing.assert_close(loaded.model(ids), result.model.eval()(ids), rtol=0, atol=0)
    assert _digest(tmp_path) == before


def test_a_char_text_run_names_characters_it_lacks(tmp_path, play, text_config):
    source = tmp_path / "play.txt"
    source.write_text(play(60))
    train(text_config(source, steps=5), tmp_path / "run", progress=False)
    loaded = load(tmp_path / "run")
    assert loaded.text is not None and loaded.origin == "run"
    tok = loaded.tokenizer
    assert tok.decode(tok.encode("ROMEO:\nO love!")) == "ROMEO:\nO love!"
    # a character vocabulary would drop what it lacks: it refuses it, naming each character
    with pytest.raises(ValueError, match="'日' \\(U\\+65E5\\), '本' \\(U\\+672C\\)"):
        tok.encode("O 日本 love")
    assert tok.unknown("O 日本 love") == ["日", "本"]
