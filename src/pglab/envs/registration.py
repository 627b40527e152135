"""The gymnasium ids pglab registers, and the function that registers them.

``register_envs`` is what ``import pglab`` and ``import pglab.envs.bugfix`` run, and the target of the
``gymnasium.envs`` entry point in pyproject.toml. This module imports nothing of pglab, so that entry point costs
an import of gymnasium's registry only; each id's entry point is a string that gymnasium imports at ``make``.
"""

from __future__ import annotations

BUGFIX_ID = "pglab/BugFix-v0"
ENV_IDS = {BUGFIX_ID: "pglab.envs.bugfix.env:BugFixEnv"}
"""Each registered id and the ``module:Class`` gymnasium builds it from."""


def register_envs() -> None:
    """Register every id of :data:`ENV_IDS` that gymnasium's registry does not hold yet (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for env_id, entry_point in ENV_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point)


__all__ = ["BUGFIX_ID", "ENV_IDS", "register_envs"]
