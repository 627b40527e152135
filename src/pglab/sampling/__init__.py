"""Sampling from token policies: multi-turn tool episodes, single-turn replies, and scoring their tokens."""

from pglab.sampling.episodes import collect_episodes, episode_stats
from pglab.sampling.replies import sample_replies
from pglab.sampling.scoring import sequence_log_probs, token_log_probs

__all__ = ["collect_episodes", "episode_stats", "sample_replies", "sequence_log_probs", "token_log_probs"]
