"""What every claim experiment returns: the course material's sentence next to the measured numbers.

The claim experiments (``attnlab experiment paths | residuals | gqa | relations | icl | scoring``)
each test one sentence that the Week 1 notes on attention or the Week 19 course page state in words
only. Each returns a :class:`ClaimResult`: the sentence (``claim``, quoted), where it is
(``source``, in words), a table, a one-paragraph ``verdict`` with the measured figures, and the
numbers behind them (``data``, what ``--json`` prints and the tests assert). :func:`write` saves
``results.json``, ``table.txt`` and the experiment's plot into a folder.

Timings are ratios measured in one process with the contestants interleaved
(:func:`time_interleaved`), with the load average recorded beside them: on a shared machine an
absolute time says more about the neighbours than about the code.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from attnlab._io import atomic_write_bytes, atomic_write_json, dumps_json
from attnlab.audit.render import table as text_table
from attnlab.viz.legends import place_legend, save_figure


@dataclasses.dataclass
class ClaimResult:
    """One claim, measured. ``header``/``rows``: the table (strings); ``data``: the numbers;
    ``notes``: lines printed under the table (data used, load average); ``files``: what was written."""

    name: str
    claim: str
    source: str
    header: list[str]
    rows: list[list[str]]
    verdict: str
    data: dict
    settings: dict
    seconds: float
    notes: list[str] = dataclasses.field(default_factory=list)
    files: dict[str, str] = dataclasses.field(default_factory=dict)

    def table(self) -> str:
        """The rows as an aligned text table (first column left-aligned)."""
        return "\n".join(text_table(tuple(self.header), self.rows))

    def text(self) -> str:
        """What the command prints: the quoted sentence and its source, the table, the notes, the verdict."""
        parts = [f'"{self.claim}"', f"  ({self.source})", "", self.table()]
        if self.notes:
            parts += ["", *self.notes]
        parts += ["", "Measured: " + self.verdict]
        return "\n".join(parts)

    def to_json(self) -> dict:
        """Everything but the files, JSON-ready."""
        out = dataclasses.asdict(self)
        out.pop("files")
        out["seconds"] = round(self.seconds, 1)
        return out


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A table as Markdown text (the first column left-aligned, the others right-aligned), as
    the experiments print it and write it to ``results.md``."""
    lines = ["| " + " | ".join(header) + " |", "| --- | " + " | ".join(["---:"] * (len(header) - 1)) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def write(result: ClaimResult, out_dir: str | Path, plot: Callable[[ClaimResult, Path], None]) -> None:
    """Write ``results.json``, ``table.txt`` and ``<name>.png`` (drawn by ``plot(result, path)``)
    into ``out_dir`` (created); the paths go into ``result.files``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "results.json", "table": out / "table.txt", "plot": out / f"{result.name}.png"}
    result.files = {k: str(v) for k, v in files.items()}
    atomic_write_json(files["json"], result.to_json())
    atomic_write_bytes(files["table"], (result.text() + "\n").encode())
    plot(result, files["plot"])


def dumps(result: ClaimResult) -> str:
    """``result.to_json()`` as strict JSON text (non-finite numbers as null)."""
    return dumps_json(result.to_json(), indent=2)


def load_average() -> float | None:
    """The 1-minute load average (None where the system has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def time_interleaved(contestants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each contestant, timed in turn (A B C A B C ...) after one warm-up
    call each, so that a change in the machine's load falls on all of them alike."""
    for fn in contestants.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(repeats):
        for name, fn in contestants.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def figure(ncols: int, width: float = 4.6, height: float = 3.6):
    """A matplotlib ``(figure, axes list)`` on the Agg backend (imported here: plotting is optional work)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def save(fig, path: Path, title: str) -> None:
    """Title, legends placed where they hide no point, written atomically, closed."""
    import matplotlib.pyplot as plt

    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    for ax in fig.axes:
        if ax.get_legend_handles_labels()[0]:
            place_legend(ax, fontsize=7)
    save_figure(fig, path)
    plt.close(fig)
