"""Two DDP processes (gloo on CPU): the replicas end with identical weights, rank 0 checkpoints."""

import pytest
import torch
from safetensors.torch import load_file

from attnlab.models.registry import build_model
from attnlab.tasks import get_task
from attnlab.training.distributed import train_distributed


@pytest.mark.slow
def test_two_process_replicas_are_identical(tmp_path, tiny_config):
    cfg = tiny_config(steps=20, ckpt_every=10, model_params={"hidden": 16, "emb": 8, "dropout": 0.1})
    replicas = tmp_path / "replicas"
    replicas.mkdir()
    train_distributed(cfg, tmp_path / "run", nproc=2, progress=False, replica_dir=replicas)
    r0 = load_file(str(replicas / "replica-0.safetensors"))
    r1 = load_file(str(replicas / "replica-1.safetensors"))
    assert r0.keys() == r1.keys()
    assert all(torch.equal(r0[k], r1[k]) for k in r0)
    # rank 0's checkpoint holds the same weights
    saved = load_file(str(tmp_path / "run" / "model.safetensors"))
    assert all(torch.equal(saved[k], r0[k]) for k in saved)
    # DDP trained: the weights moved away from the seed's initialisation
    torch.manual_seed(cfg.seed)
    fresh = build_model(cfg.model, get_task("reverse").tokenizer.vocab_size, cfg.model_params).state_dict()
    assert max(float((r0[k] - fresh[k]).abs().max()) for k in r0) > 1e-3


def test_nproc_checks_run_before_spawning(tmp_path, tiny_config):
    with pytest.raises(ValueError, match="batch size 16 is smaller than nproc=32"):
        train_distributed(tiny_config(), tmp_path, nproc=32)
    with pytest.raises(ValueError, match="nproc must be a positive integer"):
        train_distributed(tiny_config(), tmp_path, nproc=0)
    assert not any(tmp_path.iterdir())
