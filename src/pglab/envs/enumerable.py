"""An autoregressive policy small enough to enumerate: every reply, its probability, and exact objectives.

P prompts, a vocabulary of V reply tokens, replies of at most L tokens. With ``eos=True`` the last
token of the vocabulary ends a reply, so replies have 1..L tokens (the end token counts as one);
without it every reply has exactly L tokens. The policy is either a table of logits per prefix
state (``TableLogits``) or a tiny Hugging Face GPT-2 (``GPT2Logits``); the reference policy has the
same form with other weights. Everything is float64.

With l(x, y) = log pi(y|x) - log ref(y|x) summed over the reply's tokens, the stated objective is

    J(theta) = E_x E_{y~pi}[r(x, y)] - beta KL(pi(.|x) || ref(.|x)),   KL = E_{y~pi}[l(x, y)],

with the P prompts weighing equally. ``EnumerablePolicy.objective(kind, beta)`` gives J and the
other objectives an estimator can follow instead (``OBJECTIVES``); each is differentiable in the
policy's parameters, so its gradient is one autograd call.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass

import torch

from pglab.estimators import exact_kl

OBJECTIVES = {
    "reverse_kl": "E[r] - beta KL(pi || ref), the stated objective",
    "forward_kl": "E[r] - beta KL(ref || pi)",
    "tokenwise_reverse_kl": "E[r] - beta sum_s d(s) KL(pi(.|s) || ref(.|s)), state weights d held fixed",
    "tokenwise_forward_kl": "E[r] - beta sum_s d(s) KL(ref(.|s) || pi(.|s)), state weights d held fixed",
    "reward_only": "E[r], no KL term",
    "length_normalised": "E[(r - mean r) / |y|], the prompt's mean reward held fixed (no KL term)",
}
"""Objective name -> what it is; the gradient of each at the current policy is exact by enumeration."""


@dataclass(frozen=True)
class Replies:
    """Every reply to one prompt (the same set for every prompt).

    tokens [N, L] long (0 after a reply's end), mask [N, L] float64 (1 on reply tokens),
    lengths [N] float64, state [N, L] long: the index of the prefix y_<t among ``n_states``.
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor
    state: torch.Tensor
    n_states: int


def enumerate_replies(vocab: int, length: int, eos: bool = False) -> Replies:
    """All replies of up to ``length`` tokens; with ``eos`` the token vocab - 1 ends a reply early."""
    if vocab < 2 or length < 1:
        raise ValueError(f"an enumerable policy needs vocab >= 2 and length >= 1, got vocab={vocab}, length={length}")
    if eos and vocab < 3:
        raise ValueError("eos=True needs vocab >= 3: at least two content tokens besides the end token")
    end = vocab - 1 if eos else None
    replies = []
    for n in range(1, length + 1):
        for body in itertools.product(range(vocab if end is None else vocab - 1), repeat=n - 1):
            if n < length:
                if end is not None:
                    replies.append((*body, end))
            else:
                replies.extend((*body, last) for last in range(vocab))
    states: dict[tuple[int, ...], int] = {}
    tokens = torch.zeros(len(replies), length, dtype=torch.long)
    state = torch.zeros(len(replies), length, dtype=torch.long)
    mask = torch.zeros(len(replies), length, dtype=torch.float64)
    for i, reply in enumerate(replies):
        for t, token in enumerate(reply):
            tokens[i, t], mask[i, t] = token, 1.0
            state[i, t] = states.setdefault(reply[:t], len(states))
    return Replies(tokens, mask, mask.sum(-1), state, len(states))


class TableLogits(torch.nn.Module):
    """A free logit vector per (prompt, prefix state): theta [P, S, V]."""

    def __init__(self, prompts: int, replies: Replies, vocab: int, scale: float, generator: torch.Generator):
        super().__init__()
        self.replies = replies
        init = scale * torch.randn(prompts, replies.n_states, vocab, generator=generator, dtype=torch.float64)
        self.theta = torch.nn.Parameter(init)

    def forward(self) -> torch.Tensor:
        """Logits at every position of every reply: [P, N, L, V]."""
        return self.theta[:, self.replies.state]


class GPT2Logits(torch.nn.Module):
    """A tiny random GPT-2 over V reply tokens and P prompt tokens (ids V .. V + P - 1)."""

    def __init__(self, prompts: int, replies: Replies, vocab: int, scale: float, generator: torch.Generator,
                 width: int = 16, layers: int = 1):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        length = replies.tokens.shape[1]
        config = GPT2Config(vocab_size=vocab + prompts, n_positions=length + 1, n_embd=width, n_layer=layers,
                            n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=scale,
                            bos_token_id=vocab, eos_token_id=vocab)
        with torch.random.fork_rng():      # HF draws its initial weights from the global RNG: seed it from ours
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
            self.model = GPT2LMHeadModel(config).double().eval()
        self.vocab, self.prompts = vocab, prompts
        n = len(replies.tokens)
        prompt_ids = (vocab + torch.arange(prompts)).repeat_interleave(n)[:, None]
        self.register_buffer("ids", torch.cat([prompt_ids, replies.tokens.repeat(prompts, 1)], 1), persistent=False)

    def forward(self) -> torch.Tensor:
        """Logits at every position of every reply: [P, N, L, V] (prompt-token logits dropped)."""
        logits = self.model(self.ids).logits[:, :-1, : self.vocab]
        return logits.reshape(self.prompts, -1, *logits.shape[1:])


def top_k_logits(logits: torch.Tensor, k: int) -> torch.Tensor:
    """The logits [..., V] with all but the k largest of each row set to -inf (ties: the first ones kept)."""
    if k >= logits.shape[-1]:
        return logits
    kept = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, logits.topk(k, -1).indices, True)
    return logits.masked_fill(~kept, -torch.inf)


