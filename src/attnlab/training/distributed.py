"""Data-parallel training on PyTorch's own engine: ``DistributedDataParallel`` over ``gloo`` (CPU).

``train_distributed(config, out_dir, nproc=2)`` spawns ``nproc`` processes with
``torch.multiprocessing``; they meet through a rendezvous file, each builds the same model from
the same seed, takes rows ``rank, rank + W, ...`` of every global batch, and DDP all-reduces
(averages) the gradients, so every replica applies the same update and the weights stay
identical. Only rank 0 evaluates, prints and writes checkpoints.

Under ``torchrun`` (``WORLD_SIZE``/``RANK`` in the environment) use :func:`group_from_env` and call
:func:`attnlab.training.trainer.train` with the rank and world size directly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import save_file

from attnlab.training.config import TrainConfig
from attnlab.training.rundir import remove_unused
from attnlab.training.trainer import check_distributed, preflight, train


def _worker(
    rank: int,
    world: int,
    config: TrainConfig,
    out_dir: str | None,
    resume: bool,
    progress: bool,
    init_file: str,
    replica_dir: str | None,
) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        try:
            result = train(
                config,
                out_dir,
                resume=resume,
                progress=progress and rank == 0,
                rank=rank,
                world=world,
                threads=1,
            )
        except ValueError as exc:  # bad input found by a worker (a text file): one line in the parent
            _error_file(init_file, rank).write_text(str(exc).splitlines()[0] if str(exc) else "ValueError")
            raise SystemExit(2) from None
        if replica_dir is not None:  # for checking that the replicas agree; each rank writes its own
            state = {k: v.contiguous() for k, v in result.model.state_dict().items()}
            seen, unique = set(), {}
            for k, v in state.items():
                if v.data_ptr() not in seen:
                    seen.add(v.data_ptr())
                    unique[k] = v
            save_file(unique, str(Path(replica_dir) / f"replica-{rank}.safetensors"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def train_distributed(
    config: TrainConfig,
    out_dir: str | Path | None,
    *,
    nproc: int,
    resume: bool = False,
    progress: bool = True,
    replica_dir: str | Path | None = None,
    log=None,
) -> None:
    """Train with ``nproc`` DDP processes on this machine (see module doc).

    Every check that can fail runs here first, in the parent, so bad input never starts workers.
    ``replica_dir``: if given, every rank saves its final weights there as
    ``replica-{rank}.safetensors`` (to verify the replicas are identical). ``log``: where a repair
    of the run folder is said (see :func:`attnlab.training.trainer.preflight`)."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be a positive integer, got {nproc!r}")
    if config.batch_size < nproc:
        raise ValueError(f"batch size {config.batch_size} is smaller than nproc={nproc}")
    check_distributed(config, out_dir, nproc)
    new_folder = out_dir is not None and not Path(out_dir).exists()
    preflight(config, out_dir, resume, log=log)
    with tempfile.TemporaryDirectory(prefix="attnlab-ddp-") as tmp:
        init_file = str(Path(tmp) / "rendezvous")
        args = (nproc, config, None if out_dir is None else str(out_dir), resume, progress, init_file)
        # when one worker stops on bad input, torch logs that it terminates the others: not news
        quiet = logging.getLogger("torch.multiprocessing.spawn")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            mp.spawn(_worker, nprocs=nproc, join=True, args=(*args, replica_dir and str(replica_dir)))
        except (mp.ProcessRaisedException, mp.ProcessExitedException):
            if new_folder:  # a start that failed leaves no folder behind
                remove_unused(Path(out_dir))
            said = [f for f in (_error_file(init_file, r) for r in range(nproc)) if f.is_file()]
            if said:
                raise ValueError(said[0].read_text()) from None
            raise
        finally:
            quiet.setLevel(level)


def _error_file(init_file: str, rank: int) -> Path:
    """Where rank ``rank`` leaves the one-line message of the ``ValueError`` that stopped it."""
    return Path(init_file).with_name(f"error-{rank}.txt")


@contextlib.contextmanager
def group_from_env() -> Iterator[tuple[int, int]]:
    """Inside, the process group torchrun describes in the environment is joined -> ``(rank,
    world_size)``; ``(0, 1)`` outside torchrun. A block that ends normally meets the other ranks at a
    barrier, then every rank leaves the group (one that raised leaves without waiting for the others).

    Why the barrier: gloo's worker thread releases a collective's tensors after the caller has been
    told it is done, and that needs the GIL; a rank that went straight on to exit (rank 1, with
    nothing to write) could reach interpreter shutdown first, and the worker then aborted the process
    ("terminate called without an active exception", 4 runs in 33 under load). While a rank waits at
    the barrier the GIL is free, so the worker finishes first, as ``train_distributed``'s do."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        yield 0, 1
        return
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        yield dist.get_rank(), world
        dist.barrier()
    finally:
        dist.destroy_process_group()
