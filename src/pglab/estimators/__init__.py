"""Policy-gradient estimators as pure tensor functions (torch only; no environment, model or I/O).

Advantages for token policies (``advantages``, ``token_advantages``, ``zero_advantage_share``),
returns (``backward_scan``, ``discounted_returns``, ``gae``), baselines (``leave_one_out``,
``group_normalize``, ``normalize``, ``optimal_constant_baseline``, ``EMABaseline``), losses
(``masked_mean``, ``aggregate_loss``, ``reinforce_loss``), the loss zoo (``ppo_clip``, ``gspo``,
``gspo_token``, ``gmpo``, ``cispo``, ``sapo``, ``trust_region_mask``, ``dppo``, ``entropy_bonus``,
``entropy_from_logits``), corrections of the sampler/trainer mismatch (``truncated_is``, ``masked_is``,
``geometric_mask``, ``off_policy_sequence_mask``, ``decoupled_ppo``), the KL penalty (``kl_estimate``,
``sequence_kl``, ``ratio_corrected_kl``, ``exact_kl``, ``kl_shaped_rewards``), closed-form scores
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
from pglab.estimators.corrections import (
    decoupled_ppo,
    geometric_mask,
    masked_is,
    off_policy_sequence_mask,
    truncated_is,
)
from pglab.estimators.diagnostics import batch_cosine, cosine, pair_cosines, squared_deviations, total_variance
from pglab.estimators.kl import exact_kl, kl_estimate, kl_shaped_rewards, ratio_corrected_kl, sequence_kl
from pglab.estimators.losses import aggregate_loss, masked_mean, reinforce_loss
from pglab.estimators.policy_losses import (
    cispo,
    dppo,
    entropy_bonus,
    entropy_from_logits,
    gmpo,
    gspo,
    gspo_token,
    ppo_clip,
    sapo,
    trust_region_mask,
)
from pglab.estimators.returns import backward_scan, discounted_returns, gae
from pglab.estimators.score import gaussian_score, softmax_score

__all__ = [
    "EMABaseline",
    "advantages",
    "aggregate_loss",
    "backward_scan",
    "batch_cosine",
    "cispo",
    "cosine",
    "decoupled_ppo",
    "discounted_returns",
    "dppo",
    "entropy_bonus",
    "entropy_from_logits",
    "exact_kl",
    "gae",
    "gaussian_score",
    "geometric_mask",
    "gmpo",
    "group_normalize",
    "gspo",
    "gspo_token",
    "kl_estimate",
    "kl_shaped_rewards",
    "leave_one_out",
    "masked_is",
    "masked_mean",
    "normalize",
    "off_policy_sequence_mask",
    "optimal_constant_baseline",
    "pair_cosines",
    "ppo_clip",
    "ratio_corrected_kl",
    "reinforce_loss",
    "sapo",
    "sequence_kl",
    "softmax_score",
    "squared_deviations",
    "token_advantages",
    "total_variance",
    "truncated_is",
    "trust_region_mask",
    "zero_advantage_share",
]
