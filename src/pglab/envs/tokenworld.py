"""The token world: replies of ``length`` tokens, each A or B, rewarded once at the end.

The state before token t is (t, k), k the number of A's so far; the reply succeeds when it holds
at least ``need`` A's. Its final reward is 1 for success and 0 otherwise, plus ``shift`` on every
reply. A policy gives P(A) per state, as a scalar (the same everywhere) or a table
``p_a[..., t, k]`` of shape [..., T, T + 1] (entries with k > t are never visited). Transitions
are deterministic, so every value is a short backward sum:

    V(T, k) = 1[k >= need] + shift                    (the finished reply's reward)
    V(t, k) = p(t, k) V(t + 1, k + 1) + (1 - p(t, k)) V(t + 1, k)
    Q(t, k, A) = V(t + 1, k + 1),   Q(t, k, B) = V(t + 1, k),   A(s, a) = Q(s, a) - V(s)

With a constant p this is V(t, k) = Pr[k + Binomial(T - t, p) >= need] (+ shift). The tabular
policy has one logit per state, P(A | t, k) = sigmoid(logits[t, k]).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

A, B = 1, 0
"""Token ids: 1 is A, 0 is B (``tokens`` tensors hold these)."""


def at_states(table: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """table[..., t, states[..., t]] per step t; table [..., R, K], states [..., n, L], L <= R -> [..., n, L].

    The batch dims of ``table`` broadcast against those of ``states`` (a shared table has none).
    Differentiable in ``table``: used for the policy's logits and for a critic's values.
    """
    steps = states.shape[-1]
    if steps > table.shape[-2]:
        raise ValueError(f"states cover {steps} steps but the table has only {table.shape[-2]} rows; "
                         "pass a table with a row per step")
    rows = table[..., :steps, :].unsqueeze(-3)                     # [..., 1, L, K]
    rows = rows.expand(*states.shape[:-1], steps, table.shape[-1])  # [..., n, L, K]
    return rows.gather(-1, states.unsqueeze(-1)).squeeze(-1)


@dataclass(frozen=True)
class TokenWorld:
    """Replies of ``length`` A/B tokens; reward 1[#A >= need] + shift after the last token."""

    length: int = 6
    need: int = 4
    shift: float = 0.0

    def __post_init__(self):
        if self.length < 1 or not 0 <= self.need <= self.length:
            raise ValueError(f"pass length >= 1 and 0 <= need <= length; got {self.length}, {self.need}")

    def policy_table(self, p_a: float | torch.Tensor) -> torch.Tensor:
        """P(A) as a scalar or a table [..., T, T + 1] -> float64 table [..., T, T + 1]."""
        shape = (self.length, self.length + 1)
        p = torch.as_tensor(p_a, dtype=torch.float64)
        if p.dim() == 0:
            p = p.expand(shape)
        elif tuple(p.shape[-2:]) != shape:
            raise ValueError(f"p_a has shape {tuple(p.shape)}; pass a scalar or a table [..., {shape[0]}, "
                             f"{shape[1]}]")
        if not ((p >= 0) & (p <= 1)).all():
            raise ValueError("p_a must hold probabilities in [0, 1]")
        return p

    def final_rewards(self, count_a: torch.Tensor) -> torch.Tensor:
        """Reward of a finished reply with ``count_a`` A's; [...] ints -> float64 [...]."""
        return (count_a >= self.need).to(torch.float64) + self.shift

    def exact_values(self, p_a: float | torch.Tensor) -> torch.Tensor:
        """p_a scalar or [..., T, T + 1] -> V [..., T + 1, T + 1], V[..., t, k] (row T: the final reward).

        Differentiable in ``p_a``; entries with k > t are unreachable (filled by the same recursion).
        """
        p = self.policy_table(p_a)
        row = self.final_rewards(torch.arange(self.length + 1)).expand(*p.shape[:-2], -1)
        rows = [row]
        for t in range(self.length - 1, -1, -1):
            up = torch.cat([row[..., 1:], row[..., -1:]], -1)       # V(t + 1, k + 1), clamped at k = T
            row = p[..., t, :] * up + (1 - p[..., t, :]) * row
            rows.append(row)
        return torch.stack(rows[::-1], -2)

    def exact_q(self, p_a: float | torch.Tensor) -> torch.Tensor:
        """p_a -> Q [..., T, T + 1, 2]; Q[..., t, k, a] with a = 0 (B) or 1 (A)."""
        v = self.exact_values(p_a)[..., 1:, :]
        up = torch.cat([v[..., 1:], v[..., -1:]], -1)
        return torch.stack([v, up], -1)

    def exact_advantages(self, p_a: float | torch.Tensor) -> torch.Tensor:
        """p_a -> A(s, a) = Q - V, [..., T, T + 1, 2]; sum_a pi(a | s) A(s, a) = 0 in every state."""
        return self.exact_q(p_a) - self.exact_values(p_a)[..., :-1, :, None]

    def sample(self, p_a: float | torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
        """n replies per policy; p_a scalar or [..., T, T + 1] -> tokens [..., n, T] (int64, 1 = A)."""
        if n < 1:
            raise ValueError(f"n must be a positive number of replies, got {n}")
        p = self.policy_table(p_a)
        batch = p.shape[:-2]
        uniform = torch.rand(*batch, n, self.length, generator=generator, dtype=torch.float64)
        count = torch.zeros(*batch, n, 1, dtype=torch.int64)
        tokens = []
        for t in range(self.length):
            p_t = at_states(p[..., t:t + 1, :], count).squeeze(-1)  # [..., n]
            token = (uniform[..., t] < p_t).long()
            tokens.append(token)
            count = count + token.unsqueeze(-1)
        return torch.stack(tokens, -1)

    def states(self, tokens: torch.Tensor) -> torch.Tensor:
        """k before each token and after the last; tokens [..., T] -> k [..., T + 1]."""
        if tokens.shape[-1] != self.length:
            raise ValueError(f"tokens have {tokens.shape[-1]} positions; pass {self.length}-token replies")
        zero = torch.zeros_like(tokens[..., :1])
        return torch.cat([zero, tokens.cumsum(-1)], -1)

    def rewards(self, tokens: torch.Tensor) -> torch.Tensor:
        """Per-token rewards, all 0 but the last; tokens [..., T] -> float64 [..., T]."""
        out = torch.zeros(tokens.shape, dtype=torch.float64)
        out[..., -1] = self.final_rewards(self.states(tokens)[..., -1])
        return out

    def log_probs(self, logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Tabular policy log pi(a_t | s_t); logits [..., T, T + 1], tokens [..., n, T] -> [..., n, T].

        ``logits`` are the log-odds of A per state (P(A) = sigmoid(logits)); differentiable in them.
        """
        logit = at_states(logits, self.states(tokens)[..., :-1])
        return torch.where(tokens == A, torch.nn.functional.logsigmoid(logit),
                           torch.nn.functional.logsigmoid(-logit))

    def all_replies(self) -> torch.Tensor:
        """Every possible reply, for exact expectations by enumeration -> tokens [2^T, T]."""
        return torch.tensor(list(itertools.product((B, A), repeat=self.length)), dtype=torch.int64)

    def reply_probs(self, p_a: float | torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Probability of each reply; p_a scalar or [..., T, T + 1], tokens [..., n, T] -> [..., n]."""
        p = at_states(self.policy_table(p_a), self.states(tokens)[..., :-1])
        return torch.where(tokens == A, p, 1 - p).prod(-1)
