"""``attnlab generate`` and the served page's generate view are one front end
(:func:`attnlab.decoding.generate_text`) on a Hugging Face folder: the same request gives the same
continuation, past the model's positions too, and both stop at any of a generation_config's
end-of-sequence ids."""

from __future__ import annotations

import json
import shutil

import pytest

from attnlab.cli import main
from attnlab.models import load
from attnlab.serve import views

pytestmark = pytest.mark.slow  # the session's checkpoints


def _cli(capsys, folder, prompt: str, *extra: str) -> dict:
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(folder), prompt, "--json", *extra])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    return json.loads(out.out)


def test_the_cli_and_the_served_page_continue_alike_past_the_context(hf_dirs, capsys):
    folder = hf_dirs["llama-tied"]  # 96 positions
    loaded = load(folder)
    prompt = "The keys and values of every head " * 5
    n_prompt = len(loaded.tokenizer.encode(prompt))
    assert 80 <= n_prompt <= 96  # so 20 new tokens pass the positions
    served = views.generate(loaded, prompt, n=20, beam=2, temperature=0.9, seed=4)
    greedy = _cli(capsys, folder, prompt, "--max-new", "20")
    drawn = _cli(capsys, folder, prompt, "--max-new", "20", "--temperature", "0.9", "--seed", "4")
    assert served["greedy"]["ids"] == greedy["tokens"] and len(greedy["tokens"]) == 20
    assert served["sample"]["ids"] == drawn["tokens"] and len(drawn["tokens"]) == 20
    assert served["greedy"]["text"] == greedy["text"] and served["sample"]["text"] == drawn["text"]
    assert served["beam"]["ids"] == [] and "beam search cannot slide" in served["beam"]["note"]
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(folder), prompt, "--max-new", "20", "--beam", "2"])
    assert exc.value.code == 2 and "beam search cannot slide" in capsys.readouterr().err


def test_two_eos_ids_in_generation_config_stop_both_front_ends_at_either(hf_dirs, tmp_path, capsys):
    folder = tmp_path / "llama"
    shutil.copytree(hf_dirs["llama"], folder)
    prompt = "The keys"
    free = _cli(capsys, folder, prompt, "--max-new", "12")["tokens"]
    first, other = free[3], next(t for t in range(300) if t not in free)
    stop = free[: free.index(first) + 1]
    for eos in ([first, other], [other, first]):
        (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
        loaded = load(folder)
        assert loaded.eos_ids == eos
        got = _cli(capsys, folder, prompt, "--max-new", "12")
        served = views.generate(loaded, prompt, n=12, beam=1)
        assert got["tokens"] == served["greedy"]["ids"] == stop and got["stopped_at_eos"]
        assert served["beam"]["ids"] == stop  # beam search stops at either too (beam 1 = greedy)


def test_without_an_eos_token_id_the_tokenizers_declared_eos_is_read(hf_dirs, hf_tokenizer, tmp_path):
    folder = tmp_path / "llama"
    shutil.copytree(hf_dirs["llama"], folder)
    assert load(folder).eos_ids == []  # the checkpoint and its tokenizer declare none
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<|endoftext|>"}}))
    assert load(folder).eos_ids == [hf_tokenizer.token_to_id("<|endoftext|>")]
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 9]}))
    assert load(folder).eos_ids == [7, 9]  # the checkpoint's own ids come first
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": 5}))
    with pytest.raises(ValueError, match="eos_token"):
        load(folder)
