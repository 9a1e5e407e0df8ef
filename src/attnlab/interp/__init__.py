"""Inside the heads: detectors, induction data, ablation and pruning, the logit lens, and the
token-pair decomposition of a sentence similarity.

- :mod:`~attnlab.interp.detectors`: previous-token, duplicate, induction, first-token and
  current-token scores of every head (TransformerLens's ``"mul"`` measure; the induction pattern in
  attnlab's convention or TransformerLens's).
- :mod:`~attnlab.interp.sequences`: ``[BOS, r, r]`` probes and training batches with repeated
  random segments.
- :mod:`~attnlab.interp.scan`: every head of any model :func:`attnlab.models.load` reads scored
  (``attnlab heads``), and the explorer's head badges.
- :mod:`~attnlab.interp.attention_views`: a sentence through any model's tokenizer to its attention
  weights, one view per stack (what the explorer draws and the scan scores).
- :mod:`~attnlab.interp.ablation`: zero/mean ablation of heads through W^O, Michel et al.'s importance.
- :mod:`~attnlab.interp.prune`: heads removed from the weights, the importance-ordered pruning curve;
  :mod:`~attnlab.interp.minilm_pruning`: its MiniLM metric (``attnlab prune``).
- :mod:`~attnlab.interp.lens`: the logit lens and the residual stream of a GPT.
- :mod:`~attnlab.interp.similarity`: MiniLM's cosine split exactly into token-pair terms.
- :mod:`~attnlab.interp.attribution`: direct logit attribution, the residual stream decomposed and
  accumulated (any decoder); :mod:`~attnlab.interp.patching`: activation patching;
  :mod:`~attnlab.interp.composition`: Q/K/V composition scores and path ablation.
"""

from attnlab.interp.ablation import ablate_heads, attention_layers, head_importance
from attnlab.interp.detectors import DETECTORS, detection_pattern, head_score, heads_above, score_heads
from attnlab.interp.lens import eventual_token_by_layer, logit_lens, residual_stream
from attnlab.interp.prune import prune_heads, pruning_curve, removal_order
from attnlab.interp.sequences import SegmentBatch, repeated_tokens, segment_batch
from attnlab.interp.similarity import explain_similarity, pair_terms

__all__ = [
    "DETECTORS",
    "SegmentBatch",
    "ablate_heads",
    "attention_layers",
    "detection_pattern",
    "eventual_token_by_layer",
    "explain_similarity",
    "head_importance",
    "head_score",
    "heads_above",
    "logit_lens",
    "pair_terms",
    "prune_heads",
    "pruning_curve",
    "removal_order",
    "repeated_tokens",
    "residual_stream",
    "score_heads",
    "segment_batch",
]
