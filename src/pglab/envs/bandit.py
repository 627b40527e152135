"""The Gaussian multi-armed bandit under a softmax policy, with every exact answer in closed form.

Arm a pays N(means[a], sd^2). With pi = softmax(theta):
J = sum_a pi_a mu_a, grad J = pi * (mu - J), and the single-sample estimator (r - b)(e_a - pi)
has total variance E[((mu_a - b)^2 + sd^2) |e_a - pi|^2] - |grad J|^2. ``theta`` may carry
leading batch dims ([..., K]): every method then answers for each row (many runs at once).
"""

from __future__ import annotations

import math

import torch

from pglab.estimators import softmax_score
from pglab.estimators._validate import check_finite, tensor


class GaussianBandit:
    """K arms with Gaussian rewards; exact value, gradient, variance and optimal baseline."""

    def __init__(self, means, sd: float = 1.0):
        self.means = tensor("means", means).to(torch.float64)
        if self.means.dim() != 1 or len(self.means) < 2:
            raise ValueError(f"means must be a 1-D list of at least 2 arm means, got {means}")
        check_finite("means", self.means)
        if not isinstance(sd, (int, float)) or not math.isfinite(sd) or sd < 0:
            raise ValueError(f"sd must be a finite number >= 0, got {sd!r}")
        self.sd = float(sd)

    @property
    def n_arms(self) -> int:
        return len(self.means)

    def policy(self, theta: torch.Tensor) -> torch.Tensor:
        """pi = softmax(theta); theta [..., K] -> [..., K]."""
        theta = tensor("theta", theta).to(torch.float64)
        check_finite("theta", theta)
        if theta.dim() == 0 or theta.shape[-1] != self.n_arms:
            raise ValueError(f"theta must end in {self.n_arms} logits, got shape {tuple(theta.shape)}")
        return torch.softmax(theta, -1)

    def exact_value(self, theta: torch.Tensor) -> torch.Tensor:
        """J(theta) = sum pi_a mu_a; theta [..., K] -> [...]."""
        return (self.policy(theta) * self.means).sum(-1)

    def exact_gradient(self, theta: torch.Tensor) -> torch.Tensor:
        """grad J = pi * (mu - J); theta [..., K] -> [..., K]."""
        pi = self.policy(theta)
        return pi * (self.means - (pi * self.means).sum(-1, keepdim=True))

    def _score_sq_norms(self, pi: torch.Tensor) -> torch.Tensor:
        """|e_a - pi|^2 for every arm a: pi [..., K] -> [..., K]."""
        return 1.0 - 2.0 * pi + pi.pow(2).sum(-1, keepdim=True)

    def exact_total_variance(self, theta: torch.Tensor, baseline: float | torch.Tensor = 0.0) -> torch.Tensor:
        """Trace of the covariance of (r - b)(e_a - pi), reward noise included; theta [..., K] -> [...]."""
        pi = self.policy(theta)
        b = tensor("baseline", baseline).to(torch.float64)
        check_finite("baseline", b)
        if b.dim() > 0:
            b = b[..., None]
        second_moment = (pi * ((self.means - b).pow(2) + self.sd**2) * self._score_sq_norms(pi)).sum(-1)
        return second_moment - self.exact_gradient(theta).pow(2).sum(-1)

    def optimal_baseline(self, theta: torch.Tensor) -> torch.Tensor:
        """b* = E[r |score|^2] / E[|score|^2]; theta [..., K] -> [...]."""
        pi = self.policy(theta)
        weight = pi * self._score_sq_norms(pi)
        return (weight * self.means).sum(-1) / weight.sum(-1)

    def exact_expected_estimate(self, theta: torch.Tensor, baseline: float | torch.Tensor = 0.0) -> torch.Tensor:
        """E[(r - b(a))(e_a - pi)] for a constant or per-arm baseline b [K]; theta [..., K] -> [..., K].

        A constant b gives the exact gradient; an action-dependent b(a) in general does not.
        """
        pi = self.policy(theta)
        b = torch.as_tensor(baseline, dtype=torch.float64).expand(self.n_arms)
        scores = torch.eye(self.n_arms, dtype=torch.float64) - pi[..., None, :]   # row a: e_a - pi
        return ((pi * (self.means - b))[..., :, None] * scores).sum(-2)

    def sample_actions(self, theta: torch.Tensor, generator: torch.Generator, n: int = 1) -> torch.Tensor:
        """n arms drawn from pi for every row of theta; theta [..., K] -> actions [..., n] (int64)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an int >= 1 (samples per row), got {n!r}")
        pi = self.policy(theta)
        flat = pi.reshape(-1, self.n_arms)
        actions = torch.multinomial(flat, n, replacement=True, generator=generator)
        return actions.reshape(*pi.shape[:-1], n)

    def sample_rewards(self, actions: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """r = mu_a + sd * noise; actions [...] -> rewards [...] (float64)."""
        actions = tensor("actions", actions)
        if actions.is_floating_point() or actions.dtype == torch.bool or (
                (actions < 0) | (actions >= self.n_arms)).any():
            raise ValueError(f"actions must be integer arm indices in [0, {self.n_arms}), "
                             f"got {str(actions.tolist())[:80]}")
        noise = torch.randn(actions.shape, generator=generator, dtype=torch.float64)
        return self.means[actions] + self.sd * noise

    def sample_estimates(self, theta: torch.Tensor, baseline: float | torch.Tensor, n: int,
                         generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """n single-pull estimates (r - b)(e_a - pi) at theta [K] -> (actions [n], estimates [n, K]).

        ``baseline`` is a constant or a per-arm tensor [K] (an action-dependent, biased "baseline").
        """
        theta = torch.as_tensor(theta, dtype=torch.float64)
        actions = self.sample_actions(theta, generator, n)
        b = torch.as_tensor(baseline, dtype=torch.float64)
        weights = self.sample_rewards(actions, generator) - (b[actions] if b.dim() else b)
        return actions, softmax_score(theta, actions) * weights.unsqueeze(-1)
