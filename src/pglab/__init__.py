"""pglab: a policy-gradient laboratory.

Every estimator is a pure tensor function in :mod:`pglab.estimators`, checked against exact
gradients on environments small enough to solve (:mod:`pglab.envs`), and every design choice is
measured by an experiment (:mod:`pglab.experiments`) that returns a :class:`pglab.reporting.result.Result`.
"""

__version__ = "0.1.0"


def _register_envs() -> None:
    """Register ``pglab/BugFix-v0`` with a string entry point: nothing of the environment is imported now."""
    from pglab.envs.registration import register_envs

    register_envs()


_register_envs()
