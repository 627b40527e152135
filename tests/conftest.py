"""Fixtures every test folder shares, and the three tiers: unit (the default), integration, experiment.

A unit test starts no other process: no subprocess, no fork, no multiprocessing, no torch.distributed process
group, no browser. While a unit test's setup, call or teardown runs, each of these fails it with a message
that names the tier to mark it with, even where the code under test catches the error.
"""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from pglab.envs.bugfix import make_tasks  # noqa: E402
from pglab.models import build_tokenizer  # noqa: E402
from pglab.runtime.threads import single_torch_thread  # noqa: E402
from pglab.trainers.cloning import CloningSettings, make_base_agent  # noqa: E402
from support import experiments, tiers  # noqa: E402

VIOLATIONS = pytest.StashKey[list]()
"""What a unit test started that only an integration or experiment test may: one line each."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every item gets exactly one tier (unit when unmarked), before ``-m`` selects; a QUICK run that a test of
    its own declares is dropped from the catch-all list of test_experiments."""
    for item in items:
        if tiers.tier_of(item) == "unit":
            item.add_marker("unit")
    kept, dropped = experiments.split_fallbacks(items)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _guarded(item):
    """Unit tier: fail on any process started; experiment tier: expose the QUICK runs the test declares."""
    experiments.DECLARED.clear()
    experiments.DECLARED.update(experiments.declared(item))
    if item.get_closest_marker("unit") is None:
        return tiers.unguarded()
    return tiers.no_processes(item.stash.setdefault(VIOLATIONS, []))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A unit test that started a process fails, even when the code under test swallowed the refusal; an
    experiment test fails when it declares a QUICK run it never made."""
    report = yield
    problems = list(item.stash.get(VIOLATIONS, []))
    if call.when == "call" and report.passed:
        problems += experiments.declared_but_not_run(item)
    if problems and not report.failed:
        report.outcome = "failed"
        report.longrepr = "\n".join(dict.fromkeys(problems))
    item.stash[VIOLATIONS] = []
    return report


@pytest.fixture(scope="module")
def one_thread():
    """Small tensor work on one torch thread for a whole module (use with pytest.mark.usefixtures)."""
    with single_torch_thread():
        yield


@pytest.fixture(scope="module")
def tok():
    """The word-level tokenizer over every BugFixEnv task."""
    return build_tokenizer(make_tasks("all"))


@pytest.fixture(scope="module")
def cloned_agent(tok):
    """A briefly cloned agent (cached on disk): mostly valid calls, episodes of different lengths."""
    return make_base_agent(tok, settings=CloningSettings(steps=60, episodes_per_task=2))
