"""Multi-turn episodes of a Hugging Face tokenizer's text, token in and token out.

The policy writes text: each assistant turn is sampled token by token until its decoded text
holds the closing text (``</call>``) or the turn reaches its token cap, whichever comes first;
end-of-text ends the episode (after the environment has answered that last turn). The decoded
turn goes to the environment as it is. The invariant
that makes the gradient right: **the ids the update scores are exactly the ids the policy
sampled**. Each observation is tokenised on its own and appended as ids (owner tool, mask 0); the
transcript is never decoded and tokenised again, which with a byte-level BPE would merge tokens
across turn boundaries into ids the policy never sampled.

With a chat template (``TextLayout(chat=True)``, the default when the tokenizer has one) the task
is the user turn, each call an assistant turn and each observation a tool turn (a user turn when
the template has no tool role); the ids appended after a call are the template's text between
the end of the sampled call and the start of the next assistant turn, tokenised alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pglab.batch import POLICY, PROMPT, TOOL, TokenBatch
from pglab.envs.text import TextTurnEnv, check_step
from pglab.models.policy import TokenPolicy
from pglab.sampling.episodes import collate, sample_tokens

CLOSING = "</call>"


class TextLayout:
    """Token ids of a text-turn episode for one HF tokenizer: the prompt, and what follows each call."""

    def __init__(self, tokenizer: Any, chat: bool | None = None, max_obs_tokens: int = 128):
        self.tokenizer, self.max_obs_tokens = tokenizer, max_obs_tokens
        self.chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat
        if self.chat and not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; pass chat=False (plain text turns)")
        self.tool_role = "tool" if self.chat and self._renders("tool") else "user"

    def _renders(self, role: str) -> bool:
        try:
            self.tokenizer.apply_chat_template([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                                {"role": role, "content": "c"}], tokenize=False)
            return True
        except Exception:  # noqa: BLE001 - a template may raise anything for a role it does not know
            return False

    def _render(self, messages: list[dict], generation: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids before the first call: the chat-rendered user turn and generation prompt, or BOS + text."""
        if self.chat:
            return self.encode(self._render([{"role": "user", "content": prompt}], True))
        bos = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
        return bos + self.encode(prompt + "\n")

    def observation_ids(self, messages: list[dict], call: str, observation: str) -> list[int]:
        """The ids after the sampled call ``call``: the observation (cut to max_obs_tokens) and the next turn's start.

        ``messages`` is the conversation before the call (the user turn, then calls and observations).
        """
        observation = self.tokenizer.decode(self.encode(observation)[:self.max_obs_tokens])
        if not self.chat:
            return self.encode("\n<obs> " + observation + " </obs>\n")
        before = self._render(messages, True) + call
        after = self._render(messages + [{"role": "assistant", "content": call},
                                         {"role": self.tool_role, "content": observation}], True)
        if after.startswith(before):
            return self.encode(after[len(before):])
        # the template rewrites the assistant's text (strips it, say): close the turn with the template's own
        # end of turn, then the tool turn as the template renders it alone
        closing = self._render([{"role": "assistant", "content": ""}], False)
        tool = self._render([{"role": self.tool_role, "content": observation}], True)
        return self.encode(closing[-len(closing.rstrip()) or None:] + tool) if closing else self.encode(tool)


