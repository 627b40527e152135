"""Multi-turn tool episodes as token sequences: the one lockstep collector over a layout, TinyAgent's word
layout, the episode log, statistics.

A layout says how an episode becomes token ids: the prompt's ids, where a sampled call ends, the
call's text, and the ids appended after it (the environment's observation). Two layouts exist:
:class:`WordLayout` (TinyAgent's words: ``<start> prompt``, each call's words, ``<obs> answer </obs>``)
and :class:`~pglab.sampling.text_episodes.TextLayout` (a Hugging Face tokenizer's text, with or
without a chat template). :func:`collect_episodes` plays a batch of episodes of any text-turn
environment (:mod:`pglab.envs.text`) in lockstep through either. The ids the update scores are
exactly the ids the policy sampled: observations are tokenised on their own and appended as ids,
the transcript is never decoded and tokenised again.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from pglab.batch import POLICY, PROMPT, TOOL, AllowedIds, TokenBatch
from pglab.envs.bugfix import Episode, EpisodeRecord, parse_call, record_stats
from pglab.envs.text import TextTurnEnv, check_step
from pglab.models.policy import Prefixes, TokenPolicy, as_policy
from pglab.models.tokenizer import Tokenizer
from pglab.runtime.options import SettingsError
from pglab.sampling.call_grammar import AllowedTable, CallGrammar

MAX_CALL_TOKENS = 8
"""Default cap on the words of one call (the longest valid call has 4)."""
MAX_OBS_TOKENS = 64
"""Default cap on the words of one tool answer (a ``read`` of the longest source has about 60)."""
MAX_TURNS = 16
"""Default cap on the calls of one episode (BugFixEnv's budget, 6, ends its episodes first)."""


class Layout(Protocol):
    """How an episode becomes token ids, for :func:`collect_episodes`. A layout may also have ``grammar(prompt)``
    and ``shown(observation)`` (TextLayout's constrained calls): each episode then samples only the ids its
    :class:`~pglab.sampling.call_grammar.CallGrammar` allows, and the batch records them."""

    max_call_tokens: int
    """The most tokens one call may take."""
    pad_id: int
    """The id that right-pads a batch."""
    tool_role: str
    """The role of an observation in the conversation (``tool``, or ``user`` for a template without one)."""

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids before the first call."""
        ...

    def call_stop(self, ids: list[int]) -> str | None:
        """Why the call ``ids`` (sampled so far) ends: closing, eos or cap; None while it goes on."""
        ...

    def call_text(self, ids: list[int]) -> str:
        """The text of a sampled call, as the environment receives it."""
        ...

    def observation_ids(self, messages: list[dict], call: str, observation: str) -> list[int]:
        """The ids appended after the call ``call`` (``messages``: the conversation before it)."""
        ...


def prompt_tokens(tokenizer: Tokenizer, text: str) -> list[int]:
    """``<start>`` followed by the words of the first observation."""
    return [tokenizer.start_id, *tokenizer.encode(text)]


def tool_tokens(tokenizer: Tokenizer, text: str, max_obs_tokens: int = MAX_OBS_TOKENS) -> list[int]:
    """``<obs> words </obs>``, the words cut to ``max_obs_tokens``."""
    return [tokenizer.obs_id, *tokenizer.encode(text)[:max_obs_tokens], tokenizer.end_obs_id]


class WordLayout:
    """TinyAgent's layout: ``<start> prompt`` (owner prompt), each call's words (owner policy), and after every
    call but the last ``<obs> answer </obs>`` (owner tool; the answer cut to ``max_obs_tokens`` words)."""

    tool_role = "tool"

    def __init__(self, tokenizer: Tokenizer, max_call_tokens: int = MAX_CALL_TOKENS,
                 max_obs_tokens: int = MAX_OBS_TOKENS):
        self.tokenizer, self.max_call_tokens, self.max_obs_tokens = tokenizer, max_call_tokens, max_obs_tokens
        self.pad_id = tokenizer.pad_id

    def prompt_ids(self, prompt: str) -> list[int]:
        return prompt_tokens(self.tokenizer, prompt)

    def call_stop(self, ids: list[int]) -> str | None:
        """closing at ``</call>``, cap at max_call_tokens words."""
        if ids[-1] == self.tokenizer.end_call_id:
            return "closing"
        return "cap" if len(ids) >= self.max_call_tokens else None

    def call_text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def observation_ids(self, messages: list[dict], call: str, observation: str) -> list[int]:
        return tool_tokens(self.tokenizer, observation, self.max_obs_tokens)


def encode_episode(tokenizer: Tokenizer, episode: Episode,
                   max_obs_tokens: int = MAX_OBS_TOKENS) -> tuple[list[int], list[int]]:
    """A played (e.g. scripted) episode -> (ids, owner) in the word layout."""
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


@dataclass
class EpisodeLog:
    """What happened in one collected episode; ``TokenBatch.info`` holds one per row."""

    prompt: str
    """The first observation (the task)."""
    calls: list[str] = field(default_factory=list)
    """Each call's text, as the environment received it."""
    call_ids: list[list[int]] = field(default_factory=list)
    """Each call's sampled ids."""
    stops: list[str] = field(default_factory=list)
    """How each call ended: closing (the layout's closing token or text), cap (max_call_tokens) or eos."""
    call_ends: list[int] = field(default_factory=list)
    """Each call's last position in the row (where a trainer puts a cost of the call itself)."""
    observations: list[str] = field(default_factory=list)
    """The environment's answer to each call."""
    end: str | None = None
    """How the episode ended: env (done), eos, turns (max_turns) or length (the policy's max_length)."""
    info: dict[str, Any] = field(default_factory=dict)
    """The environment's info, merged over the episode's steps."""

    @property
    def record(self) -> EpisodeRecord | None:
        """BugFixEnv's typed record of the episode; None for another environment."""
        return EpisodeRecord.of(self.info)


@dataclass
class _Playing:
    """One episode being played: its ids, owners and sampling log-probs so far, its log and conversation."""

    ids: list[int]
    """Every id of the row so far."""
    owner: list[int]
    """The owner of each id (PROMPT, POLICY, TOOL)."""
    logp: list[float]
    """The sampling log-probability of each id (0 off the policy's)."""
    log: EpisodeLog
    """What has happened."""
    messages: list[dict]
    """The conversation so far (what a chat template renders)."""
    allowed: list[int]
    """Each id's row of the batch's AllowedTable (0: sampled unconstrained)."""
    grammar: CallGrammar | None = None
    """The calls the episode allows (constrained calls), or None."""
    reward: float = 0.0
    """The sum of the step rewards so far."""

    def append(self, ids: list[int], owner: int, logp: list[float] | None = None,
               allowed: list[int] | None = None) -> None:
        self.ids += ids
        self.owner += [owner] * len(ids)
        self.logp += logp if logp is not None else [0.0] * len(ids)
        self.allowed += allowed if allowed is not None else [0] * len(ids)

    def cut(self, length: int) -> None:
        """Keep the first ``length`` ids: a long answer can overrun the policy's context, and only its tail goes
        (each call was sampled where it fitted)."""
        del self.ids[length:], self.owner[length:], self.logp[length:], self.allowed[length:]


def collate(sequences: Sequence[tuple[list[int], list[int]]], rewards: Sequence[float], pad_id: int, *,
            group: Sequence[int] | None = None, logp: Sequence[list[float]] | None = None,
            info: list[Any] | None = None,
            allowed: tuple[Sequence[list[int]], torch.Tensor] | None = None) -> TokenBatch:
    """(ids, owner) lists of B episodes -> a right-padded TokenBatch; action_mask = (owner == policy).

    ``allowed``: (each row's AllowedTable rows, the table [S, V]) when the calls were constrained."""
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
                      allowed=_allowed_ids(allowed, B, T), info=info or [])


