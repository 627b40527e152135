"""Process groups for torchrun: this rank's place, row gathers, the DDP wrapper, joining and leaving cleanly.

Every function works unchanged in a single process (rank 0 of 1), so the trainers call them
unconditionally.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def world() -> tuple[int, int]:
    """(rank, world size) of the initialised process group, (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_rows(x: torch.Tensor) -> torch.Tensor:
    """Every rank's x [b, ...] concatenated along dim 0 in rank order -> [world * b, ...] (x itself in one process)."""
    import torch.distributed as dist

    size = world()[1]
    if size == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DistributedDataParallel wrapper (the model itself otherwise)."""
    return getattr(model, "module", model)


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` in DistributedDataParallel when several ranks run, else ``model`` itself."""
    if world()[1] == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


@contextmanager
def process_group(device: str) -> Iterator[torch.device]:
    """Join torchrun's process group when WORLD_SIZE > 1 (gloo on CPU, nccl on CUDA); yield this rank's device.

    On the way out, after a finished body, the DDP reducers are freed while the group still exists
    and every rank meets at a barrier before the group is destroyed (gloo aborts a rank whose peer
    has already left).
    """
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    here = torch.device(f"cuda:{local}" if device == "cuda" else "cpu")
    join = int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized()
    if join:
        if device == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if device == "cuda" else "gloo")
    try:
        yield here
        if join:
            gc.collect()
            dist.barrier()
    finally:
        if join:
            dist.destroy_process_group()


__all__ = ["gather_rows", "process_group", "unwrap", "world", "wrap"]
