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


def as_mask(name: str, mask: torch.Tensor | None, like_name: str, like: torch.Tensor) -> torch.Tensor:
    """A 0/1 mask of ``like``'s shape and dtype (all ones when ``mask`` is None)."""
    if mask is None:
        return torch.ones_like(like)
    check_same_shape(name, mask, like_name, like)
    mask = mask.to(like.dtype)
    if not ((mask == 0) | (mask == 1)).all():
        raise ValueError(f"{name} must hold only 0 and 1 (1 = a token sampled by the policy)")
    return mask


def check_mode(mode: str, known: tuple[str, ...], what: str) -> None:
    if mode not in known:
        raise ValueError(f"unknown {what} {mode!r}; pass one of {', '.join(known)}")