def _allowed_ids(allowed: tuple[Sequence[list[int]], torch.Tensor] | None, B: int, T: int) -> AllowedIds | None:
    if allowed is None:
        return None
    rows, table = allowed
    index = torch.zeros((B, T), dtype=torch.long)
    for b, row in enumerate(rows):
        index[b, :len(row)] = torch.as_tensor(row, dtype=torch.long)
    return AllowedIds(index, table)


def sample_tokens(logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0,
                  allowed: torch.Tensor | None = None,
                  explore: torch.Tensor | None = None) -> tuple[list[int], list[float]]:
    """One token per row of logits [n, V] at ``temperature`` -> (tokens, their sampling log-probabilities);
    ``allowed`` [n, V] bool renormalises each row over its allowed ids.

    ``explore`` [n] (with ``allowed``): row i samples from the mixture mu = (1 - e_i) pi + e_i U(allowed_i), U the
    uniform distribution over the row's allowed ids, and the log-probabilities returned are mu's."""
    logits = logits.float() / temperature
    if allowed is not None:
        logits = logits.masked_fill(~allowed, -math.inf)
    logp = F.log_softmax(logits, dim=-1)
    if explore is not None and allowed is not None:
        share = explore.float()[:, None]
        uniform = allowed.float() / allowed.sum(-1, keepdim=True)
        logp = ((1 - share) * logp.exp() + share * uniform).log()
    tokens = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
    return tokens.tolist(), logp.gather(1, tokens[:, None])[:, 0].tolist()


