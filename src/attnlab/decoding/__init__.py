"""Generation, in one package: the one decode loop (:mod:`~attnlab.decoding.loop`: greedy, sampling,
top-k/top-p as choices of the next token, sliding past the context as its cache policy), beam
search (:mod:`~attnlab.decoding.beam`, the one other loop) and the one text-in/text-out front end
(:mod:`~attnlab.decoding.text`) that ``attnlab generate``, ``attnlab serve`` and the experiments call.
"""

from attnlab.decoding.beam import BeamResult, Hypothesis, beam_search
from attnlab.decoding.loop import (
    Decoding,
    as_prompt,
    as_source,
    check_choice,
    check_fits,
    check_seed,
    filter_logits,
    fit_problem,
    generate,
    greedy,
    room_hint,
    sample,
    stream,
)
from attnlab.decoding.text import GenerationRequest, generate_text

__all__ = [
    "BeamResult",
    "Decoding",
    "GenerationRequest",
    "Hypothesis",
    "as_prompt",
    "as_source",
    "beam_search",
    "check_choice",
    "check_fits",
    "check_seed",
    "filter_logits",
    "fit_problem",
    "generate",
    "generate_text",
    "greedy",
    "room_hint",
    "sample",
    "stream",
]
