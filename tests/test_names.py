"""attnlab.names holds the names --help lists for registries whose module imports torch: each owning
module uses these very objects (one list), and the lists agree with what the modules build."""

from __future__ import annotations

import pytest

from attnlab import names


@pytest.mark.parametrize(
    "module, attr, name",
    [
        ("attnlab.tasks.base", "SPLITS", "SPLITS"),
        ("attnlab.tasks.text_tokenizer", "TEXT_TOKENIZERS", "TEXT_TOKENIZERS"),
        ("attnlab.models.rnn", "CELLS", "CELLS"),
        ("attnlab.models.rnn", "ATTENTIONS", "RNN_ATTENTIONS"),
        ("attnlab.models.precision", "DTYPES", "MODEL_DTYPES"),
        ("attnlab.decoding.text", "DTYPES", "GENERATE_DTYPES"),
        ("attnlab.training.config", "DECODERS", "DECODERS"),
        ("attnlab.training.config", "TEXT_TASK", "TEXT_TASK"),
        ("attnlab.training.schedule", "SCHEDULES", "SCHEDULES"),
        ("attnlab.training.text_presets", "TEXT_PRESETS", "TEXT_PRESETS"),
        ("attnlab.embedding.stream", "FORMATS", "STREAM_FORMATS"),
        ("attnlab.embedding.stream", "CHUNK_SIZE", "CHUNK_SIZE"),
        ("attnlab.viz.figures", "FORMATS", "FIGURE_FORMATS"),
        ("attnlab.interp.detectors", "CONVENTIONS", "CONVENTIONS"),
        ("attnlab.interp.patching", "POINTS", "POINTS"),
        ("attnlab.experiments.extrapolation", "TRAINED", "TRAINED_POSITIONS"),
        ("attnlab.models.registry", "attention_choices", "attention_choices"),
    ],
)
def test_the_owner_uses_the_same_object(module, attr, name):
    import importlib

    assert getattr(importlib.import_module(module), attr) is getattr(names, name)


def test_tasks_and_trainable_kinds_are_what_the_library_builds():
    from attnlab.models.registry import FAMILIES
    from attnlab.tasks import TASKS
    from attnlab.tasks.base import Task

    assert tuple(TASKS) == tuple(names.TASKS) and all(issubclass(c, Task) for c in TASKS.values())
    assert names.TRAINABLE == tuple(c.kind for c in FAMILIES if c.OPTIONS is not None)
    assert names.attention_choices()[:4] == names.RNN_ATTENTIONS and "sdpa" in names.attention_choices()
