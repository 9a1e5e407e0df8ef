"""docs/visualisation.md: every python example runs as written and prints its output block."""

from pathlib import Path


def test_visualisation_page_examples(doc_examples, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write alignment.png and out/minilm.html here
    page = doc_examples(Path(__file__).parents[2] / "docs" / "visualisation.md")
    assert len(page.pairs) == page.python_blocks == 2
    page.assert_each_prints_its_output()
    assert (tmp_path / "alignment.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "out" / "minilm.html").stat().st_size > 10_000