def top_p_logits(logits: torch.Tensor, p: float) -> torch.Tensor:
    """The logits [..., V] cut to each row's nucleus: the smallest set of most likely tokens whose mass reaches p.

    A token is kept when the mass of the tokens more likely than it (ties in index order) is below p; the rest
    get -inf, so a log_softmax of the result renormalises over the nucleus.
    """
    if p >= 1:
        return logits
    probs, order = torch.sort(torch.softmax(logits, -1), dim=-1, descending=True, stable=True)
    before = probs.cumsum(-1) - probs                            # mass of the more likely tokens
    kept = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, order, before < p)
    return logits.masked_fill(~kept, -torch.inf)


class SamplerLogits(torch.nn.Module):
    """A sampler's view of a net's logits [P, N, L, V]: fixed noise, then a temperature, then top-k, then top-p.

    The order is a sampler's: noise models a kernel or precision mismatch in the logits themselves, and
    temperature, top-k and top-p (vLLM's and Hugging Face's order) act on the logits it computed. ``net`` is
    the wrapped module itself (not a copy): the sampler follows its parameters.
    """

    def __init__(self, net: torch.nn.Module, replies: Replies, *, noise: torch.Tensor | None = None,
                 temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None):
        super().__init__()
        self.net, self.replies = net, replies
        self.noise, self.temperature, self.top_k, self.top_p = noise, temperature, top_k, top_p

    def forward(self) -> torch.Tensor:
        """Logits at every position of every reply: [P, N, L, V] (-inf where top-k or top-p cut a token)."""
        logits = self.net()
        if self.noise is not None:
            logits = logits + self.noise[:, self.replies.state]
        logits = logits / self.temperature
        if self.top_k is not None:
            logits = top_k_logits(logits, self.top_k)
        return logits if self.top_p is None else top_p_logits(logits, self.top_p)


