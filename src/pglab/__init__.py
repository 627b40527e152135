"""pglab: a policy-gradient laboratory.

Every estimator is a pure tensor function in :mod:`pglab.estimators`, checked against exact
gradients on environments small enough to solve (:mod:`pglab.envs`), and every design choice is
measured by an experiment (:mod:`pglab.experiments`) that returns a :class:`pglab.result.Result`.
"""

__version__ = "0.1.0"
