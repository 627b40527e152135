"""Trainer level (TRL) on a trainer without the rollout_func seam: its generation method is overridden instead.

Releases before rollout_func (and those with the dapo normaliser counted over the whole generation) are stood in
for by a GRPOTrainer subclass whose __init__ takes no rollout_func: the installed TRL's gradient still passes, and
the old normaliser fails the same dapo config the acceptance names (steps_per_generation 4, accumulation 2).
"""

import warnings

import pytest

pytest.importorskip("trl")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from pglab.conform.trl_trainer import completion_seam, measure_each, settings  # noqa: E402


class WithoutRolloutSeam(GRPOTrainer):
    """A GRPOTrainer whose constructor has no rollout_func (as TRL before 0.25)."""

    def __init__(self, model, reward_funcs, args, train_dataset, processing_class):
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train_dataset,
                         processing_class=processing_class)


class OldDapoNormaliser(WithoutRolloutSeam):
    """dapo divided by the generation batch's token count (TRL 0.22 to 1.9): x accumulation / steps_per_generation."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, inputs) * self.current_gradient_accumulation_steps \
            / self.args.steps_per_generation


class NoSeam:
    """Neither seam."""


@pytest.fixture(scope="module")
def dapo(tmp_path_factory) -> GRPOConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GRPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), use_cpu=True, per_device_train_batch_size=4,
                          num_generations=4, gradient_accumulation_steps=2, steps_per_generation=4,
                          max_completion_length=8, report_to="none", loss_type="dapo")


def test_the_seam_is_found_by_introspection():
    assert completion_seam(GRPOTrainer) == "rollout_func"
    assert completion_seam(WithoutRolloutSeam) == "generate"
    with pytest.raises(ValueError, match="no seam fixes its completions"):
        completion_seam(NoSeam)


def test_without_rollout_func_the_dapo_config_is_measured_through_the_generation_method(dapo):
    setting = settings(dapo, distributed=False)[0]
    assert setting.name.startswith("as configured") and "steps_per_generation 4" in setting.name
    documented, old = measure_each(dapo, setting, [WithoutRolloutSeam, OldDapoNormaliser])
    assert documented.status == "pass" and documented.factor == pytest.approx(1.0, rel=1e-5)
    assert old.status == "fail" and old.factor == pytest.approx(0.5, rel=1e-5)
