"""The QUICK-size run of each experiment, run once per test session, and the checks every experiment must pass."""

import functools

from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread

NO_FIGURE = {"loo-enumeration", "repair-mdp-gradient", "tinyagent-masking", "tinyagent-reward-to-go"}
"""Experiments whose results are tables only."""
SMOKE_ONLY = {
    "hf-agent": "the training claims need 80 steps x 64 episodes; train-agent is tested on its own",
    "tinyagent-reinforce": "the training claims need 80 steps x 64 episodes; the trainer is tested on its own",
    "lm-kl": "the collapse folds, the KL order and the bounded KL need 300 steps of the full default over 3 seeds; "
             "its test holds the k1 claims and checks that every claim is stated",
}
"""Experiments whose claims need the full size: at QUICK size they must run and state claims, not hold them."""


@functools.cache
def quick_result(name: str):
    """The experiment's Result at QUICK size, run once per test session (the experiments' test files share it)."""
    with single_torch_thread():
        return get_experiment(name).run(quick=True)


def check_quick(name: str):
    """The QUICK-size Result of ``name``, after the checks every experiment must pass."""
    result = quick_result(name)
    assert result.checks, "an experiment states at least one claim"
    if name not in SMOKE_ONLY:
        assert result.passed, [c for c in result.checks if not c.passed]
    assert all(c.tolerance.strip() for c in result.checks), [c.claim for c in result.checks if not c.tolerance.strip()]
    assert result.tables and all(result.tables.values())
    assert bool(result.figures) == (name not in NO_FIGURE)
    return result
