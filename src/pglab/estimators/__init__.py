"""Policy-gradient estimators as pure tensor functions (torch only; no environment, model or I/O).

Advantages for token policies (``advantages``, ``token_advantages``, ``zero_advantage_share``),
returns (``backward_scan``, ``discounted_returns``, ``gae``), baselines (``leave_one_out``,
``group_normalize``, ``normalize``, ``optimal_constant_baseline``, ``EMABaseline``), losses
(``masked_mean``, ``aggregate_loss``, ``reinforce_loss``), the KL
penalty (``kl_estimate``, ``exact_kl``, ``kl_shaped_rewards``), closed-form scores
(``softmax_score``, ``gaussian_score``) and diagnostics (``total_variance``, ``squared_deviations``,
``cosine``, ``pair_cosines``, ``batch_cosine``).
"""

from pglab.estimators.advantages import advantages, token_advantages, zero_advantage_share
from pglab.estimators.baselines import (
    EMABaseline,
    group_normalize,
    leave_one_out,
    normalize,
    optimal_constant_baseline,
)
from pglab.estimators.diagnostics import batch_cosine, cosine, pair_cosines, squared_deviations, total_variance
from pglab.estimators.kl import exact_kl, kl_estimate, kl_shaped_rewards
from pglab.estimators.losses import aggregate_loss, masked_mean, reinforce_loss
from pglab.estimators.returns import backward_scan, discounted_returns, gae
from pglab.estimators.score import gaussian_score, softmax_score

__all__ = [
    "EMABaseline",
    "advantages",
    "aggregate_loss",
    "backward_scan",
    "batch_cosine",
    "cosine",
    "discounted_returns",
    "exact_kl",
    "gae",
    "gaussian_score",
    "group_normalize",
    "kl_estimate",
    "kl_shaped_rewards",
    "leave_one_out",
    "masked_mean",
    "normalize",
    "optimal_constant_baseline",
    "pair_cosines",
    "reinforce_loss",
    "softmax_score",
    "squared_deviations",
    "token_advantages",
    "total_variance",
    "zero_advantage_share",
]
