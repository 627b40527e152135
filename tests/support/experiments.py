"""The QUICK-size run of each experiment, run once per test session, and the checks every experiment must pass.

A test that calls ``check_quick(name)`` declares it with ``@pytest.mark.experiment(name)`` (the experiment tier,
with the names of the runs it checks). test_experiments' catch-all test declares every experiment with
``fallback=True``; the conftest drops its case for each experiment that a test of its own declares, so each QUICK
run happens once per session, and no test has to read another test's source to know which.
"""

import functools

import pytest

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
DECLARED: set[str] = set()
"""The QUICK runs the running test declares (set by the conftest before each test's setup, call and teardown)."""
CHECKED: set[str] = set()
"""The QUICK runs check_quick has returned in this test process."""


@functools.cache
def quick_result(name: str):
    """The experiment's Result at QUICK size, run once per test process (the experiments' test files share it)."""
    with single_torch_thread():
        return get_experiment(name).run(quick=True)


def check_quick(name: str):
    """The QUICK-size Result of ``name``, after the checks every experiment must pass."""
    if name not in DECLARED:
        raise ValueError(f"check_quick({name!r}) in a test that does not declare it: "
                         f"mark the test @pytest.mark.experiment({name!r})")
    result = quick_result(name)
    assert result.checks, "an experiment states at least one claim"
    if name not in SMOKE_ONLY:
        assert result.passed, [c for c in result.checks if not c.passed]
    assert all(c.tolerance.strip() for c in result.checks), [c.claim for c in result.checks if not c.tolerance.strip()]
    assert result.tables and all(result.tables.values())
    assert bool(result.figures) == (name not in NO_FIGURE)
    CHECKED.add(name)
    return result


def declared(item: pytest.Item) -> set[str]:
    """The experiment names an item's experiment markers declare (its own, its class's and its module's)."""
    return {name for marker in item.iter_markers("experiment") for name in marker.args}


def _is_fallback(item: pytest.Item) -> bool:
    return any(marker.kwargs.get("fallback") for marker in item.iter_markers("experiment"))


def split_fallbacks(items: list[pytest.Item]) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """items -> (kept, dropped): a fallback case is dropped when a test of its own declares its experiment."""
    own = {name for item in items if not _is_fallback(item) for name in declared(item)}
    dropped = {id(item) for item in items if _is_fallback(item) and declared(item) <= own}
    return ([item for item in items if id(item) not in dropped], [item for item in items if id(item) in dropped])


def declared_but_not_run(item: pytest.Item) -> list[str]:
    """One line per QUICK run the item declares that no test of this process has made."""
    return [f"{item.nodeid} declares experiment {name!r} but never calls check_quick({name!r}): "
            "drop the name from its marker or call check_quick" for name in sorted(declared(item) - CHECKED)]
