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


def pair_cosines(per_sample: torch.Tensor, size: int, pairs: int, generator: torch.Generator) -> torch.Tensor:
    """Cosine between the means of two disjoint random batches of ``size`` samples, for ``pairs`` draws.

    per_sample [N, P] -> [pairs]. Near 0: one batch's gradient is mostly noise; near 1: signal.
    Every mean is a weighted sum of rows, so one Gram matrix G = X X^T [N, N] gives all the dot
    products (a^T G b) without forming a single [P] mean: P can be a whole network's parameters.
    """
    per_sample = tensor("per_sample", per_sample)
    check_finite("per_sample", per_sample)
    if per_sample.dim() != 2:
        raise ValueError(f"per_sample must be [N, P], got shape {tuple(per_sample.shape)}")
    n = per_sample.shape[0]
    if size < 1 or 2 * size > n:
        raise ValueError(f"batch size {size} needs {2 * size} samples for a disjoint pair, have {n}")
    if pairs < 1:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    rows = per_sample.double()
    gram = rows @ rows.T                                                          # [N, N]
    orders = torch.stack([torch.randperm(n, generator=generator) for _ in range(pairs)])  # [pairs, N]
    first = torch.zeros(pairs, n, dtype=torch.float64).scatter_(1, orders[:, :size], 1.0 / size)
    second = torch.zeros(pairs, n, dtype=torch.float64).scatter_(1, orders[:, size:2 * size], 1.0 / size)
    first_gram, second_gram = first @ gram, second @ gram                          # [pairs, N] each
    dot = (first_gram * second).sum(1)
    norms = ((first_gram * first).sum(1) * (second_gram * second).sum(1)).clamp_min(0).sqrt()
    return dot / norms.clamp_min(1e-12)


def batch_cosine(
    per_sample: torch.Tensor,
    sizes: list[int],
    pairs: int,
    generator: torch.Generator,
) -> dict[int, float]:
    """Mean of ``pair_cosines`` for each batch size: per_sample [N, P] -> {size: mean cosine}."""
    return {size: float(pair_cosines(per_sample, size, pairs, generator).mean()) for size in sizes}
