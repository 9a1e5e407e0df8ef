"""`attnlab tasks list` shows what its help promises: each task with its default parameters."""

from click.testing import CliRunner

from attnlab.cli import cli
from attnlab.tasks import TASKS


def test_list_shows_each_task_with_its_defaults():
    lines = CliRunner().invoke(cli, ["tasks", "list"]).output.splitlines()
    assert len(lines) == 2 * len(TASKS)  # a description and a line of defaults each
    assert lines[0].startswith("reverse ") and lines[1].split()[0] == "defaults:"
    assert "min_len=3 max_len=12 num_symbols=10; vocabulary 15 ids" in lines[1]  # the reverse task's
