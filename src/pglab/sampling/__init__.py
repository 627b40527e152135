"""Sampling from token policies: multi-turn tool episodes (one collector over a word or text layout), single-turn
replies, and scoring their tokens."""

from pglab.sampling.episodes import EpisodeLog, WordLayout, collect_episodes, episode_stats
from pglab.sampling.replies import sample_replies
from pglab.sampling.scoring import sequence_log_probs, token_log_probs
from pglab.sampling.text_episodes import TextLayout

__all__ = ["EpisodeLog", "TextLayout", "WordLayout", "collect_episodes", "episode_stats", "sample_replies",
           "sequence_log_probs", "token_log_probs"]
