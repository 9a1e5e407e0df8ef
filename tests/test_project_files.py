"""The first hour's files: the README's "Start here" names the course material in words and says
where a learner and an engineer begin; course sources are never cited by seed file name anywhere;
the package metadata uses an SPDX license string (a ``license = {text = ...}`` table made every
install print setuptools deprecation warnings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
licenses = pytest.importorskip("packaging.licenses")  # packaging 24.2+, a pytest dependency

ROOT = Path(__file__).resolve().parents[1]


def _start_here() -> str:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    return text.split("## Start here", 1)[1].split("\n## ", 1)[0]


def test_start_here_names_the_course_material_and_where_to_begin():
    section = _start_here()
    for source in ("Week 1 notes on attention", "Week 1 notes in plain language", "Week 19 course page"):
        assert source in section, source
    assert "**A learner**" in section and "**An engineer**" in section
    for link in re.findall(r"\]\(([^)#]+)\)", section):
        assert (ROOT / link).exists(), link


def test_no_course_source_is_cited_by_its_file_name():
    cited = []
    paths = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src" / "attnlab").rglob("*.py")]
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bseed[ _-]?0\d\d\b|seeds/", line):
                cited.append(f"{path.relative_to(ROOT)}:{n}")
    assert not cited, f"name the course material in words, not by file: {cited}"


def test_the_license_is_an_spdx_expression():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    license_ = meta["project"]["license"]
    assert isinstance(license_, str), "license = {text = ...} makes setuptools warn on every install"
    assert licenses.canonicalize_license_expression(license_) == license_
    requires = " ".join(meta["build-system"]["requires"])
    assert (
        re.search(r"setuptools>=(\d+)", requires) and int(re.search(r"setuptools>=(\d+)", requires)[1]) >= 77
    )


def test_no_profiler_output_is_tracked():
    """Two ONNX Runtime profiles (onnxruntime_profile__DATE.json, from profiling bench_embed's
    sessions) were committed at the root; they are ignored now and none may be tracked."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [f for f in tracked if re.search(r"(^|/)onnxruntime_profile_.*\.json$", f)] == []
    assert "onnxruntime_profile_*.json" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
