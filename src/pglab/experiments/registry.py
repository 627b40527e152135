"""The experiment registry: a catalogue of names, imported lazily.

Each experiment is a module with a ``Config`` dataclass (a docstring per field; a class attribute
``QUICK`` holds the reduced size used by tests and ``--quick``; ``MIN_SEEDS`` the fewest seeds its
statistics accept) and a function ``run(config, result)`` that fills in the ``Result`` the registry
made for it. The name and summary live here only, so ``pglab reproduce --list`` imports no
experiment, and an experiment with optional dependencies imports them inside ``run``.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
import typing
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pglab.reporting.result import Result, provenance
from pglab.runtime.options import SettingsError, check_type, parse_value

CATALOGUE: dict[str, tuple[str, str]] = {
    "bandit-variance": ("bandit_variance", "score-function estimator on a Gaussian bandit vs closed forms "
                                           "(course-ch7, llm-ch6 §6.6-6.7)"),
    "bandit-training": ("bandit_training", "REINFORCE on the 4-armed bandit, 200 seeds: no / running / exact-value "
                                           "baseline (llm-ch6 §6.7)"),
    "bandit-race": ("bandit_race", "12 runs on rewards 1, 2, 4 + 10, without and with a running baseline "
                                   "(course-ch7, the race demo)"),
    "bandit-lab": ("bandit_lab", "the variance valley, exercises 7.4 and 7.9, the race at c = 15 "
                                 "(course-ch7, the lab)"),
    "cartpole": ("cartpole", "REINFORCE on CartPole-v1 weighted by G_0, G_t and G_t - V(s_t), 6 seeds "
                             "(course-ch7, the lab)"),
    "loo-enumeration": ("loo_enumeration", "exact enumeration: E[leave-one-out] = grad J, E[centred] = (n-1)/n grad J "
                                           "(d2l-14.6 §14.6.3.2)"),
    "repair-mdp-gradient": ("repair_mdp_gradient", "REINFORCE vs the exact gradient on the 7-state repair MDP; "
                                                   "shifts and baselines (agents-ch6 §6.1)"),
    "frozenlake-static": ("frozenlake_static", "four divisors and five estimators vs the exact gradient over a sweep "
                                               "of frozen policies (d2l-14.6 §14.6.3.3, §14.6.4.1)"),
    "frozenlake-race": ("frozenlake_race", "five REINFORCE weightings x 20 seeds on FrozenLake: speed vs step size "
                                           "(d2l-14.6 §14.6.4.2)"),
    "tokenworld-gae": ("tokenworld_gae", "token world: exact V/Q/A, TD errors, GAE bias/variance over lambda "
                                         "(llm-ch6 §6.8-6.10)"),
    "tokenworld-training": ("tokenworld_training", "token world: REINFORCE vs leave-one-out vs GAE + learned critic, "
                                                   "+5 shift (llm-ch6 §6.10)"),
    "bugfix-scripted": ("bugfix_scripted", "scripted random, blind and oracle play on BugFixEnv, measured and exact "
                                           "(agents-ch6 §6.2)"),
    "tinyagent-masking": ("tinyagent_masking", "which positions the REINFORCE loss reaches: logit and embedding "
                                               "gradients by owner (agents-ch6 §6.3)"),
    "tinyagent-baselines": ("tinyagent_baselines", "total variance of TinyAgent's estimator over 240 episodes for "
                                                   "constant and per-task baselines (agents-ch6 §6.4)"),
    "tinyagent-reward-to-go": ("tinyagent_reward_to_go", "reward-to-go against the total return under a cost per "
                                                         "call: variance on TinyAgent (agents-ch6 §6.5)"),
    "aggregation": ("aggregation", "per-token weights of the four loss aggregation modes vs their closed forms, on "
                                   "TinyAgent's probe batch (agents-ch6 §6.6)"),
    "design-problems": ("design_problems", "gradient noise vs batch size, the detach bug, the zero-advantage Adam step "
                                           "(agents-ch6 §6.8)"),
    "hf-agent": ("hf_agent_reinforce", "the default GPT-2 agent (BPE text calls, token in and token out) and TinyAgent "
                                       "in BugFixEnv, each trained 80 steps x 64 episodes at hf-agent's 3 seeds, side "
                                       "by side (agents-ch6 §6.7)"),
    "tinyagent-reinforce": ("tinyagent_reinforce", "80 REINFORCE steps x 64 episodes from the base agent over 5 seeds: "
                                                   "before/after, curves, behaviour (agents-ch6 §6.7)"),
    "lm-kl": ("lm_kl", "leave-one-out REINFORCE on the embedded tiny GPT-2, beta 0 / 0.05 / 0.2 (llm-ch6 §6.11-6.12)"),
    "lm-beta-optimum": ("lm_beta_optimum", "enumerable toy LM: training with beta approaches pi* ~ ref exp(r / beta) "
                                           "(llm-ch6)"),
    "kl-placement": ("kl_placement", "k1 / k2 / k3 in the reward or the loss, audited exactly: which objective each "
                                     "follows, and where training ends (llm-ch6)"),
    "grpo-bias": ("grpo_bias", "GRPO's group mean, std scaling and aggregation modes, audited exactly at K = 2, 4, 8 "
                               "(llm-ch6, agents-ch6 §6.6)"),
    "grpo-weights": ("grpo_weights", "per-prompt weight w(p, G) of GRPO, Dr. GRPO, RLOO and REINFORCE++-baseline on "
                                     "pass/fail rewards, G = 2 to 64: closed forms against exact audits"),
    "kl-matrix": ("kl_matrix", "KL estimator x placement x level, on-policy and under noisy and stale samplers: the "
                               "objective each follows and its exact bias, against closed forms"),
    "framework-matrix": ("framework_matrix", "pglab conform's loss level over the installed TRL, verl and OpenRLHF "
                                             "and their main loss settings: documented preset, factor, objective"),
    "offpolicy-bias": ("offpolicy_bias", "nine sampler/trainer mismatch corrections as the logit noise and the "
                                         "staleness grow: exact bias, variance and the bias-variance frontier"),
}
"""name -> (module in pglab.experiments, one-line summary)."""


@dataclass(frozen=True)
class Experiment:
    name: str
    """The name ``pglab reproduce`` takes."""
    module_name: str
    """Its module in pglab.experiments."""
    summary: str
    """One line for ``pglab reproduce --list``."""

    def module(self) -> ModuleType:
        return importlib.import_module(f"pglab.experiments.{self.module_name}")

    @property
    def config_cls(self) -> type:
        return self.module().Config

    def fields(self) -> dict[str, type]:
        """Setting name -> its type, from the Config's annotations."""
        hints = typing.get_type_hints(self.config_cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(self.config_cls)}

    def parse(self, key: str, text: str) -> Any:
        """The text of ``--set KEY=VALUE`` as the setting's type (SettingsError naming the setting otherwise)."""
        fields = self.fields()
        if key not in fields:
            raise SettingsError(f"experiment {self.name!r} has no setting {key!r}; its settings: {', '.join(fields)}")
        return parse_value(text, fields[key], f"{self.name}: {key}")

    def config(self, quick: bool = False, **overrides: Any) -> Any:
        """A Config with defaults, then the QUICK overrides (if asked), then ``overrides``, each type-checked."""
        fields = self.fields()
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise SettingsError(f"experiment {self.name!r} has no setting(s) {unknown}; its settings: "
                                f"{sorted(fields)}")
        values = dict(getattr(self.config_cls, "QUICK", {})) if quick else {}
        values.update({k: check_type(f"{self.name}: {k}", v, fields[k]) for k, v in overrides.items()})
        config = self.config_cls(**values)
        self.check_seeds(config)
        return config

    def check_seeds(self, config: Any) -> None:
        """Refuse a seed count below the experiment's MIN_SEEDS and a negative first seed."""
        least = getattr(self.config_cls, "MIN_SEEDS", 1)
        if hasattr(config, "seeds") and config.seeds < least:
            raise SettingsError(f"{self.name} needs --seeds >= {least}, got {config.seeds}")
        if getattr(config, "first_seed", 0) < 0:
            raise SettingsError(f"{self.name}: --first-seed must be >= 0, got {config.first_seed}")

    def run(self, quick: bool = False, command: str | None = None, **overrides: Any) -> Result:
        """Run with the given settings and return the Result (its header, provenance and the metric ``wall seconds``
        filled in here)."""
        config = self.config(quick=quick, **overrides)
        result = Result(self.name, dataclasses.asdict(config), provenance=provenance(command), quick=quick)
        started = time.perf_counter()
        self.module().run(config, result)
        result.metrics["wall seconds"] = time.perf_counter() - started
        return result


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; SettingsError listing the known names otherwise."""
    if name not in CATALOGUE:
        raise SettingsError(f"unknown experiment {name!r}; `pglab reproduce --list` shows: "
                            f"{', '.join(sorted(CATALOGUE))}")
    module_name, summary = CATALOGUE[name]
    return Experiment(name, module_name, summary)


def experiment_names() -> list[str]:
    return list(CATALOGUE)
