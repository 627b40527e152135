"""Trainer level (TRL), two processes: torchrun with gloo on the CPU, the same global batch as one process."""

import warnings

import pytest

pytest.importorskip("trl")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from pglab.conform.trl_trainer import measure_each, settings  # noqa: E402

pytestmark = pytest.mark.integration


class ProcessesUnscaled(GRPOTrainer):
    """dapo's global token count not divided by the processes (DDP's mean then halves the gradient)."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, inputs) / self.accelerator.num_processes


def test_two_processes_give_the_documented_gradient_unless_the_normaliser_ignores_them(tmp_path):
    """One torchrun launch runs both trainers on the same batch and model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4, num_generations=4,
                         gradient_accumulation_steps=1, steps_per_generation=1, max_completion_length=8,
                         report_to="none", loss_type="dapo")
    setting = settings(cfg, distributed=True)[-1]
    assert setting.processes == 2
    documented, unscaled = measure_each(cfg, setting, [GRPOTrainer, ProcessesUnscaled])
    assert documented.status == "pass" and documented.factor == pytest.approx(1.0, rel=1e-5)
    assert unscaled.status == "fail" and unscaled.factor == pytest.approx(0.5, rel=1e-5)
