"""framework-matrix: pglab conform's loss level over the installed frameworks and their main loss settings.

Each SETTINGS row is a config in the framework's own naming (``--set`` items); its own loss code is audited exactly
(``pglab.conform.loss_checks``) on-policy and under each behaviour. One table: the documented preset and the factor
of the framework's E[g] over it, the objective the loss follows, its scale, scaled bias and variance.

Claims, from exact quantities only: every setting that a pglab preset models reproduces it (|factor - 1| and the
sine within the framework's MATCH_TOLERANCE, a float32 or float64 roundoff bound); each framework's documented
unbiased setting (UNBIASED: leave-one-out with the token sum per reply, no KL term or k1 in the reward) follows J
up to a positive step-size factor on-policy, within the audit's exact tolerance.
Frameworks that are not installed are named in the summary and left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track

SETTINGS: dict[str, tuple[str, dict[str, str]]] = {
    "trl grpo": ("trl", {"loss_type": "grpo", "beta": "0.04"}),
    "trl dapo": ("trl", {"loss_type": "dapo", "beta": "0.04"}),
    "trl dr_grpo": ("trl", {"loss_type": "dr_grpo", "beta": "0.04"}),
    "trl rloo": ("trl", {"beta": "0.04"}),
    "verl grpo low_var_kl": ("verl", {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.actor.use_kl_loss": "true",
                                      "actor_rollout_ref.actor.kl_loss_coef": "0.04"}),
    "verl grpo seq-mean-token-sum-norm": ("verl", {"algorithm.adv_estimator": "grpo",
                                                   "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum-norm"}),
    "verl rloo seq-mean-token-sum": ("verl", {"algorithm.adv_estimator": "rloo",
                                              "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum"}),
    "openrlhf group_norm k3 loss": ("openrlhf", {"algo.advantage.estimator": "group_norm", "algo.kl.use_loss": "true",
                                                 "algo.kl.estimator": "k3", "algo.kl.init_coef": "0.04"}),
    "openrlhf rloo": ("openrlhf", {"algo.advantage.estimator": "rloo"}),
    "openrlhf reinforce_baseline": ("openrlhf", {"algo.advantage.estimator": "reinforce_baseline"}),
}
"""Setting name -> (framework, its config keys in the framework's own naming; the rest at the framework's defaults).
'trl rloo' reads an RLOOConfig."""
UNBIASED = ("trl rloo", "verl rloo seq-mean-token-sum")
"""The settings each framework documents as an unbiased estimator (leave-one-out; TRL's KL as k1 in the reward)."""


@dataclass
class Config:
    behaviours: tuple[str, ...] = ("noise:0.3", "stale:1")
    """Off-policy samplers (pglab.audit.behaviour specs); on-policy is always audited."""
    prompts: int = 2
    """Prompts of the enumerable policy (one group each)."""
    group_size: int = 2
    """Replies per prompt in an audited batch."""
    first_seed: int = 0
    """Seed of the policy's weights and rewards."""

    QUICK: ClassVar[dict] = {"behaviours": (), "prompts": 1}

    def __post_init__(self) -> None:
        if self.prompts < 1 or self.group_size < 2:
            raise SettingsError(f"prompts must be >= 1 and group_size >= 2, got {self.prompts}, {self.group_size}")


def setting_rows(name: str, config: Config) -> list[dict] | str:
    """One row per sampler for setting ``name``, or why it did not run (the framework is not installed)."""
    from pglab.conform.configs import read_config
    from pglab.conform.frameworks import LOADERS, version
    from pglab.conform.loss_checks import AuditSetup, loss_checks

    framework, sets = SETTINGS[name]
    missing = LOADERS[framework]()
    if isinstance(missing, str):
        return missing
    trainer = "rloo" if name == "trl rloo" else "grpo"
    framework_config = read_config(framework, None, sets, trainer)
    setup = AuditSetup(prompts=config.prompts, group_size=config.group_size, seed=config.first_seed)
    checks = loss_checks(framework_config, setup, config.behaviours)
    rows = []
    for documented, objective in zip(checks[::2], checks[1::2]):
        rows.append({"setting": name, "version": f"{framework} {version(framework)}",
                     "sampler": documented.name.split(", ", 1)[1], "documented": documented.status,
                     "factor": documented.factor, "objective": objective.status,
                     "verdict": objective.detail.split(";")[0], "detail": documented.detail})
    return rows


def check_claims(result: Result, rows: list[dict]) -> None:
    from pglab.conform.loss_checks import MATCH_TOLERANCE

    modelled = [r for r in rows if r["factor"] is not None]
    worst = max((abs(r["factor"] - 1) for r in modelled), default=0.0)
    result.check("every setting a pglab preset models reproduces it (largest |factor - 1|)", worst,
                 bool(modelled) and all(r["documented"] == "pass" for r in modelled),
                 f"each within its framework's tolerance (<= {max(MATCH_TOLERANCE.values()):.2g})",
                 "MATCH_TOLERANCE: float64 exact 1e-8 (verl), TRL's float32 Bessel factor 1.2e-7, OpenRLHF's float32 "
                 "KL and whitening 2e-6")
    unbiased = [r for r in rows if r["setting"] in UNBIASED and r["sampler"] == "on-policy"]
    result.check("each framework's documented unbiased setting follows J up to a step-size factor on-policy",
                 sum(r["objective"] == "pass" for r in unbiased), bool(unbiased) and
                 all(r["objective"] == "pass" for r in unbiased), f"{len(unbiased)} of {len(unbiased)}",
                 "exact enumeration: E[g] a positive multiple of grad J within the audit's sine 1e-8")


def figure(rows: list[dict]):
    from pglab.reporting.plots import new_figure

    fig, ax = new_figure()
    labels = [f"{r['setting']} ({r['sampler']})" for r in rows]
    ax.barh(range(len(rows)), [1.0 if r["objective"] == "pass" else 0.5 for r in rows],
            color=["tab:green" if r["objective"] == "pass" else "tab:orange" for r in rows])
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xticks([0.5, 1.0], ["biased (warn)", "follows J"])
    ax.set_title("objective each setting's own loss code follows")
    return fig


def run(config: Config, result: Result) -> None:
    rows, skipped = [], []
    for name in track(list(SETTINGS), "framework settings", len(SETTINGS)):
        found = setting_rows(name, config)
        if isinstance(found, str):
            skipped.append(f"{name}: {found}")
        else:
            rows += found
    result.summary = (f"{len(SETTINGS) - len(skipped)} framework loss settings audited exactly with their own code on "
                      f"{config.prompts} prompt(s), groups of {config.group_size}, on-policy and under "
                      f"{', '.join(config.behaviours) or 'no other sampler'}."
                      + (f" Not installed: {'; '.join(skipped)}." if skipped else ""))
    if not rows:
        raise SettingsError("no framework is installed: `pip install -e .[conform]` and `make .venv/.peers`")
    check_claims(result, rows)
    result.tables["matrix"] = rows
    result.metrics["audits"] = len(rows)
    result.figures["objectives"] = figure(rows)