class EnumerablePolicy:
    """A policy, its reference and a reward r(x, y), with every reply enumerated.

    ``parametrisation`` "table" or "gpt2"; ``rewards`` [P, N] (default: standard normal draws);
    ``scale`` is the spread of the initial logits (table) or weights (gpt2). The policy starts away
    from the reference (its own random weights), so the KL and its gradient are not zero.
    """

    def __init__(self, *, prompts: int = 2, vocab: int = 2, length: int = 2, eos: bool = False,
                 parametrisation: str = "table", rewards: torch.Tensor | None = None, seed: int = 0,
                 scale: float | None = None):
        if parametrisation not in ("table", "gpt2"):
            raise ValueError(f"unknown parametrisation {parametrisation!r}; pass 'table' or 'gpt2'")
        if prompts < 1:
            raise ValueError(f"prompts must be >= 1, got {prompts}")
        self.replies = enumerate_replies(vocab, length, eos)
        self.prompts, self.vocab, self.length, self.eos = prompts, vocab, length, eos
        self.parametrisation, self.seed = parametrisation, seed
        generator = torch.Generator().manual_seed(seed)
        build = TableLogits if parametrisation == "table" else GPT2Logits
        scale = scale if scale is not None else (1.0 if parametrisation == "table" else 0.5)
        self.ref = build(prompts, self.replies, vocab, scale, generator).requires_grad_(False)
        self.net = build(prompts, self.replies, vocab, scale, generator)
        n = len(self.replies.tokens)
        if rewards is None:
            rewards = torch.randn(prompts, n, generator=generator, dtype=torch.float64)
        rewards = torch.as_tensor(rewards, dtype=torch.float64)
        if rewards.shape != (prompts, n):
            raise ValueError(f"rewards must be [P, N] = [{prompts}, {n}] (one per prompt and reply), "
                             f"got {tuple(rewards.shape)}")
        self.rewards = rewards

    def parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.net.parameters() if p.requires_grad]

    def copy(self) -> EnumerablePolicy:
        """An independent copy (its own parameters, the same reference and rewards)."""
        twin = copy.copy(self)
        twin.net = copy.deepcopy(self.net)
        return twin

    def transformed(self, *, noise: torch.Tensor | None = None, temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None) -> EnumerablePolicy:
        """The policy as a sampler sees it: its net wrapped in a SamplerLogits (same parameters, reference, rewards).

        noise [P, S, V] is added to the logits at each (prompt, prefix state), then the logits are divided by
        ``temperature``, then cut to the ``top_k`` largest, then to the top-p nucleus (see SamplerLogits).
        """
        twin = copy.copy(self)
        twin.net = SamplerLogits(self.net, self.replies, noise=noise, temperature=temperature, top_k=top_k,
                                 top_p=top_p)
        return twin

    @property
    def mask(self) -> torch.Tensor:
        """[N, L]: 1 on reply tokens."""
        return self.replies.mask

    def _token_logp(self, logits: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits, -1).gather(-1, self.replies.tokens.expand(logits.shape[:-1])[..., None])
        return torch.where(self.mask > 0, logp[..., 0], 0.0)    # not logp * mask: a truncated sampler's -inf * 0

    def token_logp(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi, log ref) of every reply token: two [P, N, L] (0 after a reply's end); log pi is differentiable."""
        with torch.no_grad():
            ref = self._token_logp(self.ref())
        return self._token_logp(self.net()), ref

    def sequence_logp(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(y|x), log ref(y|x)): two [P, N]."""
        logp, ref = self.token_logp()
        return logp.sum(-1), ref.sum(-1)

    def objective(self, kind: str = "reverse_kl", beta: float = 0.0) -> torch.Tensor:
        """The objective ``kind`` (see OBJECTIVES) at the current policy, differentiable; scalar."""
        if kind not in OBJECTIVES:
            raise ValueError(f"unknown objective {kind!r}; pass one of {', '.join(OBJECTIVES)}")
        logits = self.net()
        token_logp = self._token_logp(logits)
        with torch.no_grad():
            ref_logits = self.ref()
            ref_token = self._token_logp(ref_logits)
        logp, ref = token_logp.sum(-1), ref_token.sum(-1)
        probs = logp.exp()
        reward = (probs * self.rewards).sum(-1)                                  # [P]
        if kind == "reverse_kl":
            penalty = (probs * (logp - ref)).sum(-1)
        elif kind == "forward_kl":
            penalty = (ref.exp() * (ref - logp)).sum(-1)
        elif kind.startswith("tokenwise"):
            pair = (logits, ref_logits) if kind == "tokenwise_reverse_kl" else (ref_logits, logits)
            per_state = exact_kl(*pair) * self.mask                                # [P, N, L]
            penalty = (probs.detach() * per_state.sum(-1)).sum(-1)
        elif kind == "reward_only":
            penalty = torch.zeros_like(reward)
        else:
            centred = self.rewards - reward.detach()[:, None]
            reward = (probs * centred / self.replies.lengths).sum(-1)
            penalty = torch.zeros_like(reward)
        return (reward - beta * penalty).mean()

    def prompt_objectives(self, beta: float) -> torch.Tensor:
        """The stated objective of each prompt, E_y[r] - beta KL, divided by P (they sum to J); [P]."""
        logp, ref = self.sequence_logp()
        return (logp.exp() * (self.rewards - beta * (logp - ref))).sum(-1) / self.prompts

    @torch.no_grad()
    def optimal_log_policy(self, beta: float) -> torch.Tensor:
        """log pi*(y|x) with pi* = ref exp(r / beta) / Z, the maximiser of J over all reply distributions; [P, N]."""
        if beta <= 0:
            raise ValueError("pi* needs beta > 0 (at beta = 0 all mass goes to the best reply)")
        _, ref = self.sequence_logp()
        unnormalised = ref + self.rewards / beta
        return unnormalised - torch.logsumexp(unnormalised, -1, keepdim=True)

    @torch.no_grad()
    def kl_to(self, log_q: torch.Tensor) -> float:
        """KL(pi || q) by enumeration, averaged over prompts; log_q [P, N]."""
        logp, _ = self.sequence_logp()
        return float((logp.exp() * (logp - log_q)).sum(-1).mean())

    @torch.no_grad()
    def sample(self, group_size: int, generator: torch.Generator) -> torch.Tensor:
        """``group_size`` reply indices per prompt, drawn from pi: [P, K] long."""
        logp, _ = self.sequence_logp()
        return torch.multinomial(logp.exp(), group_size, replacement=True, generator=generator)
