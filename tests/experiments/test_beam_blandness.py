"""The decoding experiment on a tiny GPT trained on a play: the measures on hand-made texts, and the
course's claim in its direction (beam search more probable, blander, more repetitive than sampling)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.experiments.beam_blandness import QUICK, REFERENCE, distinct, repeated_ngrams, run


def test_distinct_n_counts_word_ngrams_over_all_texts():
    texts = ["the cat the cat", "the dog"]
    assert distinct(texts, 1) == pytest.approx(3 / 6)  # the, cat, dog of 6 words
    assert distinct(texts, 2) == pytest.approx(3 / 4)  # (the cat) x2, (cat the), (the dog)
    assert distinct(["one"], 2) == 0.0  # no bigram at all


def test_repeated_ngrams_counts_every_occurrence_after_the_first():
    assert repeated_ngrams([[1, 2, 3, 4, 1, 2, 3, 4]], 4) == pytest.approx(1 / 5)  # (1,2,3,4) again
    assert repeated_ngrams([[7] * 10], 4) == pytest.approx(6 / 7)
    assert repeated_ngrams([[1, 2, 3, 4], [1, 2, 3, 4]], 4) == 0.0  # across sequences is not repetition


def test_each_sampler_draws_from_its_own_seed_stream():
    """With one shared seed, top-p, temperature 0.8 and pure sampling drew the same uniforms and
    began alike; each now has its own seed, from the seed and its name, the same in every process."""
    import torch

    from attnlab import decoding
    from attnlab.experiments.beam_blandness import Settings, generate, sampler_seed
    from attnlab.models import GPT, GPTConfig

    settings = Settings()
    seeds = {name: options.get("seed") for name, options in settings.methods()}
    samplers = [n for n, o in settings.methods() if o.get("temperature", 0) > 0]
    assert len(samplers) == 4 and len({seeds[n] for n in samplers}) == 4
    assert seeds["top-p 0.9"] == sampler_seed(0, "top-p 0.9") == 1480444576  # sha256: fixed everywhere
    assert sampler_seed(1, "top-p 0.9") != sampler_seed(0, "top-p 0.9")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, d_model=16, num_heads=4, num_layers=1, d_ff=32, max_len=24)).eval()
    prompts = torch.randint(0, 50, (6, 4))  # [P, T_p]
    options = dict(settings.methods())
    pure = generate(model, prompts, 8, settings, options["pure sampling (T = 1)"])  # [P, 8]
    same = decoding.sample(model, prompts, 8, temperature=1.0, seed=sampler_seed(0, "pure sampling (T = 1)"))
    assert torch.equal(pure, same)
    shared = decoding.sample(model, prompts, 8, temperature=1.0, seed=0)  # the old shared stream
    assert not torch.equal(pure, shared)


def test_the_chart_names_every_kind_of_bar():
    """The title said "beam search (red) against sampling (blue)" while greedy was blue too."""
    from attnlab.experiments.beam_blandness import REFERENCE, Settings, series

    kinds = {name: series(name) for name, _ in Settings().methods()} | {REFERENCE: series(REFERENCE)}
    colours = {k: c for k, (c, _) in kinds.items()}
    assert colours["greedy"] not in (colours["top-k 10"], colours["beam 4"], colours[REFERENCE])
    assert len({c for c, _ in kinds.values()}) == len({label for _, label in kinds.values()}) == 4
    assert kinds["greedy"][1].startswith("greedy") and kinds["beam 8"][1] == "beam search"


@pytest.fixture(scope="module")
def result(text_run, tmp_path_factory):
    settings = dataclasses.replace(QUICK, prompts=8, prompt_tokens=8)
    return run(settings, tmp_path_factory.mktemp("decoding"), run_dir=text_run, log=lambda *a: None)


def test_beam_search_is_more_probable_blander_and_more_repetitive_than_sampling(result):
    by = {m.name: m for m in result.methods}
    beams = [m for n, m in by.items() if n.startswith("beam")]
    samplers = [by[n] for n in ("top-k 10", "top-p 0.9", "temperature 0.8", "pure sampling (T = 1)")]
    print({n: (m.mean_log_prob, m.distinct_2, m.repeat_4) for n, m in by.items()})
    assert min(b.mean_log_prob for b in beams) > max(s.mean_log_prob for s in samplers) + 0.1
    assert max(b.distinct_2 for b in beams) < min(s.distinct_2 for s in samplers) - 0.1
    assert min(b.repeat_4 for b in beams) > max(s.repeat_4 for s in samplers) + 0.03
    assert result.model["gate"]["passed"]  # 2.11 nats/token against the bigram table's 2.54
    assert all(v["answer"] == "agrees" for v in result.verdict)
    for v in result.verdict:  # each interval excludes zero on the claimed side (log-prob 0.17 to 0.37)
        assert v["interval"][0] > 0 if v["part"] != "blander" else v["interval"][1] < 0
    assert result.new_tokens == 56  # the model's 64 positions less the 8-token prompt
    for m in result.methods:
        assert m.mean_log_prob < 0 and 0 <= m.distinct_1 <= 1 and 0 <= m.repeat_4 <= 1
    assert by[REFERENCE].mean_log_prob < by["beam 8"].mean_log_prob  # real text is not the most probable


def test_files_and_json(result):
    data = json.loads(open(result.files["json"]).read())
    assert [m["name"] for m in data["methods"]] == [m.name for m in result.methods]
    assert data["claim"].startswith("Beam search keeps the k best") and "Week 19" in data["claim"]
    assert open(result.files["table"]).read().count("\n") == len(result.methods) + 2
    assert open(result.files["plot"], "rb").read(4) == b"\x89PNG"


def _refuse(constant: str):
    raise ValueError(f"not JSON: {constant}")


def test_cli_json_and_bad_input(text_run, tmp_path):
    done = CliRunner().invoke(
        cli,
        [
            "experiment",
            "decoding",
            "--run",
            str(text_run),
            "--out",
            str(tmp_path / "a"),
            "--prompts",
            "2",
            "--json",
        ],  # fmt: skip
    )
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout, parse_constant=_refuse)  # strict JSON: no NaN or Infinity
    assert len(data["prompts"]) == 2 and data["new_tokens"] == 48  # 64 positions - 16 prompt tokens
    bad = CliRunner().invoke(cli, ["experiment", "decoding", "--run", str(tmp_path / "a" / "results.json"),
                                   "--out", str(tmp_path / "b")])  # fmt: skip
    assert bad.exit_code == 2 and "is not a folder" in bad.output and "Traceback" not in bad.output
