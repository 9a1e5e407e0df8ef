"""docs/audit.md shows real output: every ``console`` example is run and must print exactly that."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnlab.cli import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"
EXAMPLES = re.findall(r"```console\n\$ attnlab (.*?)\n(.*?)```", DOC.read_text(), re.S)


def test_doc_has_examples_of_every_command():
    commands = {shlex.split(args)[1] for args, _ in EXAMPLES}
    assert commands == {"params", "shapes", "cost"}  # peak's numbers depend on the machine: shown as text
    assert "```text\n$ attnlab audit peak" in DOC.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("args, expected", EXAMPLES, ids=[a[:60] for a, _ in EXAMPLES])
def test_example_prints_what_the_doc_says(args, expected):
    result = CliRunner().invoke(cli, shlex.split(args))
    assert result.exit_code == 0, result.output
    assert result.output == expected


def test_python_example_prints_what_the_doc_says(doc_examples):
    examples = doc_examples(DOC)
    assert len(examples.pairs) == examples.python_blocks >= 1
    examples.assert_each_prints_its_output()


def test_preset_table_is_the_registry():
    from attnlab.audit import PRESETS, audit_params

    rows = re.findall(r"^\| `([\w.-]+)` \| (.*?) \| ([\d,]+) \| (.*?) \| (.*?) \|$", DOC.read_text(), re.M)
    assert [r[0] for r in rows] == list(PRESETS)
    for name, description, total, published, vocab in rows:
        p = PRESETS[name]
        assert (description, published, vocab) == (p.description, p.published, p.vocab_note)
        assert int(total.replace(",", "")) == audit_params(name, build_module=False)["total"]
