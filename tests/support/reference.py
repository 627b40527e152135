"""Plain-Python references for the return estimators: one episode at a time, by the definitions.

``episodes`` splits a row into episodes; ``reference_returns`` and ``reference_gae`` apply the
definitions to each; ``sb3_gae`` is Stable-Baselines3's convention for a time-limit cut (the reward
at the cut step gains gamma * V(terminal observation) and the step is then treated as terminal),
written as its rollout buffer's backward loop. ``batches`` draws the inputs for property tests.
"""

import torch
from hypothesis import strategies as st


def episodes(r, m, d, tr=None, nv=None):
    """One row -> [(policy positions, {position: credited reward}, value after the episode)].

    An episode ends after t where d[t] (terminal: value after it 0) or tr[t] (cut: value nv[t]);
    a row's last episode without either is terminal. A reward is credited to the nearest policy
    position at or before it in its episode.
    """
    tr = tr or [0] * len(r)
    nv = nv or [0.0] * len(r)
    spans, current = [], []
    for t in range(len(r)):
        current.append(t)
        if d[t] or tr[t]:
            spans.append((current, nv[t] if tr[t] else 0.0))
            current = []
    spans.append((current, 0.0))
    out = []
    for span, after in spans:
        policy = [t for t in span if m[t]]
        credited = {t: 0.0 for t in policy}
        for t in span:
            before = [p for p in policy if p <= t]
            if before:
                credited[before[-1]] += r[t]
        out.append((policy, credited, after))
    return out


def _rows(*tensors):
    return zip(*(x.tolist() if x is not None else [None] * len(tensors[0]) for x in tensors))


def reference_returns(rewards, mask, dones, gamma, truncated=None, next_values=None):
    """G_t = sum_j gamma^j r_{t+j} over t's episode, plus gamma^(steps left) * the value after a cut."""
    out = torch.zeros_like(rewards)
    for b, (r, m, d, tr, nv) in enumerate(_rows(rewards, mask, dones, truncated, next_values)):
        for policy, credited, after in episodes(r, m, d, tr, nv):
            n = len(policy)
            for i, t in enumerate(policy):
                out[b, t] = sum(gamma ** (j - i) * credited[policy[j]] for j in range(i, n)) + gamma ** (n - i) * after
    return out


def reference_gae(rewards, values, mask, dones, gamma, lam, truncated=None, next_values=None):
    """A_t = sum_l (gamma lam)^l delta_{t+l} over the policy positions of t's episode."""
    out = torch.zeros_like(rewards)
    for b, (r, m, d, tr, nv) in enumerate(_rows(rewards, mask, dones, truncated, next_values)):
        v = values[b].tolist()
        for policy, credited, after in episodes(r, m, d, tr, nv):
            deltas = [credited[t] + gamma * (v[policy[i + 1]] if i + 1 < len(policy) else after) - v[t]
                      for i, t in enumerate(policy)]
            for i, t in enumerate(policy):
                out[b, t] = sum((gamma * lam) ** (j - i) * deltas[j] for j in range(i, len(policy)))
    return out


def sb3_gae(rewards, values, dones, truncated, next_values, last_values, gamma, lam):
    """Stable-Baselines3's rollout-buffer GAE, rows [B, T] of one environment each.

    At a cut step the reward becomes r + gamma * V(terminal observation) and the step counts as done;
    after the last step the buffer bootstraps from ``last_values`` [B] unless that step was done.
    """
    out = torch.zeros_like(rewards)
    for b, (r, v, d, tr, nv) in enumerate(_rows(rewards, values, dones, truncated, next_values)):
        r = [r[t] + gamma * nv[t] if tr[t] else r[t] for t in range(len(r))]
        done = [bool(d[t] or tr[t]) for t in range(len(r))]
        last = 0.0
        for t in reversed(range(len(r))):
            following = float(last_values[b]) if t == len(r) - 1 else v[t + 1]
            non_terminal = 0.0 if done[t] else 1.0
            delta = r[t] + gamma * following * non_terminal - v[t]
            last = delta + gamma * lam * non_terminal * last
            out[b, t] = last
    return out


@st.composite
def batches(draw, all_policy=False):
    """(rewards, mask, dones, truncated, next_values, gamma), tensors [B, T] float64; no position is
    both done and truncated. ``all_policy`` makes every position a policy position."""
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 9))

    def grid(elements):
        return torch.tensor(draw(st.lists(st.lists(elements, min_size=t, max_size=t), min_size=b, max_size=b)),
                            dtype=torch.float64)

    floats = st.floats(-3, 3, allow_nan=False, width=32)
    rewards, next_values = grid(floats), grid(floats)
    mask = torch.ones(b, t, dtype=torch.float64) if all_policy else grid(st.integers(0, 1))
    ends = grid(st.integers(0, 2))   # 0: the episode goes on, 1: terminal, 2: cut
    return rewards, mask, (ends == 1).double(), (ends == 2).double(), next_values, draw(
        st.sampled_from([0.0, 0.5, 0.9, 1.0]))
