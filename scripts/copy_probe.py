"""Copy probe: how fast the tool-use agent's GPT-2 learns to copy call arguments, plain or with the previous token.

Clones a 2-layer GPT-2 (``plain``: GPT2LMHeadModel; ``shift``: the previous-token model of
:mod:`pglab.models.shifted_gpt2`; ``shift2``: the same with the last two tokens) on the tool-use corpus of the
full recipe (its size and BPE), Adam at the recipe's rate, batch 32, and every 250 steps prints, on 400 held-out
transcripts (corpus seed 99): the cross-entropy of all policy tokens, that of the digit tokens among them (call
arguments copied digit by digit), and the share of those digits given probability above one half. Several digits
have two candidates in the prompt, so the floor of the digit cross-entropy is above 0.

Run: ``python scripts/copy_probe.py shift 3000 64`` (KIND STEPS WIDTH; about 0.15 s a step on one core).
Output kept in docs/results/tool-agent/copy-probe.txt.
"""

import re
import sys
import time

import torch

from pglab.envs.tooluse import corpus
from pglab.estimators import masked_mean
from pglab.models.default_lm import train_tokenizer
from pglab.sampling.scoring import sequence_log_probs
from pglab.sampling.text_episodes import TextLayout
from pglab.trainers.agent_config import TOOL_AGENT
from pglab.trainers.hf_agent import agent_gpt2, transcripts_batch

torch.set_num_threads(1)
kind, steps, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spec = TOOL_AGENT["full"]
train, test = corpus(spec["corpus"], 0), corpus(400, 99)
texts = ["\n".join([t.prompt, *(f"{c}\n<obs> {o} </obs>" for c, o in zip(t.calls, t.observations))]) for t in train]
tokenizer = train_tokenizer(texts, spec["vocab"], pieces=spec["pieces"])
layout = TextLayout(tokenizer, chat=False, max_obs_tokens=96)
data, held_out = transcripts_batch(layout, train), transcripts_batch(layout, test)
digit = torch.tensor([bool(re.fullmatch(r"\s?\d", tokenizer.decode([i]))) for i in range(len(tokenizer))])
torch.manual_seed(0)
model = agent_gpt2(tokenizer, {**spec, "width": width, "previous_tokens": {"plain": 0, "shift": 1, "shift2": 2}[kind]})
optimizer = torch.optim.Adam(model.parameters(), lr=spec["lr"])
gen = torch.Generator().manual_seed(0)


def evaluate() -> tuple[float, float, float]:
    with torch.no_grad():
        logp = sequence_log_probs(model, held_out)
        policy = held_out.action_mask.bool()
        digits = policy & digit[held_out.ids]
        return float(-logp[policy].mean()), float(-logp[digits].mean()), float((logp[digits] > -0.69).float().mean())


start = time.time()
for step in range(steps + 1):
    if step % 250 == 0:
        ce, digit_ce, right = evaluate()
        print(f"{kind} w{width} step {step}: ce {ce:.3f} digit ce {digit_ce:.3f} digit p>.5 {right:.3f}  "
              f"{time.time() - start:.0f}s", flush=True)
    if step == steps:
        break
    batch = data.select(torch.randint(data.batch_size, (32,), generator=gen))
    loss = -masked_mean(sequence_log_probs(model, batch), batch.action_mask)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
