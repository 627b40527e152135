#!/bin/sh
# The pglab command doing what trl_grpo.py does (the right side of docs/lm.md's "From TRL").
# Usage: sh pglab_grpo.sh MODEL_FOLDER prompts.jsonl OUTPUT_FOLDER   (run in this folder: rewards.py is imported from it)
pglab train-lm --model "$1" --prompts "$2" --output-dir "$3" \
  --max-steps 1 --num-iterations 2 --learning-rate 1e-3 --lr-scheduler-type linear \
  --prompts-per-step 4 --num-generations 4 --max-completion-length 8 \
  --temperature 0.9 --top-p 1.0 --ban-eos false --beta 0.04 --kl-in loss \
  --advantage grpo --scale-rewards group --std sample --aggregation token_mean \
  --epsilon 0.2 --max-grad-norm 1.0 --seed 0 --reward rewards:count_letter
