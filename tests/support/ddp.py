"""Helpers of the scale-out tests: run a function on 2 gloo ranks over loopback, find torchrun."""

import gc
import os
import shutil
import sys

import torch

from support.net import free_port


def _on_rank(rank: int, world: int, port: int, out: str, fn, args: tuple) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = fn(rank, world, *args)
        if rank == 0:
            torch.save(results, out)
        gc.collect()                             # DDP reducers die while their process group is alive
        dist.barrier()                           # no rank tears gloo down while the other still talks to it
    finally:
        dist.destroy_process_group()


def on_two_ranks(fn, args: tuple, out) -> object:
    """``fn(rank, world, *args)`` on 2 gloo processes; rank 0's return value (saved with torch.save)."""
    torch.multiprocessing.spawn(_on_rank, args=(2, free_port(), str(out), fn, args), nprocs=2, join=True)
    return torch.load(out, weights_only=False)


def torchrun() -> str | None:
    """The torchrun beside this Python, or on PATH; None when there is none."""
    beside = os.path.join(os.path.dirname(sys.executable), "torchrun")
    return shutil.which("torchrun") or (beside if os.path.exists(beside) else None)


def torchrun_command(*args: str) -> list[str]:
    """torchrun with 2 processes on loopback running ``python -m pglab ARGS``."""
    return [torchrun(), "--nnodes", "1", "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
            str(free_port()), "-m", "pglab", *args]