@dataclass
class _Call:
    """One sampled call: its ids, their log-probabilities and AllowedTable rows, and why it stopped."""

    ids: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    allowed: list[int] = field(default_factory=list)
    stop: str | None = None


def _allowed_mask(grammars: list[CallGrammar | None], texts: list[str], table: AllowedTable,
                  vocab: int) -> tuple[torch.Tensor | None, list[int]]:
    """([n, V] bool of the rows' allowed ids or None when no row is constrained, each row's AllowedTable row)."""
    if not any(grammars):
        return None, [0] * len(grammars)
    mask, rows = torch.ones((len(grammars), vocab), dtype=torch.bool), []
    for k, (grammar, text) in enumerate(zip(grammars, texts)):
        ids = grammar.allowed(text) if grammar else ()
        # nothing allowed: a context word the tokenizer spells only with partial UTF-8 pieces (which TokenTexts
        # leaves out) cannot be finished; that position is sampled unconstrained
        rows.append(table.index(ids) if ids else 0)
        if ids:
            mask[k] = False
            mask[k, list(ids)] = True
    return mask, rows


def _sample_calls(prefixes: Prefixes, logits: torch.Tensor, layout: Layout, episodes: list[_Playing],
                  rows: list[int], generator: torch.Generator, temperature: float,
                  table: AllowedTable, explore: float = 0.0) -> dict[int, _Call]:
    """Every row writes one call, token by token, in lockstep -> {row: its _Call}.

    ``logits`` [len(rows), V] are the next-token logits of each row; the last token of each call
    is not fed to ``prefixes``. A row whose episode has a grammar samples only the ids it allows, and where the
    call chooses its next word (after ``<call>``, the tool and each argument:
    :meth:`~pglab.sampling.call_grammar.CallGrammar.between_words`; whether to call at all stays the policy's) mixes
    in the share ``explore`` of the uniform distribution over them (:func:`sample_tokens`).
    """
    calls = {e: _Call() for e in rows}
    writing = list(rows)
    while writing:
        grammars = [episodes[e].grammar for e in writing]
        texts = [layout.call_text(calls[e].ids) if grammar else "" for e, grammar in zip(writing, grammars)]
        allowed, picked = _allowed_mask(grammars, texts, table, logits.shape[-1])
        shares = (torch.tensor([explore if row and grammar.between_words(text) else 0.0
                                for row, grammar, text in zip(picked, grammars, texts)])
                  if explore and allowed is not None else None)
        tokens, token_logps = sample_tokens(logits.cpu(), generator, temperature, allowed, shares)
        for e, t, lp, row in zip(writing, tokens, token_logps, picked):
            call = calls[e]
            call.ids.append(t)
            call.logp.append(lp)
            call.allowed.append(row)
            call.stop = layout.call_stop(call.ids)
        writing = [e for e in writing if calls[e].stop is None]
        if writing:
            logits = prefixes.extend(writing, [[calls[e].ids[-1]] for e in writing])
    return calls


