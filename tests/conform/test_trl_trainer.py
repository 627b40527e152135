"""Trainer level (TRL): a real GRPOTrainer's per-step gradient against the documented normalisation.

The installed TRL passes every setting; each negative control is a GRPOTrainer subclass that breaks exactly one
invariance (the synthetic framework) and fails the check for that invariance with the factor it forces.
"""

import warnings

import pytest

pytest.importorskip("trl")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from pglab.conform.trl_trainer import Setting, enumerable_batch, measure, settings, tolerance, trainer_checks  # noqa: E402


def config(tmp_path, **changes) -> GRPOConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GRPOConfig(**{"output_dir": str(tmp_path), "use_cpu": True, "per_device_train_batch_size": 4,
                             "num_generations": 4, "gradient_accumulation_steps": 1, "steps_per_generation": 1,
                             "max_completion_length": 8, "report_to": "none", "loss_type": "dapo"} | changes)


class AccumulationUnscaled(GRPOTrainer):
    """Forgets to divide each micro-batch's loss by gradient_accumulation_steps."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, inputs) * self.current_gradient_accumulation_steps


class GenerationWindow(GRPOTrainer):
    """dapo's token count over the whole generation, not one accumulation window (the normaliser without G / S)."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, inputs) * self.current_gradient_accumulation_steps \
            / self.args.steps_per_generation


class MicroBatchScaled(GRPOTrainer):
    """Scales the loss with per_device_train_batch_size (a sum over the micro-batch's rows, relative to 4)."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, inputs) * self.args.per_device_train_batch_size / 4


class StepSpansGenerations(GRPOTrainer):
    """Counts tokens over one generation even when an optimizer step spans several (gradient_accumulation_steps
    above steps_per_generation): x steps_per_generation / accumulation there, exact otherwise."""

    def _compute_loss(self, model, inputs):
        spans = self.args.steps_per_generation / self.current_gradient_accumulation_steps
        return super()._compute_loss(model, inputs) * min(1.0, spans)


class ReuseHalved(GRPOTrainer):
    """Halves the loss on a reused generation (iterations after the first)."""

    def _compute_loss(self, model, inputs):
        reused = (self._step // self.args.steps_per_generation) % self.num_iterations > 0
        return super()._compute_loss(model, inputs) * (0.5 if reused else 1.0)


class AdvantagesMisaligned(GRPOTrainer):
    """Advantages that do not follow their completions when the rows move (rolled by one row)."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, {**inputs, "advantages": inputs["advantages"].roll(1, 0)})


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    return trainer_checks(config(tmp_path_factory.mktemp("trl")))


def test_the_installed_trl_conforms_in_every_setting(checks):
    assert [c.name for c in checks][0].startswith("as configured")
    assert len(checks) == 7
    for check in checks:
        assert check.status == "pass", check
        assert abs(check.factor - 1) < 1e-5 and "of the token mean" in check.detail


def test_the_tolerance_is_float32_roundoff_and_far_below_any_normalisation_slip():
    assert 1e-6 < tolerance(8) < 1e-4
    assert tolerance(64) > tolerance(8)


def test_the_enumerable_batch_has_distinct_completions_ending_in_end_of_text():
    batch = enumerable_batch(3, 4)
    assert len(batch.row_of()) == 12 and (batch.completion_ids[:, -1] == batch.completion_ids[0, -1]).all()


def setting_named(cfg, fragment: str) -> Setting:
    return next(s for s in settings(cfg, distributed=False) if fragment in s.name)


@pytest.mark.parametrize(("broken", "fragment", "factor"), [
    (AccumulationUnscaled, "gradient_accumulation_steps 2, steps_per_generation 2", 2.0),
    (GenerationWindow, "gradient_accumulation_steps 1, steps_per_generation 2", 0.5),
    (StepSpansGenerations, "gradient_accumulation_steps 2, steps_per_generation 1", 0.5),
    (MicroBatchScaled, "(micro-batch)", 0.5),
    (ReuseHalved, "generation reuse", 0.5),
])
def test_a_trainer_that_breaks_one_invariance_fails_its_check_with_the_factor(tmp_path, broken, fragment, factor):
    cfg = config(tmp_path)
    check = measure(cfg, setting_named(cfg, fragment), broken)
    assert check.status == "fail" and check.factor == pytest.approx(factor, rel=1e-5)
    assert check.detail.startswith(f"{factor:.3f} of the token mean")


def test_the_old_generation_window_normaliser_passes_where_steps_per_generation_equals_accumulation(tmp_path):
    cfg = config(tmp_path)
    assert measure(cfg, setting_named(cfg, "as configured"), GenerationWindow).status == "pass"


def test_advantages_that_do_not_follow_their_rows_fail_the_sample_order_check(tmp_path):
    cfg = config(tmp_path)
    check = measure(cfg, setting_named(cfg, "sample order"), AdvantagesMisaligned)
    residual = float(check.detail.split("direction residual ")[1].split(";")[0])
    assert check.status == "fail" and residual > 0.1


def test_a_loss_type_without_a_documented_normalisation_is_refused(tmp_path):
    cfg = config(tmp_path)
    object.__setattr__(cfg, "loss_type", "made_up")
    with pytest.raises(ValueError, match="pass one of"):
        trainer_checks(cfg)
