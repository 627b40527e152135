"""The experiment registry: ``@experiment(name, summary, Config)`` on a function ``Config -> Result``.

Each experiment module registers itself when :mod:`pglab.experiments` is imported, so adding an
experiment is adding one module. A Config is a dataclass with a docstring per field; its class
attribute ``QUICK`` (a dict of field overrides) gives the reduced size used by tests and ``--quick``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pglab.result import Result


@dataclass(frozen=True)
class Experiment:
    name: str
    summary: str
    config_cls: type
    fn: Callable[[Any], Result]

    def config(self, quick: bool = False, **overrides: Any) -> Any:
        """A Config with defaults, then the QUICK overrides (if asked), then ``overrides``."""
        fields = {f.name: f for f in dataclasses.fields(self.config_cls)}
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(
                f"experiment {self.name!r} has no setting(s) {unknown}; known settings: {sorted(fields)}"
            )
        values = dict(getattr(self.config_cls, "QUICK", {})) if quick else {}
        values.update(overrides)
        return self.config_cls(**values)

    def run(self, quick: bool = False, **overrides: Any) -> Result:
        """Run with the given settings and return the Result."""
        return self.fn(self.config(quick=quick, **overrides))


_REGISTRY: dict[str, Experiment] = {}


def experiment(name: str, summary: str, config_cls: type) -> Callable[[Callable[[Any], Result]], Callable]:
    """Register ``fn(config) -> Result`` under ``name``."""

    def register(fn: Callable[[Any], Result]) -> Callable[[Any], Result]:
        if name in _REGISTRY:
            raise ValueError(f"experiment {name!r} is registered twice")
        _REGISTRY[name] = Experiment(name, summary, config_cls, fn)
        return fn

    return register


def get_experiment(name: str) -> Experiment:
    """The registered experiment called ``name``; ValueError listing the known names otherwise."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown experiment {name!r}; `pglab reproduce --list` shows: {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def experiment_names() -> list[str]:
    return sorted(_REGISTRY)


def config_dict(config: Any) -> dict[str, Any]:
    """A Config as a plain dict, for Result.config."""
    return dataclasses.asdict(config)
