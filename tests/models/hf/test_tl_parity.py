"""Parity with TransformerLens 4.3 itself on every decoder family (GPT-2, Llama, Mistral, Qwen2):
the accumulated residual stream (raw and through the final norm), direct logit attribution per head
and per component (TransformerLens's compatibility mode: norms folded, weights centred), activation
patching of the residual stream and of the heads' outputs, and the composition scores.

Skipped when ``transformer_lens`` is not installed (it is not a dependency of attnlab's default
test set: it pulls pandas, pyarrow, datasets and wandb, about 400 MB beside torch)."""

from __future__ import annotations

import pytest
import torch

from attnlab.interp.attribution import accumulated_resid, logit_attribution, run_with_cache
from attnlab.interp.composition import composition_scores
from attnlab.interp.patching import activation_patching, logit_metric
from attnlab.models.load import load

tl = pytest.importorskip("transformer_lens")

CLEAN = "A token looks at the token and the"
CORRUPT = "A the looks at the token and the"
TOL = 5e-5  # float32; the largest differences measured are below 1e-5


def _bridge(path, cls: str, **mode):
    """TransformerLens's bridge on a fresh transformers model (compatibility mode rewrites weights)."""
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    hf = getattr(transformers, cls).from_pretrained(path, attn_implementation="eager").eval()
    bridge = TransformerBridge.boot_transformers(str(path), hf_model=hf, tokenizer=None)
    bridge.enable_compatibility_mode(disable_warnings=True, **mode)
    return bridge


def _setup(causal_name, hf_dirs, hf_oracles):
    """The checkpoint's folder, its transformers class name, attnlab's load of it, and the prompts."""
    path = hf_dirs[causal_name]
    loaded = load(path)
    tok = loaded.tokenizer
    clean, corrupt = torch.tensor([tok.encode(CLEAN)]), torch.tensor([tok.encode(CORRUPT)])
    return path, type(hf_oracles[causal_name]).__name__, loaded, clean, corrupt


def test_accumulated_residual_stream(causal_name, hf_dirs, hf_oracles):
    path, cls, loaded, clean, _ = _setup(causal_name, hf_dirs, hf_oracles)
    bridge = _bridge(path, cls, no_processing=True)  # raw weights: the stream itself is comparable
    _, cache = bridge.run_with_cache(clean)
    want, labels = cache.accumulated_resid(incl_mid=True, return_labels=True)
    _, ours = run_with_cache(loaded.model, clean)
    acc = accumulated_resid(loaded.model, ours)
    assert acc.labels == labels
    torch.testing.assert_close(acc.stack, want, rtol=0, atol=TOL)
    normed = cache.accumulated_resid(incl_mid=True, apply_ln=True)  # the final norm recomputed per point
    with torch.no_grad():
        torch.testing.assert_close(loaded.model.norm(acc.stack), normed, rtol=0, atol=TOL)


def test_direct_logit_attribution(causal_name, hf_dirs, hf_oracles):
    path, cls, loaded, clean, _ = _setup(causal_name, hf_dirs, hf_oracles)
    bridge = _bridge(path, cls)  # TransformerLens's standard: folded norms, centred weights
    logits, cache = bridge.run_with_cache(clean)
    target, wrong = logits[0, -1].topk(2).indices.tolist()
    kw = dict(tokens=torch.tensor([target]), incorrect_tokens=torch.tensor([wrong]), pos_slice=-1)
    stack = cache.stack_head_results(layer=-1, pos_slice=-1)
    want_heads = cache.logit_attrs(stack, **kw)[:, 0]  # [L h]
    ours = logit_attribution(loaded.model, clean, target, wrong)
    torch.testing.assert_close(ours.heads()[:, :, 0].flatten(), want_heads, rtol=0, atol=TOL)
    parts, labels = cache.decompose_resid(return_labels=True, pos_slice=-1)
    want = dict(zip(labels, cache.logit_attrs(parts, **kw)[:, 0].tolist()))
    mine = logit_attribution(loaded.model, clean, target, wrong, heads=False)
    got = dict(zip(mine.labels, mine.values[:, 0].tolist()))
    assert got["embed"] == pytest.approx(want["embed"] + want.get("pos_embed", 0.0), abs=TOL)
    for l in range(len(loaded.model.blocks)):
        assert got[f"attn {l}"] == pytest.approx(want[f"{l}_attn_out"], abs=TOL)
        assert got[f"mlp {l}"] == pytest.approx(want[f"{l}_mlp_out"], abs=TOL)


def test_activation_patching(causal_name, hf_dirs, hf_oracles):
    from transformer_lens import patching

    path, cls, loaded, clean, corrupt = _setup(causal_name, hf_dirs, hf_oracles)
    bridge = _bridge(path, cls, no_processing=True)
    tok = loaded.tokenizer
    target, wrong = tok.encode(" the")[0], tok.encode(" token")[0]

    def metric(logits):
        return logits[0, -1, target] - logits[0, -1, wrong]

    _, clean_cache = bridge.run_with_cache(clean)
    want_resid = patching.get_act_patch_resid_pre(bridge, corrupt, clean_cache, metric)  # [L, T]
    want_heads = patching.get_act_patch_attn_head_out_all_pos(bridge, corrupt, clean_cache, metric)  # [L, h]
    ours = activation_patching(loaded.model, clean, corrupt, logit_metric(target, wrong))
    torch.testing.assert_close(ours.resid, want_resid, rtol=0, atol=TOL)
    torch.testing.assert_close(ours.heads, want_heads, rtol=0, atol=TOL)


def test_composition_scores(causal_name, hf_dirs, hf_oracles):
    path, cls, loaded, _, _ = _setup(causal_name, hf_dirs, hf_oracles)
    bridge = _bridge(path, cls)
    for kind in ("Q", "K", "V"):
        want = torch.as_tensor(bridge.all_composition_scores(kind).scores).double()
        torch.testing.assert_close(composition_scores(loaded.model, kind), want, rtol=0, atol=TOL)
