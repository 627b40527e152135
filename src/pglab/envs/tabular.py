"""Tabular MDPs with exact answers: values by a linear solve, gradients by autograd through it.

A :class:`TabularMDP` holds transitions ``P [S, A, S']``, rewards, a discount, a start
distribution and terminal states. Terminal states have all-zero rows in ``P``: the episode has
ended, so nothing flows out of them and ``I - gamma P_pi`` is invertible even at gamma = 1
whenever every state can reach a terminal one. Beside the exact side (``policy_evaluation``,
``exact_value``, ``exact_gradient`` for a softmax table ``theta [S, A]``) sits the lockstep
sampler :meth:`TabularMDP.sample`, which advances all n episodes with one batched draw per time
step (a handful of tensor operations, whatever n) and returns an :class:`Episodes` batch (the
steps of all episodes, flat, with episode ids).

Three MDPs are built here: ``frozen_lake`` (gymnasium's FrozenLake-v1 table), ``repair_mdp``
(seven states of a bug-fixing agent, documented in docs/tabular.md) and ``two_state_problem``
(the enumeration problem of d2l-14.6 §14.6.3.2).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from pglab.estimators import discounted_returns, softmax_score

MAX_UNLIMITED_STEPS = 100_000
"""Without a time limit, the sampler stops with a ValueError after this many steps (a policy that never ends)."""


def policy_evaluation(
    P: torch.Tensor,
    R: torch.Tensor,
    pi: torch.Tensor,
    gamma: float,
    *,
    horizon: int | None = None,
) -> torch.Tensor:
    """V^pi by the linear solve (I - gamma P_pi) V = r_pi; P [S, A, S'], R [S, A], pi [S, A] -> V [S].

    Differentiable in ``pi`` (and P, R). With ``horizon`` T, the value of episodes cut after T
    steps, by T steps of the Bellman recursion instead of the solve.
    """
    S, A = R.shape
    if P.shape != (S, A, S) or pi.shape != (S, A):
        raise ValueError(f"pass P [S, A, S], R [S, A] and pi [S, A]; got P {tuple(P.shape)}, R {tuple(R.shape)}, "
                         f"pi {tuple(pi.shape)}")
    if not 0.0 <= float(gamma) <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    pi = pi.to(P.dtype)
    P_pi = torch.einsum("sa,sat->st", pi, P)
    r_pi = (pi * R).sum(-1)
    if horizon is not None:
        V = torch.zeros_like(r_pi)
        for _ in range(horizon):
            V = r_pi + gamma * P_pi @ V
        return V
    system = torch.eye(S, dtype=P_pi.dtype) - gamma * P_pi
    V, info = torch.linalg.solve_ex(system, r_pi)
    if info.item() != 0 or not torch.isfinite(V).all():
        raise ValueError("I - gamma P_pi is singular: under this policy some state never reaches a terminal state; "
                         "zero the rows of terminal states in P, use gamma < 1, or pass a horizon")
    return V


def score_table(theta: torch.Tensor) -> torch.Tensor:
    """theta [S, A] -> [S, A, A]: entry [s, a] is d log pi(a | s) / d theta[s] = e_a - pi(.|s)."""
    S, A = theta.shape
    return softmax_score(theta[:, None, :].expand(S, A, A), torch.arange(A).expand(S, A))


def table_score(theta: torch.Tensor, weighted_counts: torch.Tensor) -> torch.Tensor:
    """sum over visits of w * d log pi(a|s) / d theta for a softmax table; counts [..., S, A] -> [..., S, A]."""
    return torch.einsum("...sa,sak->...sk", weighted_counts.to(theta.dtype), score_table(theta))


@dataclass
class Episodes:
    """n episodes as one flat list of N steps, in time order: every live episode's step 0, then step 1, ...

    ``episode, time, states, actions [N]`` (int64) and ``rewards [N]``: step k is time ``time[k]``
    of episode ``episode[k]``. ``truncated [n]`` marks episodes cut by a time limit instead of
    ended in a terminal state. Per-step weights for the estimators are flat [N] tensors in the
    same order; ``padded`` lays one out as [n, T] under ``mask`` for pglab.estimators' scans and losses.
    """

    episode: torch.Tensor
    time: torch.Tensor
    states: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    truncated: torch.Tensor
    n_states: int
    n_actions: int
    _rewards_to_go: dict[float, torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.truncated)

    @property
    def lengths(self) -> torch.Tensor:
        """Steps per episode, [n] (int64)."""
        return torch.bincount(self.episode, minlength=self.n)

    @property
    def mask(self) -> torch.Tensor:
        """1 at (i, t) while episode i runs; [n, T] with T the longest episode."""
        return self.padded(torch.ones_like(self.rewards))

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        """Flat per-step values [N] -> [n, T], 0 after each episode's end."""
        T = int(self.time.max()) + 1 if len(self.time) else 0
        out = x.new_zeros(self.n, T)
        out[self.episode, self.time] = x
        return out

    def reward_to_go(self, gamma: float) -> torch.Tensor:
        """G_t = r_t + gamma G_{t+1} within each episode, by pglab's backward scan; -> [N] (cached per gamma)."""
        if gamma not in self._rewards_to_go:
            rewards_to_go = discounted_returns(self.padded(self.rewards), gamma, mask=self.mask)
            self._rewards_to_go[gamma] = rewards_to_go[self.episode, self.time]
        return self._rewards_to_go[gamma]

    def episode_returns(self, gamma: float = 1.0) -> torch.Tensor:
        """Discounted return of every episode (G_0; 0 for an episode of no steps); -> [n]."""
        out = self.rewards.new_zeros(self.n)
        first = self.time == 0
        out[self.episode[first]] = self.reward_to_go(gamma)[first]
        return out

    def weighted_counts(self, weights: torch.Tensor) -> torch.Tensor:
        """sum over the steps of each episode of weights at (s_t, a_t); weights [N] -> [n, S, A]."""
        S, A = self.n_states, self.n_actions
        out = torch.zeros(self.n * S * A, dtype=weights.dtype)
        out.index_add_(0, (self.episode * S + self.states) * A + self.actions, weights)
        return out.view(self.n, S, A)

    def counts(self) -> torch.Tensor:
        """Visits of every (state, action) per episode; -> [n, S, A]."""
        return self.weighted_counts(torch.ones_like(self.rewards))

    def log_probs(self, theta: torch.Tensor) -> torch.Tensor:
        """log pi(a_t | s_t) at every step under softmax(theta [S, A]); -> [N] (differentiable in theta)."""
        return torch.log_softmax(theta, -1)[self.states, self.actions]


class _RowSampler:
    """Inverse-CDF draws from many categorical rows at once: probs [R, K].

    Each row keeps only its positive entries (padded to the widest row). The rows' CDFs are laid
    end to end in one increasing array, row j shifted by 2j, so draws from different rows are a
    single ``searchsorted`` that returns a position in that array; ``index`` maps a position to
    j*K + k. The last positive entry of a row (and its padding) is 2j + 1.5, so a target 2j + u
    lands in row j even when rounding makes it 2j + 1.
    """

    def __init__(self, probs: torch.Tensor):
        n_rows, k = probs.shape
        positive = probs > 0
        width = max(int(positive.sum(-1).max()), 1)
        columns = torch.argsort((~positive).to(torch.int8), dim=-1, stable=True)[:, :width]  # positive entries first
        cdf = probs.gather(1, columns).cumsum(-1)
        cdf = torch.where(cdf >= cdf[:, -1:], torch.full_like(cdf, 1.5), cdf)
        self.flat = (cdf + 2.0 * torch.arange(n_rows, dtype=cdf.dtype)[:, None]).reshape(-1)
        self.index = (columns + k * torch.arange(n_rows)[:, None]).reshape(-1)

    def positions(self, row_offsets: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Positions drawn from rows j given as offsets 2j (float) with uniforms u in [0, 1); [m] -> [m]."""
        return torch.searchsorted(self.flat, row_offsets + u, right=True)

    def draw(self, rows: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """j*K + k of the category k drawn from row j = rows[i] with uniform u[i]; [m] -> [m]."""
        return self.index[self.positions(2.0 * rows, u)]


class TabularMDP:
    """A finite MDP: P [S, A, S'], rewards [S, A] or [S, A, S'], gamma, start [S], terminal [S] (bool).

    Rows of terminal states in P must be zero and every other row must sum to 1. ``max_steps``
    is a time limit (None: episodes run until they reach a terminal state); the exact values
    then follow the same limit. ``R`` is the expected reward of each (s, a).
    """

    def __init__(self, P, rewards, gamma: float, start, terminal, *, max_steps: int | None = None,
                 state_names: tuple[str, ...] | None = None, action_names: tuple[str, ...] | None = None):
        P = torch.as_tensor(P, dtype=torch.float64)
        if P.dim() != 3 or P.shape[0] != P.shape[2]:
            raise ValueError(f"P must be [S, A, S], got shape {tuple(P.shape)}")
        S, A, _ = P.shape
        rewards = torch.as_tensor(rewards, dtype=torch.float64)
        if rewards.shape == (S, A):
            rewards = rewards[:, :, None].expand(S, A, S)
        if rewards.shape != (S, A, S):
            raise ValueError(f"rewards must be [S, A] or [S, A, S] = {(S, A, S)}, got {tuple(rewards.shape)}")
        terminal = torch.as_tensor(terminal, dtype=torch.bool)
        start = torch.as_tensor(start, dtype=torch.float64)
        if terminal.shape != (S,) or start.shape != (S,):
            raise ValueError(f"start and terminal must be [S] with S = {S}")
        row_sums = P.sum(-1)
        if (P < 0).any() or not torch.allclose(row_sums, (~terminal).to(P.dtype)[:, None].expand(S, A)):
            raise ValueError("every row P[s, a] must sum to 1, and rows of terminal states must be all zero "
                             "(the episode has ended)")
        if (start < 0).any() or abs(float(start.sum()) - 1.0) > 1e-9:
            raise ValueError("start must be a probability distribution over the S states")
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be a positive number of steps or None (no limit), got {max_steps}")
        self.P, self.transition_rewards, self.terminal, self.start = P, rewards, terminal, start
        self.R = (P * rewards).sum(-1)
        self.gamma, self.max_steps = float(gamma), max_steps
        self.state_names = state_names or tuple(str(s) for s in range(S))
        self.action_names = action_names or tuple(str(a) for a in range(A))

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    def policy(self, theta: torch.Tensor) -> torch.Tensor:
        """pi = softmax over each row of theta [S, A] -> [S, A]."""
        if theta.shape != (self.n_states, self.n_actions):
            raise ValueError(f"theta must be [S, A] = {(self.n_states, self.n_actions)}, got {tuple(theta.shape)}")
        return torch.softmax(theta, -1)

    def values(self, pi: torch.Tensor) -> torch.Tensor:
        """V^pi of every state under this MDP's discount and time limit; pi [S, A] -> [S]."""
        return policy_evaluation(self.P, self.R, pi, self.gamma, horizon=self.max_steps)

    def exact_value(self, theta: torch.Tensor) -> torch.Tensor:
        """J(theta) = sum_s start(s) V(s) under pi = softmax(theta [S, A]); -> scalar (differentiable)."""
        return self.start @ self.values(self.policy(theta))

    def exact_gradient(self, theta: torch.Tensor) -> torch.Tensor:
        """grad J(theta) by autograd through the linear solve; theta [S, A] -> [S, A]."""
        theta = theta.detach().to(torch.float64).requires_grad_(True)
        return torch.autograd.grad(self.exact_value(theta), theta)[0]

    def sample(self, pi: torch.Tensor, n: int, generator: torch.Generator) -> Episodes:
        """Run n episodes in lockstep under pi [S, A]: one batched draw per time step -> Episodes.

        Each step draws (action, next state) jointly from pi(a|s) P(s'|s, a) for every live
        episode with a single inverse-CDF lookup, then drops the episodes that ended.
        """
        if n < 1:
            raise ValueError(f"n must be a positive number of episodes, got {n}")
        pi = pi.detach().to(torch.float64)
        if pi.shape != (self.n_states, self.n_actions):
            raise ValueError(f"pi must be [S, A] = {(self.n_states, self.n_actions)}, got {tuple(pi.shape)}")
        S, A = self.n_states, self.n_actions
        joint = _RowSampler((pi[:, :, None] * self.P).reshape(S, A * S))
        code = joint.index  # per position of the joint sampler: the transition s*A*S + a*S + s'
        continues, next_offset = ~self.terminal[code % S], 2.0 * (code % S).to(torch.float64)
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        state = _RowSampler(self.start[None]).draw(torch.zeros(n, dtype=torch.long), u)  # row 0: index = state
        live = (~self.terminal[state]).nonzero().squeeze(1)
        offset = 2.0 * state[live].to(torch.float64)
        ids, positions = [], []
        limit = self.max_steps or MAX_UNLIMITED_STEPS
        while len(live) and len(positions) < limit:
            drawn = joint.positions(offset, torch.rand(len(live), generator=generator, dtype=torch.float64))
            ids.append(live)
            positions.append(drawn)
            keep = continues.index_select(0, drawn).nonzero().squeeze(1)
            live, offset = live.index_select(0, keep), next_offset.index_select(0, drawn.index_select(0, keep))
        if len(live) and self.max_steps is None:
            raise ValueError(f"{len(live)} episodes ran {MAX_UNLIMITED_STEPS} steps without reaching a terminal "
                             "state; give the MDP a time limit (max_steps) or a policy that ends episodes")
        steps = torch.cat(positions) if positions else torch.zeros(0, dtype=torch.long)
        truncated = torch.zeros(n, dtype=torch.bool)
        truncated[live] = True
        return Episodes(
            episode=torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long),
            time=torch.repeat_interleave(torch.arange(len(ids)), torch.tensor([len(i) for i in ids], dtype=torch.long),
                                         output_size=len(steps)),
            states=(code // (A * S)).index_select(0, steps), actions=(code // S % A).index_select(0, steps),
            rewards=self.transition_rewards.reshape(-1)[code].index_select(0, steps),
            truncated=truncated, n_states=S, n_actions=A)


def enumerate_trajectories(mdp: TabularMDP, pi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every trajectory up to the MDP's time limit: pi [S, A] -> (prob [K], return [K], counts [K, S, A]).

    Returns are discounted by the MDP's gamma; the probabilities sum to 1. Needs ``max_steps``.
    """
    if mdp.max_steps is None:
        raise ValueError("enumerate_trajectories needs an MDP with max_steps (a finite horizon)")
    S, A = mdp.n_states, mdp.n_actions
    zero = torch.zeros(S, A, dtype=torch.float64)
    # A partial trajectory: (state, probability, return so far, discount of the next reward, visit counts).
    frontier = [(s, float(p), 0.0, 1.0, zero) for s, p in enumerate(mdp.start.tolist()) if p > 0]
    finished = []
    for _ in range(mdp.max_steps):
        grown = []
        for state, prob, ret, disc, counts in frontier:
            if mdp.terminal[state]:
                finished.append((prob, ret, counts))
                continue
            for a, s2 in itertools.product(range(A), range(S)):
                step = float(pi[state, a]) * float(mdp.P[state, a, s2])
                if step > 0:
                    visit = counts.clone()
                    visit[state, a] += 1
                    reward = float(mdp.transition_rewards[state, a, s2])
                    grown.append((s2, prob * step, ret + disc * reward, disc * mdp.gamma, visit))
        frontier = grown
    finished += [(prob, ret, counts) for _, prob, ret, _, counts in frontier]  # ended or cut by the time limit
    probs, returns, counts = zip(*finished)
    return torch.tensor(probs, dtype=torch.float64), torch.tensor(returns, dtype=torch.float64), torch.stack(counts)


def frozen_lake(is_slippery: bool = False, gamma: float = 0.95, map_name: str = "4x4",
                max_steps: int | None = None) -> TabularMDP:
    """gymnasium's FrozenLake-v1 as a TabularMDP (16 states, actions left, down, right, up).

    Built from the env's own transition table. Holes and the goal are terminal. No time limit
    unless ``max_steps`` is given (gymnasium's registered env cuts at 100).
    """
    import gymnasium as gym

    env = gym.make("FrozenLake-v1", is_slippery=is_slippery, map_name=map_name).unwrapped
    S, A = env.observation_space.n, env.action_space.n
    P = torch.zeros(S, A, S, dtype=torch.float64)
    rewards = torch.zeros(S, A, S, dtype=torch.float64)
    terminal = torch.tensor([bytes(c) in (b"H", b"G") for c in env.desc.ravel()])
    for s, a in itertools.product(range(S), range(A)):
        if terminal[s]:
            continue
        for prob, s2, reward, _ in env.P[s][a]:
            P[s, a, s2] += prob
            rewards[s, a, s2] = reward
    names = tuple(f"{c.decode()}{s}" for s, c in enumerate(env.desc.ravel()))
    return TabularMDP(P, rewards, gamma, env.initial_state_distrib, terminal, max_steps=max_steps,
                      state_names=names, action_names=("left", "down", "right", "up"))


REPAIR_STATES = ("unread", "read", "located", "broken", "patched", "verified", "done")
REPAIR_ACTIONS = ("read", "test", "edit", "submit")
REPAIR_EDIT_FIXES = {"unread": 0.2, "read": 0.4, "located": 0.8, "broken": 0.4, "patched": 0.7, "verified": 0.7}
"""Probability that an edit leaves the code fixed, by the state it is made in (else the code is broken)."""


def repair_mdp() -> TabularMDP:
    """Seven states of an agent repairing a bug with four tools; start 'unread', terminal 'done', gamma = 1.

    read: 'unread' -> 'read' (elsewhere nothing changes). test: 'read' -> 'located' (the failing
    test points at the bug), 'broken' -> 'located' (the failure exposes the bad edit, which is
    rolled back), 'patched' -> 'verified'; elsewhere nothing changes. edit: to 'patched' with
    REPAIR_EDIT_FIXES[state], else to 'broken'. submit: to 'done', reward 1 from 'patched' or
    'verified' (the hidden tests pass), 0 elsewhere. docs/tabular.md has the table.
    """
    index = {name: i for i, name in enumerate(REPAIR_STATES)}
    read, test, edit, submit = range(len(REPAIR_ACTIONS))
    after_read = {"unread": "read"}
    after_test = {"read": "located", "broken": "located", "patched": "verified"}
    S, A = len(REPAIR_STATES), len(REPAIR_ACTIONS)
    P = torch.zeros(S, A, S, dtype=torch.float64)
    R = torch.zeros(S, A, dtype=torch.float64)
    for name, fixes in REPAIR_EDIT_FIXES.items():
        s = index[name]
        P[s, read, index[after_read.get(name, name)]] = 1.0
        P[s, test, index[after_test.get(name, name)]] = 1.0
        P[s, edit, index["patched"]] += fixes
        P[s, edit, index["broken"]] += 1.0 - fixes
        P[s, submit, index["done"]] = 1.0
        R[s, submit] = float(name in ("patched", "verified"))
    start = torch.zeros(S, dtype=torch.float64)
    start[index["unread"]] = 1.0
    terminal = torch.tensor([name == "done" for name in REPAIR_STATES])
    return TabularMDP(P, R, 1.0, start, terminal, state_names=REPAIR_STATES, action_names=REPAIR_ACTIONS)


def two_state_problem(rewards=((0.3, 1.0), (0.6, 0.1))) -> TabularMDP:
    """d2l-14.6 §14.6.3.2: states s0 -> s1 -> end whatever the action, two actions each, reward r[s, a].

    A third state 'end' is terminal; gamma = 1 and a time limit of 2 steps (every episode has
    exactly two), so its four trajectories can be enumerated.
    """
    r = torch.as_tensor(rewards, dtype=torch.float64)
    if r.shape != (2, 2):
        raise ValueError(f"rewards must be a 2 x 2 table r[s, a], got shape {tuple(r.shape)}")
    P = torch.zeros(3, 2, 3, dtype=torch.float64)
    P[0, :, 1] = 1.0
    P[1, :, 2] = 1.0
    R = torch.cat([r, torch.zeros(1, 2, dtype=torch.float64)])
    return TabularMDP(P, R, 1.0, [1.0, 0.0, 0.0], [False, False, True], max_steps=2,
                      state_names=("s0", "s1", "end"), action_names=("a0", "a1"))
