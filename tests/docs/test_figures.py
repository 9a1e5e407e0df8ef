"""Figures the pages quote from runs that differ by CPU kind are stated as what each kind gave, and
what this machine prints is among them: lesson 01's float32 line (README names every value it
prints), and no timing ratio stated as a fixed claim in docs/claims.md (times are the machine's)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lesson_01s_float32_line_is_one_the_readme_names():
    from attnlab.lessons import LESSONS

    line = next(x for x in LESSONS["01"].run() if x.startswith("max |NumPy - torch SDPA|="))
    printed = line.split("=")[1]
    readme = ROOT.joinpath("README.md").read_text()
    section = readme[readme.index("with one exception where") : readme.index("Output calls them")]
    named = set(re.findall(r"0\.\d{8}", section))
    assert {"0.00000011", "0.00000012", "0.00000009"} <= named
    assert printed in named, f"lesson 01 printed {printed}, which README does not name"


def test_claims_states_no_timing_ratio():
    text = ROOT.joinpath("docs", "claims.md").read_text()
    assert not re.findall(r"\b\d+\.\dx\b", text)  # such as "517.1x": a time ratio is the machine's
