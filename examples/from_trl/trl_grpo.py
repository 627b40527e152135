"""TRL's GRPOTrainer on prompts.jsonl with the reward of rewards.py (the left side of docs/lm.md's "From TRL").

python trl_grpo.py MODEL_FOLDER prompts.jsonl OUTPUT_FOLDER
"""

import sys

from datasets import Dataset
from rewards import count_letter
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer


def config(output_dir: str, max_steps: int = 2) -> GRPOConfig:
    return GRPOConfig(
        output_dir=output_dir, max_steps=max_steps, learning_rate=1e-3, lr_scheduler_type="linear",
        per_device_train_batch_size=16, num_generations=4, max_completion_length=8,
        temperature=0.9, top_p=1.0, top_k=0, beta=0.04, loss_type="bnpo", scale_rewards="group",
        num_iterations=2, epsilon=0.2, max_grad_norm=1.0, seed=0,
        gradient_checkpointing=False, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        logging_steps=1, disable_dropout=True, dataloader_num_workers=0)


def trainer(model: str, data: str, output_dir: str, max_steps: int = 2) -> GRPOTrainer:
    return GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model), reward_funcs=count_letter,
                       args=config(output_dir, max_steps), train_dataset=Dataset.from_json(data),
                       processing_class=AutoTokenizer.from_pretrained(model))


if __name__ == "__main__":
    trainer(*sys.argv[1:4]).train()
