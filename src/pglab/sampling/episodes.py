"""Multi-turn tool episodes as token sequences: the layout, the lockstep episode collector, statistics.

An episode is laid out as ``<start> prompt`` (owner prompt), then for each call the call's words
(owner policy) followed, unless the call ended the episode, by ``<obs> answer </obs>`` (owner tool;
the answer is cut to ``max_obs_tokens`` words). Scripted demonstrations (:func:`encode_episode`)
and the policy's own episodes (:func:`collect_episodes`, through any :class:`TokenPolicy`) use
this same layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from pglab.batch import POLICY, PROMPT, TOOL, TokenBatch
from pglab.envs.bugfix import BugFixEnv, Episode, Task, parse_call
from pglab.models.policy import TokenPolicy, as_policy
from pglab.models.tokenizer import Tokenizer

MAX_CALL_TOKENS = 8
"""Default cap on the words of one call (the longest valid call has 4)."""
MAX_OBS_TOKENS = 64
"""Default cap on the words of one tool answer (a ``read`` of the longest source has about 60)."""


def prompt_tokens(tokenizer: Tokenizer, text: str) -> list[int]:
    """``<start>`` followed by the words of the first observation."""
    return [tokenizer.start_id, *tokenizer.encode(text)]


def tool_tokens(tokenizer: Tokenizer, text: str, max_obs_tokens: int = MAX_OBS_TOKENS) -> list[int]:
    """``<obs> words </obs>``, the words cut to ``max_obs_tokens``."""
    return [tokenizer.obs_id, *tokenizer.encode(text)[:max_obs_tokens], tokenizer.end_obs_id]


def encode_episode(tokenizer: Tokenizer, episode: Episode,
                   max_obs_tokens: int = MAX_OBS_TOKENS) -> tuple[list[int], list[int]]:
    """A played (e.g. scripted) episode -> (ids, owner) in the episode layout."""
    ids = prompt_tokens(tokenizer, episode.prompt)
    owner = [PROMPT] * len(ids)
    for k, (call, observation) in enumerate(zip(episode.calls, episode.observations)):
        words = tokenizer.encode(call)
        ids += words
        owner += [POLICY] * len(words)
        if k < len(episode.calls) - 1:
            answer = tool_tokens(tokenizer, observation, max_obs_tokens)
            ids += answer
            owner += [TOOL] * len(answer)
    return ids, owner


def collate(sequences: Sequence[tuple[list[int], list[int]]], rewards: Sequence[float], pad_id: int, *,
            group: Sequence[int] | None = None, logp: Sequence[list[float]] | None = None,
            info: list[dict[str, Any]] | None = None) -> TokenBatch:
    """(ids, owner) lists of B episodes -> a right-padded TokenBatch; action_mask = (owner == policy)."""
    B, T = len(sequences), max(len(ids) for ids, _ in sequences)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    owner = torch.zeros((B, T), dtype=torch.long)
    logp_old = torch.zeros((B, T)) if logp is not None else None
    for b, (row_ids, row_owner) in enumerate(sequences):
        ids[b, : len(row_ids)] = torch.tensor(row_ids)
        owner[b, : len(row_owner)] = torch.tensor(row_owner)
        if logp_old is not None:
            logp_old[b, : len(logp[b])] = torch.tensor(logp[b])
    return TokenBatch(ids=ids, attention_mask=(owner != 0).long(), action_mask=(owner == POLICY).float(),
                      owner=owner, group=torch.as_tensor(list(group) if group is not None else range(B)),
                      rewards=torch.as_tensor(list(rewards), dtype=torch.float32), logp_old=logp_old,
                      info=info or [])


def sample_tokens(logits: torch.Tensor, generator: torch.Generator,
                  temperature: float = 1.0) -> tuple[list[int], list[float]]:
    """One token per row of logits [n, V] at ``temperature`` -> (tokens, their log-probabilities)."""
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    tokens = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
    return tokens.tolist(), logp.gather(1, tokens[:, None])[:, 0].tolist()


@torch.no_grad()
def collect_episodes(policy: TokenPolicy | torch.nn.Module, envs: Sequence[BugFixEnv], tokenizer: Tokenizer,
                     generator: torch.Generator, *, tasks: Sequence[Task | str] | None = None,
                     max_call_tokens: int = MAX_CALL_TOKENS, max_obs_tokens: int = MAX_OBS_TOKENS,
                     temperature: float = 1.0) -> TokenBatch:
    """Play one episode in every env, all in lockstep, sampling calls from ``policy`` -> TokenBatch [B, T].

    Env b is reset on ``tasks[b]`` (else on a task drawn by its own RNG). Each turn, every running
    episode samples one call, token by token, until ``</call>`` or ``max_call_tokens``; the envs
    answer, and the answers of the episodes that go on are prefilled together. The policy's
    incremental decoding (:meth:`TokenPolicy.prefixes`, a KV cache) holds every prefix, and
    finished rows leave it. ``logp_old`` holds the sampling log-probabilities; ``info[b]`` the
    env's final info, the prompt and the answers.
    """
    policy = as_policy(policy)
    model = policy.module
    was_training = model.training
    model.eval()
    n = len(envs)
    prompts = [env.reset(options=None if tasks is None else {"task": tasks[b]})[0] for b, env in enumerate(envs)]
    sequences = [prompt_tokens(tokenizer, p) for p in prompts]
    owners = [[PROMPT] * len(s) for s in sequences]
    logps = [[0.0] * len(s) for s in sequences]
    longest = max(map(len, sequences)) + max(env.budget for env in envs) * (max_call_tokens + max_obs_tokens + 2)
    if policy.max_length is not None and longest > policy.max_length:
        raise ValueError(f"episodes may reach {longest} tokens but the policy takes {policy.max_length}; "
                         "lower max_obs_tokens or max_call_tokens, or use a model with more positions")
    prefixes = policy.prefixes(sequences)
    infos: list[dict[str, Any]] = [{} for _ in range(n)]
    answers: list[list[str]] = [[] for _ in range(n)]
    rewards = [0.0] * n
    alive = list(range(n))
    last = prefixes.extend(alive, sequences)
    while alive:
        calls: dict[int, list[int]] = {e: [] for e in alive}
        writing, logits = list(alive), last
        for k in range(max_call_tokens):
            tokens, token_logps = sample_tokens(logits, generator, temperature)
            for e, t, lp in zip(writing, tokens, token_logps):
                calls[e].append(t)
                sequences[e].append(t)
                owners[e].append(POLICY)
                logps[e].append(lp)
            going = [j for j, t in enumerate(tokens) if t != tokenizer.end_call_id]
            if not going or k == max_call_tokens - 1:
                break
            writing = [writing[j] for j in going]
            logits = prefixes.extend(writing, [[tokens[j]] for j in going])
        going_on, chunks = [], []
        for e in alive:
            observation, reward, terminated, truncated, info = envs[e].step(tokenizer.decode(calls[e]))
            answers[e].append(observation)
            if terminated or truncated:
                rewards[e], infos[e] = reward, info
                continue
            answer = tool_tokens(tokenizer, observation, max_obs_tokens)
            sequences[e] += answer
            owners[e] += [TOOL] * len(answer)
            logps[e] += [0.0] * len(answer)
            going_on.append(e)
            chunks.append([calls[e][-1], *answer])        # the call's last token is not in the cache yet
        prefixes.keep(going_on)
        alive = going_on
        if alive:
            last = prefixes.extend(alive, chunks)
    model.train(was_training)
    names = [info["task"] for info in infos]
    group = [sorted(set(names)).index(name) for name in names]
    info = [dict(i, prompt=p, observations=a) for i, p, a in zip(infos, prompts, answers)]
    return collate(list(zip(sequences, owners)), rewards, tokenizer.pad_id, group=group, logp=logps, info=info)


def episode_stats(batch: TokenBatch) -> dict[str, float]:
    """Mean reward, pass rate, valid-call fraction, submit rate, turns and policy tokens per episode."""
    info, n = batch.info, batch.batch_size
    turns = sum(i["n_turns"] for i in info)
    return {
        "reward": float(batch.rewards.mean()),
        "pass_rate": sum(bool(i["submitted"] and i["hidden_pass"]) for i in info) / n,
        "valid_calls": 1 - sum(i["n_invalid"] for i in info) / turns,
        "submit_rate": sum(bool(i["submitted"]) for i in info) / n,
        "turns": turns / n,
        "action_tokens": float(batch.action_mask.sum()) / n,
    }


def call_name(call: str) -> str:
    """The short name of a call: ``'<call> edit fix_init </call>'`` -> ``'fix_init'``, else the tool or 'malformed'."""
    parsed = parse_call(call)
    return (parsed[1] or parsed[0]) if parsed else "malformed"


def render_episode(info: dict[str, Any], reward: float) -> str:
    """One episode as text: the prompt, then each call with the tool's answer."""
    lines = [f"reward {reward:g} | task {info['task']} | stop {info['stop']}", f"> {info['prompt']}"]
    for call, answer in zip(info["actions"], info["observations"]):
        lines.append(f"{call}")
        lines += [f"    {line}" for line in answer.splitlines()]
    return "\n".join(lines)


__all__ = [
    "MAX_CALL_TOKENS", "MAX_OBS_TOKENS", "call_name", "collate", "collect_episodes", "encode_episode", "episode_stats",
    "prompt_tokens", "render_episode", "sample_tokens", "tool_tokens",
]
