"""Argument checks shared by the estimators: every failure is a ValueError that says what to pass."""

from __future__ import annotations

import torch


def check_finite(name: str, x: torch.Tensor) -> None:
    """Raise if ``x`` holds NaN or inf."""
    if x.is_floating_point() and not torch.isfinite(x).all():
        bad = (~torch.isfinite(x)).nonzero()[0].tolist()
        raise ValueError(
            f"{name} contains NaN or inf (first at index {bad}); clean or clip it before estimating a gradient"
        )


def check_same_shape(name: str, x: torch.Tensor | None, like_name: str, like: torch.Tensor) -> None:
    """Raise unless ``x`` is None or has exactly the shape of ``like``."""
    if x is not None and x.shape != like.shape:
        raise ValueError(
            f"{name} has shape {tuple(x.shape)} but {like_name} has shape {tuple(like.shape)}; "
            f"pass {name} with the same shape [..., T]"
        )


FLAG_MEANINGS = {
    "dones": "1 = the episode ends after this position (terminal)",
    "truncated": "1 = the episode was cut after this position (not terminal)",
}
"""What a 1 means in each 0/1 argument; any other name is an action mask."""


def as_mask(name: str, mask: torch.Tensor | None, like_name: str, like: torch.Tensor) -> torch.Tensor:
    """A 0/1 mask of ``like``'s shape and dtype (all ones when ``mask`` is None)."""
    if mask is None:
        return torch.ones_like(like)
    check_same_shape(name, mask, like_name, like)
    mask = mask.to(like.dtype)
    if not ((mask == 0) | (mask == 1)).all():
        meaning = FLAG_MEANINGS.get(name, "1 = a token sampled by the policy")
        raise ValueError(f"{name} must hold only 0 and 1 ({meaning})")
    return mask


def check_mode(mode: str, known: tuple[str, ...], what: str) -> None:
    if mode not in known:
        raise ValueError(f"unknown {what} {mode!r}; pass one of {', '.join(known)}")


def tensor(name: str, x: object) -> torch.Tensor:
    """``x`` as a tensor: tensors pass through; numbers and (nested) lists of them become tensors
    (float64 for floats, int64 for ints). Anything else is a ValueError naming the argument."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (str, bytes)) or x is None:
        raise ValueError(f"{name} must be a tensor or a list of numbers, got {type(x).__name__}")
    try:
        t = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name} must be a tensor or a rectangular list of numbers, got {str(x)[:80]}") from None
    return t.to(torch.float64) if t.is_floating_point() else t


def check_dim(name: str, x: torch.Tensor, dim: int) -> int:
    """``dim`` as a non-negative axis of ``x``; ValueError when ``x`` has no such axis."""
    if not isinstance(dim, int) or isinstance(dim, bool) or not -x.dim() <= dim < max(x.dim(), 1):
        raise ValueError(f"dim={dim!r} is not an axis of {name} with shape {tuple(x.shape)}; "
                         f"pass an int in [{-x.dim()}, {x.dim() - 1}]")
    return dim % x.dim()


def check_eps(eps: float) -> None:
    if not (isinstance(eps, (int, float)) and eps >= 0 and eps == eps):
        raise ValueError(f"eps must be a number >= 0 (it guards a division by a zero std), got {eps!r}")
