"""Two DDP processes (gloo on CPU): the replicas end with identical weights, rank 0 checkpoints."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

from attnlab.models.registry import build_model
from attnlab.tasks import get_task
from attnlab.training.distributed import group_from_env, train_distributed


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
    with pytest.raises(ValueError, match=r"\bbatch size 16\b.*\bnproc=32$"):
        train_distributed(tiny_config(), tmp_path, nproc=32)
    with pytest.raises(ValueError, match=r"^nproc\b.*\bpositive\b.*, got 0$"):
        train_distributed(tiny_config(), tmp_path, nproc=0)
    assert not any(tmp_path.iterdir())


def _join_and_leave(rank: int, world: int, port: int, results) -> None:
    """One process of a torchrun-like launch: the environment names the group; inside, a sum over the
    ranks; after the block (left normally on rank 0, by an exception on rank 1) no group is held."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    try:
        with group_from_env() as (r, w):
            total = torch.tensor([float(r + 1)])
            dist.all_reduce(total)
            results.put((rank, r, w, float(total)))
            if rank == 1:
                raise RuntimeError("a rank that fails")
    except RuntimeError:
        pass
    results.put((rank, "held after", dist.is_initialized()))


def test_the_group_torchrun_describes_is_left_when_the_block_ends():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.spawn(_join_and_leave, args=(2, port, results), nprocs=2, join=True)
    seen = [results.get() for _ in range(4)]
    assert sorted(x for x in seen if x[1] != "held after") == [(0, 0, 2, 3.0), (1, 1, 2, 3.0)]
    left = sorted(x for x in seen if x[1] == "held after")
    assert left == [(0, "held after", False), (1, "held after", False)]


def test_outside_torchrun_there_is_one_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with group_from_env() as (rank, world):
        assert (rank, world) == (0, 1) and not dist.is_initialized()
