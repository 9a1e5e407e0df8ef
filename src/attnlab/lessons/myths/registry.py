"""The myths registry: each myth is its demonstration function, registered with :func:`myth`.

Adding a myth is one decorated function in the topic file it belongs to (or a new topic file
imported in ``attnlab/lessons/myths/__init__.py``)::

    @myth(
        30,
        claim="What people wrongly believe.",
        source=f"{NOTES}, section 2, Dangerous Misconception",
        why_false="One paragraph: why it is false.",
    )
    def _my_demo():
        ...
        return lines, evidence  # the lines `attnlab myths 30` prints, the numbers the tests assert

Numbers run 1..N without gaps (checked when the package is imported); sources are named in words
with the constants below, never by file name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The course material attnlab follows, named in words (see the README's "Start here").
NOTES = "Week 1 notes on attention"
PLAIN = "Week 1 notes in plain language"
COURSE = "Week 19 course page (seq2seq and attention)"

Demo = Callable[[], "tuple[list[str], dict]"]


@dataclass(frozen=True)
class Myth:
    """One misconception: ``claim`` is what people wrongly believe, ``source`` where the course
    material raises it (in words), ``why_false`` the reason, ``demo`` computes the evidence, ``topic``
    the module it lives in."""

    number: int
    claim: str
    source: str
    why_false: str
    demo: Demo
    topic: str = ""

    def demonstrate(self) -> tuple[list[str], dict]:
        """Run the computation: ``(printed lines, evidence dict of the numbers shown)``."""
        return self.demo()


_REGISTRY: dict[int, Myth] = {}


def myth(number: int, *, claim: str, source: str, why_false: str) -> Callable[[Demo], Demo]:
    """Register the decorated demonstration ``() -> (lines, evidence)`` as myth ``number``."""

    def register(demo: Demo) -> Demo:
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"myth number must be a positive integer, got {number!r}")
        if number in _REGISTRY:
            other = _REGISTRY[number].demo
            raise ValueError(f"myth {number} is registered twice ({other.__module__}.{other.__name__})")
        for name, text in (("claim", claim), ("source", source), ("why_false", why_false)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"myth {number} needs a non-empty {name}")
        topic = demo.__module__.rsplit(".", 1)[-1]
        _REGISTRY[number] = Myth(number, claim, source, why_false, demo, topic)
        return demo

    return register


def ordered() -> list[Myth]:
    """Every registered myth, by number; ``ValueError`` if the numbers are not exactly 1..N."""
    numbers = sorted(_REGISTRY)
    missing = sorted(set(range(1, len(numbers) + 1)) - set(numbers))
    if missing:
        raise ValueError(f"myth numbers must run 1..N without gaps; missing {missing}")
    return [_REGISTRY[n] for n in numbers]
