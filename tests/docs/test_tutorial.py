"""docs/tutorial.ipynb runs top to bottom in a real Python kernel (nbclient), and shows the right numbers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "tutorial.ipynb"


@pytest.mark.slow
def test_the_tutorial_notebook_runs_and_prints_the_notes_numbers():
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    env_path = os.pathsep.join(
        p for p in (str(NOTEBOOK.parents[1] / "src"), os.environ.get("PYTHONPATH")) if p
    )
    os.environ["PYTHONPATH"] = env_path  # the kernel imports this checkout's attnlab
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.km_kwargs = {"kernel_cmd": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]}
    client.execute()  # raises CellExecutionError on any error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "[[0.5 0.5]] [[0.5 1. ]]" in text
    assert "3152384" in text
    diff = float(text.split("max |attnlab - torch| = ")[1].split()[0])
    assert diff < 1e-5
    html = [
        o for o in outputs if o.get("output_type") == "execute_result" and "text/html" in o.get("data", {})
    ]
    assert html and "<iframe" in html[0]["data"]["text/html"]
