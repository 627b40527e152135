"""Behaviour policies for the off-policy audit: the sampler that drew the batch differs from the policy trained.

``behaviour_pair(policy, spec, *, beta)`` reads a spec such as ``"stale:2,top-p:0.9"`` and returns
(the policy to audit, the behaviour that samples its batches):

- ``stale:K``: asynchronous training; the behaviour is the given policy and the audited policy is a copy moved
  K exact gradient-ascent steps on J (the reverse-KL objective at ``beta``) with STALE_STEP_SIZE;
- ``noise:S``: a kernel or precision mismatch; the behaviour adds fixed Gaussian noise of scale S to the logits
  at each (prompt, prefix state), drawn once from a generator seeded NOISE_SEED_OFFSET + the policy's seed;
- ``temperature:T``, ``top-k:K``, ``top-p:P``: the sampler rescales or truncates the logits at each prefix state
  (top-p keeps the smallest set of most likely tokens whose mass reaches P, renormalised).

The behaviour's logits are built in one order whatever the order in the spec: noise, then temperature, then
top-k, then top-p (``pglab.envs.enumerable.SamplerLogits``), on the unmoved policy's net (the stale one).
"""

from __future__ import annotations

import math

import torch

from pglab.envs.enumerable import EnumerablePolicy
from pglab.runtime.options import SettingsError

SYNTAX = ("--behaviour takes comma-separated KIND:VALUE items, KIND one of noise (S >= 0), stale (K >= 0 steps), "
          "top-p (0 < P <= 1), top-k (K >= 1), temperature (T > 0), each at most once; e.g. stale:2,top-p:0.9")
"""What every refusal of a spec names."""

STALE_STEP_SIZE = 1.0
"""Learning rate of each exact gradient-ascent step of ``stale:K`` (theta <- theta + STALE_STEP_SIZE grad J).
On the table policies (logits of spread 1, rewards of spread 1) a step moves the logits by about 0.1, so the
token ratios of stale:1 to stale:3 stay within about exp(+-0.3): the mismatch of a few updates of training."""

NOISE_SEED_OFFSET = 7919
"""``noise:S`` draws its noise from torch.Generator().manual_seed(NOISE_SEED_OFFSET + policy.seed): fixed for a
policy, other than the draws that made the policy (which used its seed itself)."""

KINDS = {"noise": float, "stale": int, "top-p": float, "top-k": int, "temperature": float}
"""Spec kind -> the type of its value."""


def _in_range(kind: str, value: float) -> bool:
    if kind in ("noise", "stale"):
        return value >= 0
    if kind == "top-p":
        return 0 < value <= 1
    if kind == "top-k":
        return value >= 1
    return value > 0


def parse_spec(spec: str | None) -> dict[str, float]:
    """A behaviour spec -> {kind: value}; '' or None -> {} (on-policy). SettingsError naming SYNTAX otherwise."""
    parsed: dict[str, float] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        kind, sep, text = item.partition(":")
        kind = kind.strip().lower()
        if not sep or kind not in KINDS or kind in parsed:
            raise SettingsError(f"bad behaviour item {item!r}: {SYNTAX}")
        try:
            value = KINDS[kind](text.strip())
        except ValueError:
            raise SettingsError(f"bad behaviour value in {item!r}: {SYNTAX}") from None
        if not (math.isfinite(value) and _in_range(kind, value)):
            raise SettingsError(f"behaviour value out of range in {item!r}: {SYNTAX}")
        parsed[kind] = value
    return parsed


def stale_policy(policy: EnumerablePolicy, steps: int, beta: float) -> EnumerablePolicy:
    """A copy of policy moved ``steps`` exact gradient-ascent steps on J (reverse KL at beta), STALE_STEP_SIZE each."""
    moved = policy.copy()
    params = moved.parameters()
    for _ in range(steps):
        grads = torch.autograd.grad(moved.objective("reverse_kl", beta), params)
        with torch.no_grad():
            for param, grad in zip(params, grads):
                param.add_(grad, alpha=STALE_STEP_SIZE)
    return moved


def logit_noise(policy: EnumerablePolicy, scale: float) -> torch.Tensor:
    """Fixed Gaussian noise [P, S, V] of standard deviation ``scale`` per (prompt, prefix state, token)."""
    generator = torch.Generator().manual_seed(NOISE_SEED_OFFSET + getattr(policy, "seed", 0))
    shape = (policy.prompts, policy.replies.n_states, policy.vocab)
    return scale * torch.randn(shape, generator=generator, dtype=torch.float64)


def behaviour_pair(policy: EnumerablePolicy, spec: str | None, *,
                   beta: float) -> tuple[EnumerablePolicy, EnumerablePolicy]:
    """(the policy to audit, the behaviour that samples its batches) for a spec (see the module); no spec ->
    (policy, policy). The behaviour shares the given policy's net, reference and rewards."""
    parsed = parse_spec(spec)
    if not parsed:
        return policy, policy
    audited = stale_policy(policy, int(parsed["stale"]), beta) if "stale" in parsed else policy
    sampler = {"temperature": parsed.get("temperature", 1.0), "top_p": parsed.get("top-p"),
               "top_k": None if "top-k" not in parsed else int(parsed["top-k"])}
    if "noise" in parsed:
        sampler["noise"] = logit_noise(policy, parsed["noise"])
    if sampler == {"temperature": 1.0, "top_p": None, "top_k": None}:
        return audited, policy
    return audited, policy.transformed(**sampler)


def describe(spec: str | None) -> str:
    """The behaviour in words for the report: 'on-policy' or the spec's items in the order they act."""
    parsed = parse_spec(spec)
    if not parsed:
        return "on-policy (the policy samples its own batches)"
    order = ("stale", "noise", "temperature", "top-k", "top-p")
    return "sampled by " + ", ".join(f"{kind}:{parsed[kind]:g}" for kind in order if kind in parsed)
