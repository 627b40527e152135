"""Token-sequence agents: tokenizer, TinyAgent, rollouts, behaviour cloning."""

from pglab.agents.cloning import make_base_agent
from pglab.agents.rollout import (
    call_name,
    collate,
    encode_episode,
    render_episode,
    rollout_batch,
    rollout_stats,
    sequence_log_probs,
)
from pglab.agents.tinyagent import KVCache, TinyAgent, TinyConfig
from pglab.agents.tokenizer import Tokenizer, build_tokenizer

__all__ = [
    "KVCache", "TinyAgent", "TinyConfig", "Tokenizer", "build_tokenizer", "call_name", "collate", "encode_episode",
    "make_base_agent",
    "render_episode", "rollout_batch", "rollout_stats", "sequence_log_probs",
]
