"""Standard errors for the statistics experiments report: of a mean, and of anything else by the bootstrap."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def standard_error(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Standard error of the mean along ``dim``: sample std / sqrt(n); x [N, ...] -> [...]."""
    return x.std(dim) / math.sqrt(x.shape[dim])


def bootstrap_se(statistic: Callable[[Any], float], samples: Any, resamples: int, rng: np.random.Generator) -> float:
    """Standard error of ``statistic(samples)`` by resampling the first axis with replacement (numpy or torch)."""
    n = len(samples)
    if n < 2 or resamples < 2:
        raise ValueError(f"the bootstrap needs at least 2 samples and 2 resamples, got {n} and {resamples}")
    values = [statistic(samples[rng.integers(0, n, n)]) for _ in range(resamples)]
    return float(np.std(values, ddof=1))
