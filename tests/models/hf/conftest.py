"""Small Hugging Face checkpoints made by transformers itself (the test-only oracle), once per session.

Each directory is what ``save_pretrained`` writes for a randomly initialised ``GPT2LMHeadModel``,
``LlamaForCausalLM``, ``MistralForCausalLM`` or ``Qwen2ForCausalLM`` (one GPT-2 saved as the bare
``GPT2Model``, one Llama sharded with an index), plus a byte-level BPE ``tokenizer.json`` trained
here with ``tokenizers``. They differ in width, heads, GQA ratio (1, 2, 3, 4 query heads per
key/value head), odd vocabulary sizes, tied and untied heads, ``rope_theta`` and RMSNorm eps.
``initializer_range`` is raised from 0.02 so that random logits have clear maxima: greedy decoding
then never hinges on a near-tie that rounding could break.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TOKENIZER_VOCAB = 300
CORPUS = [
    "Attention lets every token look at every other token and take a weighted average of values.",
    "The keys and values are what the KV cache stores, so decoding a new token costs one row.",
    "Most modern LLMs use grouped-query attention: several query heads share one key/value head.",
    "Modern LLMs mostly use RoPE, which rotates queries and keys by an angle set by the position.",
    "A sliding window keeps only the last W positions, so the cache stops growing with the text.",
] * 20

# name -> (transformers class, config class, config kwargs, how to save)
CHECKPOINTS = {
    "gpt2": (
        "GPT2LMHeadModel",
        "GPT2Config",
        dict(vocab_size=301, n_embd=48, n_layer=2, n_head=4, n_positions=64),
        {},
    ),
    "gpt2-base": (
        "GPT2Model",
        "GPT2Config",
        dict(
            vocab_size=333,
            n_embd=36,
            n_layer=3,
            n_head=3,
            n_inner=100,
            n_positions=80,
            layer_norm_epsilon=1e-6,
        ),
        {},
    ),
    "llama": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            vocab_size=307,
            hidden_size=48,
            intermediate_size=88,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=2,
            rope_theta=500000.0,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            max_position_embeddings=128,
        ),
        dict(max_shard_size="60KB"),
    ),
    "llama-tied": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            vocab_size=300,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=4,
            rope_theta=10000.0,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            max_position_embeddings=96,
        ),
        {},
    ),
    "mistral": (
        "MistralForCausalLM",
        "MistralConfig",
        dict(
            vocab_size=311,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            sliding_window=8,
            rope_theta=1e6,
            rms_norm_eps=1e-5,
            max_position_embeddings=128,
        ),
        {},
    ),
    "qwen2": (
        "Qwen2ForCausalLM",
        "Qwen2Config",
        dict(
            vocab_size=319,
            hidden_size=48,
            intermediate_size=72,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=2,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            max_position_embeddings=128,
        ),
        {},
    ),
}
CAUSAL = [name for name, spec in CHECKPOINTS.items() if spec[0] != "GPT2Model"]


def pytest_generate_tests(metafunc):
    """``hf_name``: every checkpoint; ``causal_name``: those saved with their LM head."""
    for arg, names in (("hf_name", list(CHECKPOINTS)), ("causal_name", CAUSAL)):
        if arg in metafunc.fixturenames:
            metafunc.parametrize(arg, names)


def train_tokenizer():
    """A byte-level BPE tokenizer of :data:`TOKENIZER_VOCAB` ids trained on :data:`CORPUS`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def make_checkpoint(directory: Path, name: str, tokenizer=None, seed: int = 0) -> Path:
    """Write the checkpoint ``name`` of :data:`CHECKPOINTS` (random weights, seeded) into ``directory``."""
    import torch
    import transformers

    model_cls, config_cls, kwargs, save = CHECKPOINTS[name]
    config = getattr(transformers, config_cls)(
        **kwargs, initializer_range=0.2, bos_token_id=None, eos_token_id=None, pad_token_id=None
    )
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    model.save_pretrained(directory, **save)
    if tokenizer is not None:
        tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(autouse=True)
def _one_thread():
    """These models are tiny: one thread beats two contending with the rest of a loaded machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def hf_tokenizer():
    return train_tokenizer()


@pytest.fixture(scope="session")
def hf_dirs(tmp_path_factory, hf_tokenizer) -> dict[str, Path]:
    """``{name: checkpoint directory}`` for every entry of :data:`CHECKPOINTS` (built once)."""
    root = tmp_path_factory.mktemp("hf")
    return {
        name: make_checkpoint(root / name, name, hf_tokenizer, seed=i) for i, name in enumerate(CHECKPOINTS)
    }


@pytest.fixture(scope="session")
def hf_oracles(hf_dirs):
    """``{name: transformers model}`` loaded back from each directory (eager attention: it returns
    the weights), in float32 and eval mode."""
    import transformers

    out = {}
    for name, path in hf_dirs.items():
        cls = CHECKPOINTS[name][0]
        cls = "GPT2LMHeadModel" if cls == "GPT2Model" else cls
        out[name] = getattr(transformers, cls).from_pretrained(path, attn_implementation="eager").eval()
    return out
