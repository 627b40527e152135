"""single_torch_thread: small tensor work runs on one torch thread (shared by trainers, experiments and runner)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run the block on one torch intra-op thread (restored after).

    Small tensor ops gain nothing from threads and lose a lot when cores are shared: a [200, 4]
    torch.multinomial was measured 160x slower with 2 OpenMP threads on a busy 2-core machine.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
