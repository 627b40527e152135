"""audit_loss: the expectation of any policy-gradient loss's gradient on an enumerable policy, against grad(-J).

The loss sees a batch of ``group_size`` replies to each of the P prompts, sampled by the policy itself or by
another ``behaviour`` policy of the same shape (off-policy: a sampler with other kernels, a stale copy, top-p).
It reaches the policy's parameters only through the log-probabilities of the sampled tokens, so its gradient is
g = sum_{b,t} w[b, t] grad log pi(token t of row b), with w = d loss / d logp. The audit therefore
needs, per batch, only w (one call of ``loss_fn`` and one backward pass to ``logp``), scattered
onto the M = P N L (prompt, reply, position) token slots; with the Jacobian A [M, D] of every
token log-probability, E[g] = E[w] A and the total variance is tr(A A^T Cov(w)).

Exact mode averages over every batch with its probability under the behaviour; the gradient,
the Jacobian and grad J are at the policy. Two properties, checked on random
batches, shrink the count: a loss whose row gradients do not depend on the order of the rows
within a group is enumerated over multisets (with multinomial weights), and a loss whose rows of
one group do not depend on the other groups (no batch-wide normaliser) is enumerated group by
group. Past ``max_batches`` evaluations the audit draws ``samples`` batches instead (Monte Carlo)
and reports standard errors.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from pglab.envs.enumerable import OBJECTIVES, EnumerablePolicy
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import Counter
from pglab.runtime.threads import single_torch_thread

SIGNATURE = ("loss_fn(logp, ref_logp, rewards, mask, group) -> scalar tensor differentiable in logp "
             "(logp, ref_logp, mask [B, T]; rewards [B]; group [B] long)")
"""The loss signature the audit calls; every malformed-loss error names it."""

PREFERENCE = ("reverse_kl", "forward_kl", "tokenwise_reverse_kl", "tokenwise_forward_kl", "reward_only",
              "length_normalised")
"""Order in which candidate objectives are tried for ``follows`` (the stated objective first)."""

EXACT_TOLERANCE = 1e-8
"""In exact mode an objective is followed when E[g] is within this sine of its (positively scaled) gradient
(or within ``roundoff_tolerance`` of the loss's precision, when that is larger)."""

ROUNDOFF_CONDITION = 256
"""Relative error, in machine epsilons of the loss's precision, that the audit allows for roundoff in E[g].

One batch's token weights w = d loss / d logp carry a relative error of a few units of roundoff per operation of
the loss (a few dozen in the losses shipped: log-ratios, exp, clamps, one or two reductions), and E[w] sums
positive and negative weights (advantages centred on a baseline), which amplifies the relative error by
sum |p w| / |sum p w|, a factor of a few to a few dozen on the audit's policies; 256 eps bounds their product.
Measured: float32 versions of seven exact losses (KL placements, leave-one-out, pglab, trl-rloo) on four table
policies leave sines under 0.5 eps (6e-8), above EXACT_TOLERANCE, so a float64 tolerance called them biased;
256 eps is 3e-5 in float32 and 6e-14 in float64, under EXACT_TOLERANCE: float64 losses are judged as before."""

ROLLOUT_ARGUMENTS = ("rollout_logp", "old_logp")
"""Keyword arguments a loss may declare: the behaviour's and the proximal policy's log-probs of the sampled tokens
([B, T], detached, 0 off the mask). The audit passes each one the loss names as a parameter."""


@dataclass
class AuditReport:
    """What audit_loss found. Norms are over all D parameters; J is the reverse-KL objective.

    relative_bias = |E[g] - grad(-J)| / |grad J|; cosine between E[g] and grad(-J); scale c minimises
    |E[g] - c grad(-J)|, scaled_bias = |E[g] - c grad(-J)| / |c grad J|; total_variance =
    E|g - E[g]|^2 per batch; follows = the first objective of PREFERENCE (or "reweighted": a positive
    per-prompt reweighting of J) whose gradient E[g] matches up to a positive scale, or None.
    """

    relative_bias: float
    cosine: float
    scale: float
    scaled_bias: float
    total_variance: float
    exact: bool
    follows: str | None
    batches: int
    """Batches averaged over: enumerated configurations (exact) or draws (Monte Carlo)."""
    structure: str
    """How the batches were enumerated: 'multisets per group', 'ordered batches', ... or 'monte carlo'."""
    candidates: list[dict] = field(default_factory=list)
    """Per objective: its best positive scale and the sine of the angle left after it."""
    prompt_weights: list[float] | None = None
    """Best per-prompt scales of J's prompt terms (normalised to mean 1), when P > 1."""
    standard_errors: dict[str, float] = field(default_factory=dict)
    """Monte Carlo only: se of scale and of relative_bias (the noise |se| / |grad J|)."""
    tolerance: float = EXACT_TOLERANCE
    """The sine under which E[g] counts as following an objective. Exact mode: EXACT_TOLERANCE, or
    roundoff_tolerance of the loss's precision when that is larger (a float32 loss), also the tolerance of
    |scale - 1| in the verdict; Monte Carlo: 3 noise norms sqrt(total variance / draws) over |E[g]|."""
    off_policy: bool = False
    """True when another behaviour policy sampled the batches (E[g] is then taken under the behaviour)."""
    gradient: torch.Tensor | None = field(default=None, repr=False)
    """E[g] [D]."""
    target: torch.Tensor | None = field(default=None, repr=False)
    """grad(-J) [D]."""

    def as_dict(self) -> dict:
        """The JSON-ready fields (tensors left out)."""
        keys = ("relative_bias", "cosine", "scale", "scaled_bias", "total_variance", "exact", "follows", "batches",
                "structure", "candidates", "prompt_weights", "standard_errors", "tolerance", "off_policy")
        return {k: getattr(self, k) for k in keys}


def _flat_grad(value: torch.Tensor, params: list[torch.Tensor], retain: bool = False) -> torch.Tensor:
    grads = torch.autograd.grad(value, params, allow_unused=True, retain_graph=retain)
    return torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for p, g in zip(params, grads)])