def _play_call(episode: _Playing, env: TextTurnEnv, layout: Layout, call: _Call, max_turns: int) -> bool:
    """Append the sampled ``call``, step ``env`` with its text, and append the answer when the episode goes on
    -> whether it goes on."""
    ids, stop = call.ids, call.stop
    text, log = layout.call_text(ids), episode.log
    episode.append(ids, POLICY, call.logp, call.allowed)
    log.calls.append(text)
    log.call_ids.append(list(ids))
    log.stops.append(stop)
    log.call_ends.append(len(episode.ids) - 1)
    observation, reward, done, info = check_step(env.step(text), f"{type(env).__name__}.step")
    episode.reward += reward
    log.info.update(info)
    log.observations.append(observation)
    if done or stop == "eos" or len(log.calls) >= max_turns:
        log.end = "env" if done else "eos" if stop == "eos" else "turns"
        return False
    episode.append(layout.observation_ids(episode.messages, text, observation), TOOL)
    episode.messages += [{"role": "assistant", "content": text}, {"role": layout.tool_role, "content": observation}]
    if episode.grammar:
        episode.grammar.observe(layout.shown(observation))
    return True


@torch.no_grad()
def collect_episodes(policy: TokenPolicy | torch.nn.Module, layout: Layout, envs: Sequence[TextTurnEnv],
                     seeds: Sequence[int], generator: torch.Generator, *, max_turns: int = MAX_TURNS,
                     temperature: float = 1.0, group: Sequence[int] | None = None,
                     explore: float = 0.0) -> TokenBatch:
    """One episode in every env (env b reset with ``seeds[b]``), all in lockstep -> TokenBatch [B, T].

    Each turn every running episode samples one call, token by token, until the layout says it
    ends (:meth:`Layout.call_stop`); the environments answer, and the answers of the episodes that
    go on are prefilled together. The policy's incremental decoding (:meth:`TokenPolicy.prefixes`,
    a KV cache) holds every prefix, and finished rows leave it. An episode ends when its
    environment says done, at a call that ended with end-of-text (after the environment answered
    it), after ``max_turns`` calls, or when one more call might not fit the policy's max_length.
    ``rewards`` [B] are the sums of each episode's step rewards; ``logp_old`` holds the sampling
    log-probabilities; ``info[b]`` the :class:`EpisodeLog`. Rows with equal seeds share a group
    unless ``group`` is given. ``explore`` > 0 (constrained calls only) samples where each call chooses a word from
    the exploring mixture of :func:`sample_tokens`; ``logp_old`` then holds the mixture's log-probabilities, and so
    does ``rollout_logp``: the sampler is not the policy.
    """
    policy = as_policy(policy)
    was_training = policy.module.training
    policy.module.eval()
    episodes = []
    for env, seed in zip(envs, seeds):
        prompt = env.reset(int(seed))
        ids = layout.prompt_ids(prompt)
        if policy.max_length is not None and len(ids) + layout.max_call_tokens > policy.max_length:
            raise SettingsError(f"the prompt of task {seed} is {len(ids)} tokens, and with a call of up to "
                                f"{layout.max_call_tokens} it does not fit the agent's {policy.max_length} positions; "
                                "shorten the environment's prompt (what reset returns) or pass a --model that takes "
                                "longer texts")
        grammar = layout.grammar(prompt) if hasattr(layout, "grammar") else None
        episodes.append(_Playing(list(ids), [PROMPT] * len(ids), [0.0] * len(ids), EpisodeLog(prompt),
                                 [{"role": "user", "content": prompt}], [0] * len(ids), grammar))
    prefixes = policy.prefixes([e.ids for e in episodes])
    alive = list(range(len(episodes)))
    logits = prefixes.extend(alive, [e.ids for e in episodes])
    table = AllowedTable()
    while alive:
        calls = _sample_calls(prefixes, logits, layout, episodes, alive, generator, temperature, table, explore)
        going_on = [e for e in alive if _play_call(episodes[e], envs[e], layout, calls[e], max_turns)]
        for e in going_on:
            if policy.max_length is not None and len(episodes[e].ids) + layout.max_call_tokens > policy.max_length:
                episodes[e].log.end = "length"
                episodes[e].cut(policy.max_length)
        alive = [e for e in going_on if episodes[e].log.end is None]
        prefixes.keep(alive)
        if alive:      # each row's call's last token is not in the cache yet: feed it with the answer
            logits = prefixes.extend(alive, [episodes[e].ids[episodes[e].log.call_ends[-1]:] for e in alive])
    policy.module.train(was_training)
    if group is None:
        order = sorted(set(int(s) for s in seeds))
        group = [order.index(int(s)) for s in seeds]
    constrained = (([e.allowed for e in episodes], table.table(logits.shape[-1]))
                   if any(e.grammar for e in episodes) else None)
    batch = collate([(e.ids, e.owner) for e in episodes], [e.reward for e in episodes], layout.pad_id, group=group,
                    logp=[e.logp for e in episodes], info=[e.log for e in episodes], allowed=constrained)
    return dataclasses.replace(batch, rollout_logp=batch.logp_old) if explore else batch


