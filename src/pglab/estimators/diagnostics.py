"""Measurements of a gradient estimator: its spread and how well independent batches agree."""

from __future__ import annotations

import torch

from pglab.estimators._validate import check_finite, tensor


def total_variance(per_sample: torch.Tensor) -> torch.Tensor:
    """Trace of the covariance of per-sample estimates; per_sample [N, P] -> scalar (N - 1 divisor)."""
    per_sample = tensor("per_sample", per_sample)
    check_finite("per_sample", per_sample)
    if per_sample.dim() != 2 or per_sample.shape[0] < 2:
        raise ValueError(f"per_sample must be [N, P] with N >= 2, got shape {tuple(per_sample.shape)}")
    return per_sample.var(0, correction=1).sum()


def squared_deviations(per_sample: torch.Tensor) -> torch.Tensor:
    """|g_i - mean g|^2 per sample; per_sample [N, P] -> [N].

    Their mean is the total variance (up to N / (N - 1)), so their spread gives its standard error,
    and the spread of the paired difference of two such vectors gives the standard error of a
    variance gap measured on the same draws.
    """
    return (per_sample - per_sample.mean(0)).pow(2).sum(-1)


def cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    """Cosine between two tensors with as many elements (both flattened): an estimate against the exact gradient."""
    if x.numel() != y.numel():
        raise ValueError(f"cosine needs two tensors with as many elements, got shapes {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    return float(torch.nn.functional.cosine_similarity(x.flatten(), y.flatten(), dim=0))


def batch_cosine(
    per_sample: torch.Tensor,
    sizes: list[int],
    pairs: int,
    generator: torch.Generator,
) -> dict[int, float]:
    """Mean cosine between the means of two disjoint random batches, for each batch size.

    per_sample [N, P]; for every size s (2 s <= N), ``pairs`` random disjoint pairs of batches of
    s samples -> {s: mean cosine}. Near 0: one batch's gradient is mostly noise; near 1: signal.
    """
    n = per_sample.shape[0]
    out = {}
    for size in sizes:
        if 2 * size > n:
            raise ValueError(f"batch size {size} needs {2 * size} samples for a disjoint pair, have {n}")
        cosines = []
        for _ in range(pairs):
            order = torch.randperm(n, generator=generator)
            first = per_sample[order[:size]].mean(0)
            second = per_sample[order[size:2 * size]].mean(0)
            cosines.append(torch.nn.functional.cosine_similarity(first, second, dim=0))
        out[size] = float(torch.stack(cosines).mean())
    return out