def _jacobian(flat: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    """d flat[m] / d params for every m: [M, D], one backward pass per token slot.

    A single batched pass (``is_grads_batched``) is no faster at these sizes and its first call imports
    torch.fx and sympy, which cost a command-line audit more than a second.
    """
    return torch.stack([_flat_grad(flat[m], params, retain=True) for m in range(len(flat))])


class LossError(SettingsError):
    """A loss_fn that cannot be audited: the message says what it returned and names SIGNATURE."""


def declared_arguments(loss_fn: Callable) -> tuple[str, ...]:
    """The names of ROLLOUT_ARGUMENTS that loss_fn takes as parameters (by name, not through **kwargs)."""
    try:
        parameters = inspect.signature(loss_fn).parameters
    except (TypeError, ValueError):   # builtins without a signature take none
        return ()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(name for name in ROLLOUT_ARGUMENTS if name in parameters and parameters[name].kind in named)


def check_signature(loss_fn: Callable) -> None:
    """Refuse a loss_fn that cannot take the five arguments (and the ROLLOUT_ARGUMENTS it declares)."""
    if not callable(loss_fn):
        raise LossError(f"loss_fn is a {type(loss_fn).__name__}, not a function; pass {SIGNATURE}")
    try:
        inspect.signature(loss_fn).bind(*range(5), **dict.fromkeys(declared_arguments(loss_fn)))
    except TypeError:
        raise LossError(f"loss_fn{inspect.signature(loss_fn)} cannot take five arguments; pass {SIGNATURE}") from None
    except ValueError:   # builtins without a signature: their first call will tell
        pass


def sampled_logp(policy: EnumerablePolicy, other: EnumerablePolicy, name: str) -> torch.Tensor:
    """The log-probs [P, N, L] (detached, 0 off the mask) of every reply token under ``other``, a ``name`` policy
    that must share the policy's shape, rewards and reference."""
    if not isinstance(other, EnumerablePolicy):
        raise ValueError(f"{name} is a {type(other).__name__}; pass an EnumerablePolicy (e.g. policy.copy())")
    shape, other_shape = ((q.prompts, q.vocab, q.length, q.eos) for q in (policy, other))
    if other_shape != shape:
        raise ValueError(f"{name} has (prompts, vocab, length, eos) = {other_shape} but the policy {shape}; "
                         f"pass a {name} of the policy's shape (e.g. built from policy.copy())")
    if not torch.equal(other.rewards, policy.rewards):
        raise ValueError(f"{name} has other rewards than the policy; pass one with the policy's rewards "
                         f"(e.g. built from policy.copy())")
    with torch.no_grad():
        logp, ref = other.token_logp()
        if not torch.equal(ref, policy.token_logp()[1]):
            raise ValueError(f"{name} has another reference policy than the policy; pass one with the policy's "
                             f"reference (e.g. built from policy.copy())")
    return logp


def roundoff_tolerance(dtype: torch.dtype) -> float:
    """The relative roundoff a loss computed in ``dtype`` may leave in E[g]: ROUNDOFF_CONDITION eps."""
    return ROUNDOFF_CONDITION * torch.finfo(dtype).eps


class Batches:
    """The audited policy and its behaviour, enumerated once: makes batches (replies drawn from the behaviour) and
    evaluates the loss's token weights on them (log-probs, Jacobian and objectives at the policy)."""

    def __init__(self, loss_fn: Callable, policy: EnumerablePolicy, group_size: int,
                 behaviour: EnumerablePolicy | None = None, proximal: EnumerablePolicy | None = None):
        self.loss_fn, self.policy, self.k = loss_fn, policy, group_size
        logp, ref = policy.token_logp()
        self.logp_graph = logp                                       # [P, N, L], differentiable
        self.logp, self.ref = logp.detach(), ref
        self.p, self.n, self.length = logp.shape
        self.mask = policy.mask
        self.group = torch.arange(self.p).repeat_interleave(group_size)
        rollout = self.logp if behaviour is None else sampled_logp(policy, behaviour, "behaviour")
        old = rollout if proximal is None else sampled_logp(policy, proximal, "proximal")
        given = {"rollout_logp": rollout, "old_logp": old}
        self.extra = {name: given[name] for name in declared_arguments(loss_fn)}
        self.probs = rollout.sum(-1).exp()                           # [P, N]: the behaviour's reply probabilities
        self.precision = logp.dtype                                  # the coarsest dtype the loss has computed in

    def slots(self, idx: torch.Tensor) -> torch.Tensor:
        """Flat token-slot index of every (row, position) of the batch idx [P, K]: [B, L]."""
        rows = (torch.arange(self.p)[:, None] * self.n + idx).reshape(-1)
        return rows[:, None] * self.length + torch.arange(self.length)

    def call_loss(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, logp [B, L] leaf it is a function of) on the batch that answers prompt x with replies idx[x]."""
        x = torch.arange(self.p)[:, None].expand_as(idx)
        logp = self.logp[x, idx].reshape(-1, self.length).clone().requires_grad_(True)
        extra = {name: values[x, idx].reshape(-1, self.length) for name, values in self.extra.items()}
        loss = self.loss_fn(logp, self.ref[x, idx].reshape(-1, self.length), self.policy.rewards[x, idx].reshape(-1),
                            self.mask[idx.reshape(-1)], self.group, **extra)
        return loss, logp

    def row_grads(self, idx: torch.Tensor) -> torch.Tensor:
        """d loss / d logp of the batch that answers prompt x with replies idx[x] ([P, K]): [B, L]."""
        loss, logp = self.call_loss(idx)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise LossError(f"loss_fn returned {shape}, not a scalar tensor; expected {SIGNATURE}")
        if not torch.isfinite(loss.detach()).all():
            raise LossError(f"loss_fn returned {float(loss.detach())}; expected a finite {SIGNATURE}")
        grad = torch.autograd.grad(loss.reshape(()), logp, allow_unused=True)[0] if loss.requires_grad else None
        if grad is None:
            raise LossError(f"loss_fn's result has no gradient path to logp (detached, or built from constants); "
                            f"expected {SIGNATURE}")
        if not torch.isfinite(grad).all():
            raise LossError(f"loss_fn's gradient with respect to logp holds NaN or inf; expected {SIGNATURE}")
        self.precision = max((self.precision, loss.dtype, grad.dtype), key=lambda d: torch.finfo(d).eps)
        return grad * self.mask[idx.reshape(-1)]

    def weights(self, idx: torch.Tensor, rows: int | None = None) -> torch.Tensor:
        """Token weights w [M] of batch idx [P, K] (only the rows of prompt ``rows`` when given)."""
        grads, slots = self.row_grads(idx), self.slots(idx)
        if rows is not None:
            keep = self.group == rows
            grads, slots = grads[keep], slots[keep]
        w = torch.zeros(self.p * self.n * self.length, dtype=torch.float64)
        return w.index_add_(0, slots.reshape(-1), grads.reshape(-1).to(torch.float64))

    def draw(self, generator: torch.Generator) -> torch.Tensor:
        return torch.multinomial(self.probs, self.k, replacement=True, generator=generator)

    def close(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """a == b up to 1e-9 relative (float64 losses), or up to the roundoff of the loss's coarser precision."""
        rtol = max(1e-9, roundoff_tolerance(self.precision))
        atol = max(1e-12, roundoff_tolerance(self.precision)) * max(float(a.abs().max()), 1.0)
        return bool(torch.allclose(a, b, rtol=rtol, atol=atol))

    def symmetric(self, generator: torch.Generator, trials: int = 2) -> bool:
        """True when permuting the rows of each group permutes their gradients (checked on random batches)."""
        for _ in range(trials):
            idx = self.draw(generator)
            order = torch.stack([torch.randperm(self.k, generator=generator) for _ in range(self.p)])
            if not self.close(self.weights(idx), self.weights(idx.gather(1, order))):
                return False
        return True

    def separable(self, generator: torch.Generator, trials: int = 2) -> bool:
        """True when the rows of one group do not change with the other groups' replies (random batches)."""
        for _ in range(trials):
            for x in range(self.p if self.p > 1 else 0):
                idx = self.draw(generator)
                other = idx.clone()
                others = torch.arange(self.p) != x
                other[others] = self.draw(generator)[others]
                if not self.close(self.weights(idx, x), self.weights(other, x)):
                    return False
        return True


def _groups(probs: torch.Tensor, k: int, symmetric: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Every group of k replies the behaviour can give, idx [G, k], with its probability [G] under probs [N].

    Multisets (multinomial weights) or ordered tuples, over the replies of positive probability only: a reply a
    truncated sampler (top-p, top-k) never gives has log-probability -inf and appears in no group.
    """
    support = torch.nonzero(probs > 0)[:, 0]
    n, kept = len(support), probs[support]
    if symmetric:
        local = torch.tensor(list(itertools.combinations_with_replacement(range(n), k))).reshape(-1, k)
        ones = torch.ones_like(local, dtype=torch.float64)
        counts = torch.zeros(len(local), n, dtype=torch.float64).scatter_add_(1, local, ones)
        log_coef = math.lgamma(k + 1) - torch.lgamma(counts + 1).sum(-1)
        return support[local], (log_coef + (counts * kept.log()).sum(-1)).exp()
    local = torch.tensor(list(itertools.product(range(n), repeat=k))).reshape(-1, k)
    return support[local], kept[local].prod(-1)


def _count(n: int, k: int, symmetric: bool) -> int:
    return math.comb(n + k - 1, k) if symmetric else n ** k


def _moments(batches: Batches, configs: Iterable[tuple[torch.Tensor, float, int | None]],
             total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """sum p w and sum p w w^T over (idx [P, K], p, rows) configurations: [M], [M, M]."""
    m = batches.p * batches.n * batches.length
    first, second = torch.zeros(m, dtype=torch.float64), torch.zeros(m, m, dtype=torch.float64)
    chunk, weights = [], []
    with Counter("auditing the loss", total=total) as bar:
        for idx, p, rows in configs:
            chunk.append(batches.weights(idx, rows))
            weights.append(p)
            if len(chunk) == 512:
                first, second = _fold(first, second, chunk, weights)
                bar.advance(len(chunk))
                chunk, weights = [], []
        if chunk:
            first, second = _fold(first, second, chunk, weights)
            bar.advance(len(chunk))
    return first, second


def _fold(first, second, chunk, weights):
    w, p = torch.stack(chunk), torch.tensor(weights, dtype=torch.float64)
    return first + p @ w, second + (w * p[:, None]).T @ w


def _exact(batches: Batches, symmetric: bool, separable: bool) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(E[w] [M], Cov(w) [M, M], configurations) by enumeration."""
    per_prompt = [_groups(batches.probs[x], batches.k, symmetric) for x in range(batches.p)]
    if separable:
        filler = torch.stack([groups[0] for groups, _ in per_prompt])

        def configs():
            for x, (groups, probs) in enumerate(per_prompt):
                for g, p in zip(groups, probs.tolist()):
                    idx = filler.clone()
                    idx[x] = g
                    yield idx, p, x

        total = sum(len(g) for g, _ in per_prompt)
        mean, second = _moments(batches, configs(), total)
        # Groups are independent: Cov(w) is block-diagonal, the sum of each prompt's own covariance.
        cov = torch.zeros_like(second)
        size = batches.n * batches.length
        for x in range(batches.p):
            block = slice(x * size, (x + 1) * size)
            cov[block, block] = second[block, block] - torch.outer(mean[block], mean[block])
        return mean, cov, total

    def configs():
        for combo in itertools.product(*(zip(groups, probs.tolist()) for groups, probs in per_prompt)):
            yield torch.stack([g for g, _ in combo]), math.prod(p for _, p in combo), None

    total = math.prod(len(g) for g, _ in per_prompt)
    mean, second = _moments(batches, configs(), total)
    return mean, second - torch.outer(mean, mean), total


def _monte_carlo(batches: Batches, samples: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(sampled w [S, M]) -> mean [M] and the unbiased covariance [M, M]."""
    with Counter("auditing the loss (Monte Carlo)", total=samples) as bar:
        draws = []
        for _ in range(samples):
            draws.append(batches.weights(batches.draw(generator)))
            bar.advance()
    w = torch.stack(draws)
    centred = w - w.mean(0)
    return w, centred.T @ centred / (samples - 1)


def audit_loss(loss_fn: Callable, policy: EnumerablePolicy, *, beta: float, group_size: int,
               behaviour: EnumerablePolicy | None = None, proximal: EnumerablePolicy | None = None,
               max_batches: int = 200_000, samples: int = 20_000, seed: int = 0,
               monte_carlo: bool = False) -> AuditReport:
    """The exact (or sampled) expectation of grad loss_fn over batches of ``group_size`` replies per prompt.

    loss_fn(logp, ref_logp, rewards, mask, group) -> scalar (SIGNATURE), optionally declaring ROLLOUT_ARGUMENTS;
    policy an EnumerablePolicy; beta the KL price of the stated objective J. ``behaviour`` (an EnumerablePolicy of
    the policy's shape, rewards and reference; default the policy) samples the batches, and its log-probs are the
    loss's ``rollout_logp``; ``proximal`` (default the behaviour) gives ``old_logp``. The loss's ``logp``, the
    gradient and grad J are the policy's: E_behaviour[g] is compared with grad J at the policy. Exact when the
    batches to enumerate number at most ``max_batches`` (and ``monte_carlo`` is False), otherwise ``samples``
    random batches (RNG ``seed``).
    """
    check_signature(loss_fn)
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1 (replies per prompt in a batch), got {group_size!r}")
    if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta must be a finite number >= 0 (the KL price of J), got {beta!r}")
    if samples < 2 or max_batches < 1:
        raise ValueError(f"pass samples >= 2 (Monte Carlo draws, for a standard error) and max_batches >= 1; "
                         f"got samples={samples}, max_batches={max_batches}")
    with single_torch_thread():       # tiny tensors: threads only add contention on shared cores
        batches = Batches(loss_fn, policy, group_size, None if behaviour is policy else behaviour, proximal)
        report = _audit(batches, beta, max_batches, samples, seed, monte_carlo)
    report.off_policy = behaviour is not None and behaviour is not policy
    return report


def _audit(batches: Batches, beta: float, max_batches: int, samples: int, seed: int,
           monte_carlo: bool) -> AuditReport:
    generator = torch.Generator().manual_seed(seed)
    policy = batches.policy
    params = policy.parameters()
    jacobian = _jacobian(batches.logp_graph.reshape(-1), params)                 # [M, D]
    gram = jacobian @ jacobian.T
    symmetric = batches.symmetric(generator)
    separable = batches.separable(generator)
    per_prompt = [_count(int((probs > 0).sum()), batches.k, symmetric) for probs in batches.probs]
    count = sum(per_prompt) if separable else math.prod(per_prompt)
    exact = not monte_carlo and count <= max_batches
    if exact:
        mean_w, cov_w, used = _exact(batches, symmetric, separable)
        kind = "multisets" if symmetric else "ordered groups"
        structure = f"{kind}, {'group by group' if separable else 'every combination of groups'}"
    else:
        draws, cov_w = _monte_carlo(batches, samples, generator)
        mean_w, used, structure = draws.mean(0), samples, "monte carlo"
    gradient = mean_w @ jacobian
    total_variance = float((gram * cov_w).sum())
    target = -_flat_grad(policy.objective("reverse_kl", beta), params)
    report = _compare(gradient, target, total_variance, exact, used, structure)
    noise = math.sqrt(max(total_variance, 0.0) / used) if not exact else 0.0
    exact_tolerance = max(EXACT_TOLERANCE, roundoff_tolerance(batches.precision))
    report.tolerance = exact_tolerance if exact else 3 * noise / max(float(gradient.norm()), 1e-300)
    _verdict(report, policy, beta, params)
    if not exact:
        direction = jacobian @ target / float(target @ target)
        per_batch = draws @ direction
        report.standard_errors = {"scale": float(per_batch.std() / math.sqrt(used)),
                                  "relative_bias": noise / float(target.norm())}
    return report


def _compare(gradient, target, total_variance, exact, used, structure) -> AuditReport:
    norm = float(target.norm())
    if norm == 0:
        raise ValueError("grad J is zero at this policy (nothing to compare with); pick another seed or beta")
    scale = float(gradient @ target) / norm ** 2
    g_norm = float(gradient.norm())
    cosine = float(gradient @ target) / (g_norm * norm) if g_norm > 0 else 0.0
    scaled = float((gradient - scale * target).norm()) / (abs(scale) * norm) if scale != 0 else math.inf
    return AuditReport(relative_bias=float((gradient - target).norm()) / norm, cosine=cosine, scale=scale,
                       scaled_bias=scaled, total_variance=total_variance, exact=exact, follows=None, batches=used,
                       structure=structure, gradient=gradient, target=target)


def _residual(gradient: torch.Tensor, basis: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Least-squares coefficients of gradient [D] on the columns of basis [D, k], and the sine left."""
    coef = torch.linalg.lstsq(basis, gradient[:, None]).solution[:, 0]
    norm = float(gradient.norm())
    return coef, float((gradient - basis @ coef).norm()) / norm if norm > 0 else math.inf


def _verdict(report: AuditReport, policy: EnumerablePolicy, beta: float, params) -> None:
    """Fill candidates, prompt_weights and follows (an objective is followed within the sine report.tolerance)."""
    gradient, tol = report.gradient, report.tolerance
    kinds = [k for k in PREFERENCE if k != "length_normalised" or beta == 0]
    for kind in kinds:
        direction = -_flat_grad(policy.objective(kind, beta), params)
        coef, sine = _residual(gradient, direction[:, None])
        report.candidates.append({"objective": kind, "scale": float(coef[0]), "sine": sine,
                                  "meaning": OBJECTIVES[kind]})
        if report.follows is None and coef[0] > 0 and sine <= tol:
            report.follows = kind
    if policy.prompts > 1:
        terms = policy.prompt_objectives(beta)
        basis = torch.stack([-_flat_grad(terms[x], params, retain=True) for x in range(policy.prompts)], 1)
        coef, sine = _residual(gradient, basis)
        report.prompt_weights = (coef / coef.mean()).tolist() if float(coef.mean()) != 0 else coef.tolist()
        report.candidates.append({"objective": "reweighted", "scale": float(coef.mean()), "sine": sine,
                                  "meaning": "sum_x c_x J_x: J's prompt terms, each with its own positive scale"})
        if report.follows is None and bool((coef > 0).all()) and sine <= tol:
            report.follows = "reweighted"
