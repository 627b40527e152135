"""pglab conform reads each framework's own config format: defaults, --set overrides, a file, and bad keys refused
in one line that names the close ones."""

import pytest

from pglab.conform import frameworks
from pglab.conform.configs import read_config
from pglab.runtime.options import SettingsError


def installed(name):
    found = frameworks.LOADERS[name]()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def test_trl_defaults_file_and_set(tmp_path):
    installed("trl")
    path = tmp_path / "grpo.yaml"
    path.write_text("loss_type: dapo\nbeta: 0.04\nsteps_per_generation: 4\ngradient_accumulation_steps: 2\n")
    config = read_config("trl", path, {"epsilon_high": "0.28"})
    args = config.native
    assert type(args).__name__ == "GRPOConfig" and config.trainer == "GRPOTrainer"
    assert (args.loss_type, args.beta, args.steps_per_generation, args.epsilon_high) == ("dapo", 0.04, 4, 0.28)
    assert args.epsilon == 0.2 and args.scale_rewards == "group"          # TRL's own defaults, untouched
    assert config.beta == 0.04
    rloo = read_config("trl", None, {}, trainer="rloo")
    assert type(rloo.native).__name__ == "RLOOConfig" and rloo.beta == rloo.native.beta


def test_trl_unknown_key_names_the_close_one(tmp_path):
    installed("trl")
    with pytest.raises(SettingsError, match="no field 'loss_typ'.*did you mean loss_type"):
        read_config("trl", None, {"loss_typ": "dapo"})
    path = tmp_path / "bad.json"
    path.write_text('{"num_generation": 4}')
    with pytest.raises(SettingsError, match="num_generations"):
        read_config("trl", path, {})


def test_verl_merges_over_its_shipped_defaults(tmp_path):
    installed("verl")
    path = tmp_path / "verl.yaml"
    path.write_text("algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  actor:\n    use_kl_loss: true\n")
    config = read_config("verl", path, {"actor_rollout_ref.actor.kl_loss_coef": "0.02"})
    actor = config.native["actor_rollout_ref"]["actor"]
    assert config.native["algorithm"]["adv_estimator"] == "grpo"
    assert actor["kl_loss_type"] == "low_var_kl" and actor["loss_agg_mode"] == "token-mean"   # verl's defaults
    assert config.beta == 0.02 and "_generated_ppo_trainer.yaml" in config.source
    with pytest.raises(SettingsError, match="loss_agg_mod.*did you mean loss_agg_mode"):
        read_config("verl", None, {"actor_rollout_ref.actor.loss_agg_mod": "token-mean"})


def test_openrlhf_reads_its_own_arguments(tmp_path):
    installed("openrlhf")
    path = tmp_path / "args.txt"
    path.write_text("--algo.advantage.estimator group_norm  # GRPO\n--algo.kl.use_loss --algo.kl.estimator k3\n")
    config = read_config("openrlhf", path, {"algo.kl.init_coef": "0.05", "actor.dual_clip": "3"})
    args = config.native
    assert (args.algo.advantage.estimator, args.algo.kl.use_loss, args.algo.kl.estimator) == ("group_norm", True, "k3")
    assert config.beta == 0.05 and args.actor.dual_clip == 3.0
    assert args.actor.eps_clip_low_high == (0.2, 0.2)                       # the script's own default, filled in
    with pytest.raises(SettingsError, match="did you mean --algo.advantage.estimator"):
        read_config("openrlhf", None, {"algo.advantage.estimatr": "rloo"})