def episode_stats(batch: TokenBatch, *, call_stops: bool = False) -> dict[str, float]:
    """Mean reward, BugFixEnv's pass rate, valid-call fraction and submit rate (when every row is a BugFixEnv
    episode), turns, and policy tokens per episode of a collected batch.

    ``call_stops``: also the shares of calls closed by the layout's closing, cut at the cap, and of
    episodes ended by end-of-text (what a text layout's settings are tuned by).
    """
    logs, n = batch.info, batch.batch_size
    turns = sum(len(log.calls) for log in logs)
    stats = {"reward": float(batch.rewards.mean())}
    records = [log.record for log in logs]
    if all(r is not None for r in records):
        stats.update(record_stats(records))
    stats["turns"] = turns / n
    if call_stops:
        stops = [s for log in logs for s in log.stops]
        stats.update(closed_calls=stops.count("closing") / len(stops), capped_calls=stops.count("cap") / len(stops),
                     eos_ends=sum(log.end == "eos" for log in logs) / n)
    stats["action_tokens"] = float(batch.action_mask.sum()) / n
    return stats


def call_name(call: str) -> str:
    """The short name of a call: ``'<call> edit fix_init </call>'`` -> ``'fix_init'``, else the tool or 'malformed'."""
    parsed = parse_call(call)
    return (parsed[1] or parsed[0]) if parsed else "malformed"


def render_episode(log: EpisodeLog, reward: float) -> str:
    """One episode as text: the prompt, then each call with the tool's answer (BugFixEnv's task and stop, or how
    another environment's episode ended)."""
    record = log.record
    head = f"task {record.task} | stop {record.stop}" if record is not None else f"end {log.end}"
    lines = [f"reward {reward:g} | {head}", f"> {log.prompt}"]
    for call, answer in zip(log.calls, log.observations):
        lines.append(f"{call}")
        lines += [f"    {line}" for line in answer.splitlines()]
    return "\n".join(lines)


__all__ = [
    "MAX_CALL_TOKENS", "MAX_OBS_TOKENS", "MAX_TURNS", "EpisodeLog", "Layout", "WordLayout", "call_name", "collate",
    "collect_episodes", "encode_episode", "episode_stats", "prompt_tokens", "render_episode", "sample_tokens",
    "tool_tokens",
]