@torch.no_grad()
def collect_text_episodes(policy: TokenPolicy, layout: TextLayout, envs: Sequence[TextTurnEnv],
                          seeds: Sequence[int], generator: torch.Generator, *, max_call_tokens: int = 32,
                          max_turns: int = 16, closing: str = CLOSING, temperature: float = 1.0,
                          group: Sequence[int] | None = None) -> TokenBatch:
    """One episode in every env (env b reset with ``seeds[b]``), all in lockstep -> TokenBatch [B, T].

    ``rewards`` [B] is each episode's summed reward; ``info[b]`` holds the env's last info, the
    prompt, the calls (as text and as the sampled ids) and observations, each call's stop (``closing``, ``cap`` or
    ``eos``) and the episode's end (``env``, ``eos`` or ``turns``). Rows with equal seeds share a
    group unless ``group`` is given.
    """
    tokenizer = layout.tokenizer
    eos, model = tokenizer.eos_token_id, policy.module
    was_training = model.training
    model.eval()
    n = len(envs)
    prompts = [env.reset(int(seed)) for env, seed in zip(envs, seeds)]
    sequences = [layout.prompt_ids(p) for p in prompts]
    owners = [[PROMPT] * len(s) for s in sequences]
    logps = [[0.0] * len(s) for s in sequences]
    messages: list[list[dict]] = [[{"role": "user", "content": p}] for p in prompts]
    info: list[dict[str, Any]] = [{"prompt": p, "calls": [], "call_ids": [], "observations": [], "stops": [],
                                   "end": None} for p in prompts]
    rewards = [0.0] * n
    prefixes = policy.prefixes(sequences)
    alive = list(range(n))
    logits = prefixes.extend(alive, sequences)
    while alive:
        calls: dict[int, list[int]] = {e: [] for e in alive}
        stops: dict[int, str] = {}
        writing = list(alive)
        for k in range(max_call_tokens):
            tokens, token_logps = sample_tokens(logits, generator, temperature)
            for e, t, lp in zip(writing, tokens, token_logps):
                calls[e].append(t)
                sequences[e].append(t)
                owners[e].append(POLICY)
                logps[e].append(lp)
                if t == eos:
                    stops[e] = "eos"
                elif closing in tokenizer.decode(calls[e]):
                    stops[e] = "closing"
                elif k == max_call_tokens - 1:
                    stops[e] = "cap"
            writing = [e for e in writing if e not in stops]
            if not writing:
                break
            logits = prefixes.extend(writing, [[calls[e][-1]] for e in writing])
        going_on, chunks = [], []
        for e in alive:
            text = tokenizer.decode([t for t in calls[e] if t != eos])
            info[e]["calls"].append(text)
            info[e]["call_ids"].append(list(calls[e]))
            info[e]["stops"].append(stops[e])
            observation, reward, done, env_info = check_step(envs[e].step(text), f"{type(envs[e]).__name__}.step")
            rewards[e] += reward
            info[e].update(env_info)
            info[e]["observations"].append(observation)
            if done or stops[e] == "eos" or len(info[e]["calls"]) >= max_turns:
                info[e]["end"] = "env" if done else "eos" if stops[e] == "eos" else "turns"
                continue
            answer = layout.observation_ids(messages[e], text, observation)
            messages[e] += [{"role": "assistant", "content": text}, {"role": layout.tool_role, "content": observation}]
            sequences[e] += answer
            owners[e] += [TOOL] * len(answer)
            logps[e] += [0.0] * len(answer)
            going_on.append(e)
            chunks.append([calls[e][-1], *answer])           # the call's last token is not in the cache yet
        if policy.max_length is not None and any(len(sequences[e]) + max_call_tokens > policy.max_length
                                                 for e in going_on):
            for e in [e for e in going_on if len(sequences[e]) + max_call_tokens > policy.max_length]:
                info[e]["end"] = "length"
            keep = [j for j, e in enumerate(going_on) if info[e]["end"] is None]
            going_on, chunks = [going_on[j] for j in keep], [chunks[j] for j in keep]
        prefixes.keep(going_on)
        alive = going_on
        if alive:
            logits = prefixes.extend(alive, chunks)
    model.train(was_training)
    if group is None:
        order = sorted(set(int(s) for s in seeds))
        group = [order.index(int(s)) for s in seeds]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos if eos is not None else 0)
    return collate(list(zip(sequences, owners)), rewards, pad, group=group, logp=logps, info=info)


def encode_text_episode(layout: TextLayout, prompt: str, calls: Sequence[str],
                        observations: Sequence[str]) -> tuple[list[int], list[int]]:
    """A played (e.g. scripted) episode -> (ids, owner) in the layout the collector produces.

    Each call is tokenised alone (the ids a policy that writes the call would sample), each
    observation after it through :meth:`TextLayout.observation_ids`; none follows the last call.
    """
    ids = layout.prompt_ids(prompt)
    owner = [PROMPT] * len(ids)
    messages = [{"role": "user", "content": prompt}]
    for k, (call, observation) in enumerate(zip(calls, observations)):
        words = layout.encode(call)
        ids += words
        owner += [POLICY] * len(words)
        if k < len(calls) - 1:
            answer = layout.observation_ids(messages, call, observation)
            messages += [{"role": "assistant", "content": call}, {"role": layout.tool_role, "content": observation}]
            ids += answer
            owner += [TOOL] * len(answer)
    return ids, owner


def text_episode_stats(batch: TokenBatch) -> dict[str, float]:
    """Mean reward and turns, the shares of calls closed by the closing text, cut at the cap, and of episodes
    ended by end-of-text; BugFixEnv's pass rate, valid calls and submit rate when the infos carry them."""
    info, n = batch.info, batch.batch_size
    stops = [s for i in info for s in i["stops"]]
    turns = sum(len(i["calls"]) for i in info)
    stats = {"reward": float(batch.rewards.mean()), "turns": turns / n,
             "closed_calls": stops.count("closing") / len(stops), "capped_calls": stops.count("cap") / len(stops),
             "eos_ends": sum(i["end"] == "eos" for i in info) / n, "action_tokens": float(batch.action_mask.sum()) / n}
    if all("n_invalid" in i for i in info):
        stats["valid_calls"] = 1 - sum(i["n_invalid"] for i in info) / turns
        stats["pass_rate"] = sum(bool(i["submitted"] and i["hidden_pass"]) for i in info) / n
        stats["submit_rate"] = sum(bool(i["submitted"]) for i in info) / n
    return stats


__all__ = ["CLOSING", "TextLayout", "collect_text_episodes", "encode_text_episode", "text_episode_stats"]
