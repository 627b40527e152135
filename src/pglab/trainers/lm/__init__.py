"""``pglab train-lm``: REINFORCE, RLOO, GRPO and Dr. GRPO with a KL penalty for any Hugging Face causal LM.

config (RLConfig), train (train_lm), eval (replies scored under policy and reference, metrics,
the worked example), rewards (``--reward`` specs), toy (an LM small enough to enumerate).
"""

from pglab.trainers.lm.config import RLConfig
from pglab.trainers.lm.eval import curves_figure, distinct_n
from pglab.trainers.lm.train import LMRun, train_lm

__all__ = ["LMRun", "RLConfig", "curves_figure", "distinct_n", "train_lm"]
