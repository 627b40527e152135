"""Write docs/results/conform_trl_trainer.json: the trainer-level checks of the installed TRL on four loss types.

Usage: .venv/bin/python scripts/conform_trl_trainer.py [OUT_JSON]
"""

import json
import sys
import tempfile
import warnings
from pathlib import Path

import trl
from trl import GRPOConfig

from pglab.conform.checks import verdict
from pglab.conform.trl_trainer import trainer_checks

LAYOUT = {"per_device_train_batch_size": 8, "num_generations": 4, "gradient_accumulation_steps": 2,
          "steps_per_generation": 4, "max_completion_length": 8}
"""The acceptance layout: steps_per_generation 4 with gradient_accumulation_steps 2."""
LOSSES = {"dapo": True, "grpo": False, "bnpo": False, "dr_grpo": False}
"""loss_type -> whether the two-process check runs too."""


def main(out: Path) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for loss, distributed in LOSSES.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = GRPOConfig(output_dir=tmp, use_cpu=True, report_to="none", loss_type=loss, **LAYOUT)
            checks = trainer_checks(config, distributed=distributed)
            rows.append({"loss_type": loss, **LAYOUT, "verdict": verdict(checks),
                         "checks": [c.as_dict() for c in checks]})
            print(loss, verdict(checks), [round(c.factor, 6) for c in checks], flush=True)
    out.write_text(json.dumps({"framework": "trl", "version": trl.__version__, "configs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/results/conform_trl_trainer.json"))
