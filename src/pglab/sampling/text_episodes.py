"""The text layout of multi-turn episodes: a Hugging Face tokenizer's text, token in and token out.

The policy writes text: each assistant turn is sampled token by token until its decoded text
holds the closing text (``</call>``) or the turn reaches its token cap, whichever comes first;
end-of-text ends the episode (after the environment has answered that last turn). The decoded
turn goes to the environment as it is. The invariant
that makes the gradient right: **the ids the update scores are exactly the ids the policy
sampled**. Each observation is tokenised on its own and appended as ids (owner tool, mask 0); the
transcript is never decoded and tokenised again, which with a byte-level BPE would merge tokens
across turn boundaries into ids the policy never sampled. The collector is
:func:`pglab.sampling.episodes.collect_episodes`.

With a chat template (``TextLayout(chat=True)``, the default when the tokenizer has one) the task
is the user turn, each call an assistant turn and each observation a tool turn (a user turn when
the template has no tool role); the ids appended after a call are the template's text between
the end of the sampled call and the start of the next assistant turn, tokenised alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pglab.batch import POLICY, PROMPT, TOOL
from pglab.sampling.call_grammar import CallGrammar, TokenTexts

CLOSING = "</call>"
"""The text that closes a call."""
MAX_TEXT_CALL_TOKENS = 32
"""Default cap on the tokens of one call."""
CALLS = ("free", "constrained")
"""How a turn is sampled: any text, or a well-formed call copied from the context (or end-of-text)."""


class TextLayout:
    """Token ids of a text-turn episode for one HF tokenizer: the prompt, where a call ends, what follows it.

    ``chat``: render turns with the tokenizer's chat template (default: when it has one);
    ``max_obs_tokens`` cuts each observation; a call ends at ``closing``, at end-of-text or after
    ``max_call_tokens`` tokens. ``calls="constrained"``: an episode whose prompt names tools in the call
    syntax samples only well-formed calls with arguments copied from what it has seen
    (:mod:`pglab.sampling.call_grammar`); ``"free"``: any text.
    """

    def __init__(self, tokenizer: Any, chat: bool | None = None, max_obs_tokens: int = 128,
                 max_call_tokens: int = MAX_TEXT_CALL_TOKENS, closing: str = CLOSING, calls: str = "free"):
        if calls not in CALLS:
            raise ValueError(f"calls must be one of {', '.join(CALLS)}, got {calls!r}")
        self.tokenizer, self.max_obs_tokens = tokenizer, max_obs_tokens
        self.max_call_tokens, self.closing, self.calls = max_call_tokens, closing, calls
        self._texts: TokenTexts | None = None
        self.chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat
        if self.chat and not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; pass chat=False (plain text turns)")
        self.tool_role = "tool" if self.chat and self._renders("tool") else "user"
        self.eos = eos = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos if eos is not None else 0)

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

    def call_stop(self, ids: list[int]) -> str | None:
        """eos at end-of-text, closing once the decoded call holds the closing text, cap at max_call_tokens."""
        if ids[-1] == self.eos:
            return "eos"
        if self.closing in self.tokenizer.decode(ids):
            return "closing"
        return "cap" if len(ids) >= self.max_call_tokens else None

    def grammar(self, prompt: str) -> CallGrammar | None:
        """The calls an episode of ``prompt`` allows (constrained calls and a prompt naming a tool), else None."""
        if self.calls != "constrained":
            return None
        if self._texts is None:
            self._texts = TokenTexts.of(self.tokenizer)
        grammar = CallGrammar(prompt, self._texts)
        return grammar if grammar else None

    def shown(self, observation: str) -> str:
        """The observation as the agent sees it: cut to max_obs_tokens."""
        return self.tokenizer.decode(self.encode(observation)[:self.max_obs_tokens])

    def call_text(self, ids: list[int]) -> str:
        """The decoded call without end-of-text."""
        return self.tokenizer.decode([t for t in ids if t != self.eos])

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
        observation = self.shown(observation)
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


__all__ = ["CALLS", "CLOSING", "MAX_TEXT_CALL_TOKENS", "TextLayout", "encode_text_episode"]
