"""pglab conform's loss-level and numerics checks, each with a negative control: a synthetic loss (or the framework's
own function monkeypatched) that breaks exactly that invariance fails or warns, the real code passes.

Tolerances: the documented-loss factor is compared at MATCH_TOLERANCE (derived in pglab.conform.loss_checks); the
wrong loss is off by a factor 2, far outside it.
"""

import json

import pytest
import torch

from pglab.cli import main
from pglab.conform import frameworks
from pglab.conform.checks import STATUSES
from pglab.conform.numerics import EDGES, RESIDUE_WARNING, SINGLETON, edge_check, residue_check
from pglab.estimators import kl_estimate


def installed(name):
    found = frameworks.LOADERS[name]()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def conform(tmp_path, *words):
    path = tmp_path / "checks.json"
    code = main(["conform", *words, "--prompts", "1", "--skip-trainer", "--json", str(path)])
    return code, json.loads(path.read_text())


def by_name(document):
    return {check["name"]: check for check in document["checks"]}


def test_trl_dapo_passes_and_the_json_has_exactly_the_schema(tmp_path):
    installed("trl")
    code, document = conform(tmp_path, "trl", "--set", "loss_type=dapo", "--set", "beta=0.04",
                             "--set", "steps_per_generation=4", "--set", "gradient_accumulation_steps=2")
    assert set(document) == {"framework", "version", "verdict", "checks"}
    assert document["framework"] == "trl" and document["version"] == frameworks.version("trl")
    for check in document["checks"]:
        assert set(check) == {"name", "status", "factor", "detail"} and check["status"] in STATUSES
        assert check["factor"] is None or isinstance(check["factor"], float)
    assert code == 0 and document["verdict"] != "fail"
    documented = by_name(document)["documented loss, on-policy"]
    assert documented["status"] == "pass" and "trl-dapo-kl-corrected" in documented["detail"]
    assert abs(documented["factor"] - 1) <= 1.2e-7


def test_a_wrong_trl_loss_fails_with_its_factor_and_exit_1(tmp_path, monkeypatch):
    trl = installed("trl")
    own = trl.grpo.GRPOTrainer._compute_loss
    monkeypatch.setattr(trl.grpo.GRPOTrainer, "_compute_loss", lambda self, model, inputs: 2 * own(self, model, inputs))
    code, document = conform(tmp_path, "trl", "--set", "loss_type=dapo")
    assert code == 1 and document["verdict"] == "fail"
    for where in ("on-policy", "sampled by noise:0.3", "sampled by stale:1"):
        check = by_name(document)[f"documented loss, {where}"]
        assert check["status"] == "fail" and abs(check["factor"] - 2) <= 1e-6, check


def test_a_known_biased_setting_warns_with_its_objective(tmp_path):
    """verl with the KL as a k1 loss: k1's expected gradient is 0, so the loss follows E[r] alone (reward_only);
    the same setting without the KL term follows J (leave-one-out, the token sum per reply)."""
    installed("verl")
    common = ["verl", "--set", "algorithm.adv_estimator=rloo", "--set",
              "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum"]
    kl = ["actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_type=k1",
          "actor_rollout_ref.actor.kl_loss_coef=0.1"]
    code, document = conform(tmp_path, *common, *(word for item in kl for word in ("--set", item)))
    objective = by_name(document)["objective, on-policy"]
    assert code == 0 and document["verdict"] == "warn"
    assert objective["status"] == "warn" and "reward_only" in objective["detail"]
    code, document = conform(tmp_path, *common)
    assert by_name(document)["objective, on-policy"]["status"] == "pass"


def test_verl_grpo_with_low_var_kl_reports(tmp_path):
    installed("verl")
    config = tmp_path / "grpo.yaml"
    config.write_text("algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  actor:\n    use_kl_loss: true\n"
                      "    kl_loss_type: low_var_kl\n    kl_loss_coef: 0.04\n")
    code, document = conform(tmp_path, "verl", "--config", str(config))
    assert code == 0 and document["framework"] == "verl"
    assert "verl-low_var_kl-token-mean" in by_name(document)["documented loss, on-policy"]["detail"]


# --- numerics: synthetic losses, each breaking one edge ---------------------------------------------------------

def normalised(eps, row_mean=False, unbiased=True):
    """A GRPO-like loss: (r - group mean) / (group std + eps) on -logp, token mean (or each row's mean)."""
    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        k = int(torch.bincount(group)[0])
        grouped = rewards.view(-1, k)
        adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True, unbiased=unbiased) + eps))
        per_token = -adv.reshape(-1, 1).to(logp.dtype) * logp * mask
        if row_mean:
            return (per_token.sum(-1) / mask.sum(-1)).mean()
        return per_token.sum() / mask.sum()
    return loss_fn


def with_kl(policy, kl):
    def loss_fn(logp, ref_logp, rewards, mask, group, **given):
        return policy(logp, ref_logp, rewards, mask, group, **given) + 0.1 * (kl(logp, ref_logp) * mask).sum() \
            / mask.sum()
    return loss_fn


def float32_k3(logp, ref_logp):
    return kl_estimate(logp.float(), ref_logp.float(), "k3").double()


def clamped_k3(logp, ref_logp):
    return kl_estimate(logp, ref_logp, "k3").clamp(max=10.0)


def exact_k3(logp, ref_logp):
    return kl_estimate(logp, ref_logp, "k3")


def edge(name, loss_fn, documented=None):
    make, mismatch = EDGES[name]
    return edge_check(name, loss_fn, documented, make(), 1e-8, mismatch)


def test_each_edge_passes_the_documented_loss_itself():
    documented = with_kl(normalised(1e-4), exact_k3)
    for name in EDGES:
        if name != SINGLETON:
            check = edge(name, documented, documented)
            assert check.status == "pass" and check.factor in (None, 1.0), check


def test_zero_variance_groups_without_an_eps_fail():
    assert edge("zero-variance groups (every reward 1)", normalised(0.0)).status == "fail"
    assert edge("zero-variance groups (every reward 1)", normalised(1e-4)).status == "pass"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_singleton_group_with_a_nan_std_warns():
    assert edge(SINGLETON, normalised(1e-4, unbiased=True)).status == "warn"      # std of one value: NaN
    assert edge(SINGLETON, normalised(1e-4, unbiased=False)).status == "pass"


@pytest.mark.parametrize("name, broken", [("k3 at tiny log-ratios (+-1e-6)", float32_k3),
                                          ("k3 at large log-ratios (+-20)", clamped_k3)])
def test_k3_edges_warn_on_roundoff_and_a_clamp(name, broken):
    documented = with_kl(normalised(1e-4), exact_k3)
    check = edge(name, with_kl(normalised(1e-4), broken), documented)
    assert check.status == "warn", check


def test_empty_completions_with_a_row_mean_fail():
    check = edge("empty completions", normalised(1e-4, row_mean=True))          # 0 / 0 on the empty rows
    assert check.status == "fail" and "NaN" in check.detail


def test_a_doubled_loss_fails_each_edge_with_factor_2():
    documented = normalised(1e-4)
    check = edge("empty completions", lambda *a, **k: 2 * documented(*a, **k), documented)
    assert check.status == "fail" and abs(check.factor - 2) <= 1e-12


def test_the_std_residue_warns_with_a_tiny_eps():
    tiny, safe = residue_check(normalised(1e-12)), residue_check(normalised(1e-4))
    assert tiny.status == "warn" and tiny.factor >= RESIDUE_WARNING
    assert safe.status == "pass" and safe.factor < 1e-2
