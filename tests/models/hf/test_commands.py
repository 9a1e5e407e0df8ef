"""``attnlab generate`` and ``attnlab explore --model DIR`` on the transformers-made checkpoints
(run in-process through the CLI's entry point): the tokens are transformers', the explorer's
weights are the model's, and each bad input is one ``Error:`` line with exit status 2."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnlab.cli import main

# every test here needs the session's checkpoints, which take ~15 s to make under load
pytestmark = pytest.mark.slow


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def _not_json(constant: str):
    raise ValueError(f"--json printed {constant}, which is not JSON")


def test_generate_greedy_json_is_transformers_tokens(hf_dirs, hf_oracles, hf_tokenizer, capsys):
    code, out, _ = _run(
        capsys, "generate", str(hf_dirs["llama"]), "The keys and values", "--max-new", "12", "--json"
    )
    assert code == 0
    result = json.loads(out, parse_constant=_not_json)
    prompt = torch.tensor([hf_tokenizer.encode("The keys and values").ids])
    theirs = hf_oracles["llama"].generate(
        prompt, max_new_tokens=12, min_new_tokens=12, do_sample=False, pad_token_id=0
    )
    assert result["tokens"] == theirs[0, prompt.shape[1] :].tolist()
    assert result["text"] == hf_tokenizer.decode(result["tokens"])
    assert result["prompt_tokens"] == prompt.shape[1] and result["new_tokens"] == 12
    c = hf_oracles["llama"].config
    kv_bytes = 2 * c.num_hidden_layers * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * 4
    assert result["cache"]["bytes"] == kv_bytes * result["cache"]["positions_held"]
    assert result["cache"]["positions_held"] == prompt.shape[1] + 11


def test_generate_streams_text_and_reports_speed(hf_dirs, hf_tokenizer, capsys):
    code, out, err = _run(capsys, "generate", str(hf_dirs["mistral"]), "A sliding window", "--max-new", "20")
    assert code == 0
    code, js, _ = _run(
        capsys, "generate", str(hf_dirs["mistral"]), "A sliding window", "--max-new", "20", "--json"
    )
    result = json.loads(js)
    assert out == "A sliding window" + result["text"] + "\n"  # the prompt, then the streamed pieces
    assert "20 tokens in" in err and "tokens/s (greedy, float32)" in err
    assert result["cache"]["positions_held"] == 8  # Mistral's window: the rolling buffer
    code, js, _ = _run(
        capsys,
        "generate",
        str(hf_dirs["mistral"]),
        "A sliding window",
        "--max-new",
        "20",
        "--no-cache",
        "--json",
    )
    assert json.loads(js)["tokens"] == result["tokens"] and json.loads(js)["cache"] is None
    code, js, _ = _run(
        capsys,
        "generate",
        str(hf_dirs["gpt2"]),
        "A",
        "--max-new",
        "6",
        "--temperature",
        "0.9",
        "--seed",
        "4",
        "--json",
    )
    again = json.loads(
        _run(
            capsys,
            "generate",
            str(hf_dirs["gpt2"]),
            "A",
            "--max-new",
            "6",
            "--temperature",
            "0.9",
            "--seed",
            "4",
            "--json",
        )[1]
    )
    assert json.loads(js)["tokens"] == again["tokens"]
    code, js, _ = _run(
        capsys, "generate", str(hf_dirs["qwen2"]), "A", "--max-new", "5", "--beam", "3", "--json"
    )
    assert code == 0 and json.loads(js)["strategy"] == "beam search, 3 beams"


def test_explore_an_hf_checkpoint_shows_its_causal_weights(hf_dirs, hf_tokenizer, tmp_path, capsys):
    from attnlab.models import load_hf
    from attnlab.nn import capture
    from attnlab.viz.explorer import attention_views

    views, label = attention_views("Modern LLMs mostly use RoPE", hf_dirs["qwen2"])
    ids = hf_tokenizer.encode("Modern LLMs mostly use RoPE").ids
    model = load_hf(hf_dirs["qwen2"]).eval()
    with torch.no_grad(), capture(model, ["blocks.*.self_attn.weights"]) as cache:
        model(torch.tensor([ids]))
    weights = [cache[f"blocks.{i}.self_attn.weights"] for i in range(len(cache))]  # each [1, h, T, T]
    assert views[0].kind == "causal" and "2 key/value heads" in label
    assert views[0].layer_names == tuple(f"blocks.{i}" for i in range(len(weights)))
    assert torch.allclose(torch.from_numpy(views[0].weights), torch.cat(weights), atol=0)
    assert "".join(views[0].query_tokens) == "Modern LLMs mostly use RoPE"
    code, out, _ = _run(
        capsys,
        "explore",
        "Modern LLMs",
        "--model",
        str(hf_dirs["mistral"]),
        "--out",
        str(tmp_path / "page.html"),
    )
    assert code == 0 and "window 8" in out and (tmp_path / "page.html").stat().st_size > 1000


def _bad(tmp_path, hf_dirs):
    other = tmp_path / "t5"
    shutil.copytree(hf_dirs["gpt2"], other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    small = tmp_path / "small-vocab"
    shutil.copytree(hf_dirs["gpt2"], small)
    shutil.copy(hf_dirs["gpt2"] / "tokenizer.json", small / "tokenizer.json")
    from safetensors.torch import load_file, save_file

    state = load_file(small / "model.safetensors")
    state["transformer.wte.weight"] = state["transformer.wte.weight"][:200]
    save_file(state, str(small / "model.safetensors"))
    (small / "config.json").write_text(json.dumps({**config, "vocab_size": 200}))
    mismatched = tmp_path / "mismatched"
    shutil.copytree(hf_dirs["gpt2"], mismatched)
    (mismatched / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    return {
        "no config.json": [str(tmp_path), "hi"],
        "another architecture": [str(other), "hi"],
        "tensors that do not match the config": [str(mismatched), "hi"],
        "a tokenizer that does not fit the vocabulary": [str(small), "hi"],
        "beam search past the context": [
            str(hf_dirs["gpt2"]),
            "attention " * 5,
            "--beam",
            "2",
            "--max-new",
            "60",
        ],
        "--max-new 0": [str(hf_dirs["gpt2"]), "hi", "--max-new", "0"],
        "--top-k without --temperature": [str(hf_dirs["gpt2"]), "hi", "--top-k", "5"],
        "--beam with --temperature": [str(hf_dirs["gpt2"]), "hi", "--beam", "2", "--temperature", "1"],
        "--beam wider than the vocabulary": [str(hf_dirs["gpt2"]), "hi", "--beam", "1000000"],
        "--top-p nan": [str(hf_dirs["gpt2"]), "hi", "--temperature", "1", "--top-p", "nan"],
        "--top-p 0": [str(hf_dirs["gpt2"]), "hi", "--temperature", "1", "--top-p", "0"],
        "--temperature nan": [str(hf_dirs["gpt2"]), "hi", "--temperature", "nan"],
        "--dtype bfloat16 with --beam": [str(hf_dirs["gpt2"]), "hi", "--dtype", "bfloat16", "--beam", "2"],
        "--dtype bfloat16 on a sliding window": [str(hf_dirs["mistral"]), "hi", "--dtype", "bfloat16"],
        "--dtype float16": [str(hf_dirs["gpt2"]), "hi", "--dtype", "float16"],
    }


def test_bad_input_is_one_line_and_exit_2(hf_dirs, tmp_path, capsys):
    expected = {
        "no config.json": "holds no model: no config.json",
        "another architecture": "model_type 't5' is not supported; supported: bert, gpt2, llama, mistral",
        "tensors that do not match the config": "missing tensor(s) ['transformer.h.2.",
        "a tokenizer that does not fit the vocabulary": "has token ids up to 299 but the model's vocab_size",
        "beam search past the context": "--max-new 60 exceeds max_len=64",
        "--max-new 0": "--max-new must be a positive integer, got 0",
        "--top-k without --temperature": "give --temperature too",
        "--beam with --temperature": "--beam searches deterministically",
        "--beam wider than the vocabulary": "--beam 1,000,000 is more than the vocabulary (301 tokens)",
        "--top-p nan": "--top-p must be a number in (0, 1], got 'nan'",
        "--top-p 0": "--top-p must be a number in (0, 1], got '0'",
        "--temperature nan": "--temperature must be a positive number, got 'nan'",
        "--dtype bfloat16 with --beam": "--dtype bfloat16 runs the cached decode engine",
        "--dtype bfloat16 on a sliding window": "cannot run this model: a sliding window or ALiBi",
        "--dtype float16": "float32, bfloat16",
    }
    for case, args in _bad(tmp_path, hf_dirs).items():
        code, out, err = _run(capsys, "generate", *args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, case
        assert len(lines) == 1 and lines[0].startswith("Error:") and expected[case] in lines[0], (case, err)


def test_a_temperature_of_1e_300_samples_the_greedy_tokens(hf_dirs, capsys):
    """It was NaN probabilities and a RuntimeError traceback; T -> 0 is greedy decoding."""
    runs = [["--temperature", "1e-300", "--seed", "3"], []]
    tokens = []
    for extra in runs:
        code, out, _ = _run(
            capsys, "generate", str(hf_dirs["gpt2"]), "The keys", "--max-new", "8", "--json", *extra
        )
        assert code == 0
        tokens.append(json.loads(out)["tokens"])
    assert tokens[0] == tokens[1] and len(tokens[0]) == 8


def test_generate_quiet_prints_the_text_and_ends_with_a_newline(hf_dirs, capsys):
    """--quiet: stdout is the generated text and one newline (a shell prompt starts on its own
    line), greedy streamed or beam search; no timing line on stderr."""
    for extra in ([], ["--beam", "2"]):
        args = ["generate", str(hf_dirs["llama"]), "The keys", "--max-new", "6", *extra]
        code, out, err = _run(capsys, *args, "--quiet")
        _, js, _ = _run(capsys, *args, "--json")
        text = json.loads(js)["text"]
        assert code == 0 and text and out == text + "\n" and err == "", (extra, out, err)


def test_generate_in_bfloat16_picks_what_float32_would(hf_dirs, capsys):
    """--dtype bfloat16: the decode engine's GEMMs in bfloat16; each greedy token is within 0.05 nats
    of the float32 model's best given the same prefix, and the first step's logits are bfloat16's
    (close to float32's, not equal)."""
    from attnlab.decoding.text import GenerationRequest, decode_engine_for
    from attnlab.models import load

    args = ["generate", str(hf_dirs["llama"]), "The keys", "--dtype", "bfloat16", "--max-new"]
    code, out, err = _run(capsys, *args, "6")
    assert code == 0 and "(greedy, bfloat16)" in err
    code, out, _ = _run(capsys, *args, "12", "--json")
    result = json.loads(out)
    assert code == 0 and result["dtype"] == "bfloat16" and result["new_tokens"] == 12
    loaded = load(hf_dirs["llama"])
    model = loaded.model.eval()
    ids = loaded.tokenizer.encode("The keys")
    with torch.no_grad():
        gaps = []
        for tok in result["tokens"]:
            logp = model(torch.tensor([ids]))[0, -1].log_softmax(-1)  # [V] float32
            gaps.append(float(logp.max() - logp[tok]))
            ids.append(tok)
        engine = decode_engine_for(model, GenerationRequest(prompt="", dtype="bfloat16"))
        prompt = torch.tensor([ids[:3]])
        fast, exact = model.start(prompt, engine=engine).last_logits, model(prompt)[:, -1]  # [1, V] each
    assert max(gaps) <= 0.05
    assert not torch.equal(fast, exact) and (fast - exact).abs().max() <= 0.05 * exact.abs().max()
