"""--staleness K: episodes sampled with the parameters of K steps earlier, the trained policy the current one.

The policy is a bigram table in float64; the episode source plays nothing: it scores a fixed batch under the
sampler it is handed (its log-probs are the collector's, as collect_episodes records them) and draws the
rewards, and it records the sampler's parameters and the trained policy's at every training step.
"""

import json

import pytest
import torch

from pglab.batch import TokenBatch
from pglab.cli import main
from pglab.sampling.replies import reply_batch
from pglab.sampling.scoring import sequence_log_probs
from pglab.trainers.episodes import EpisodeSource, ReinforceSettings, train_episodes
from pglab.trainers.loop import RunSettings
from pglab.trainers.staleness import StaleSampler

VOCAB, PROMPT, REPLY, ROWS = 5, 2, 4, 8


class Bigram:
    """A TokenPolicy whose logits for the token after ``a`` are ``table[a]`` (VOCAB x VOCAB, float64)."""

    max_length = None

    def __init__(self):
        self.module = torch.nn.Module()
        self.module.table = torch.nn.Parameter(torch.randn(VOCAB, VOCAB, dtype=torch.float64,
                                                           generator=torch.Generator().manual_seed(0)))

    def logits(self, ids, start=1, group_size=1, attention_mask=None):
        return self.module.table[ids[:, start - 1:-1]]

    def prefixes(self, sequences):
        raise NotImplementedError("these tests only score")


class Recorder:
    """The episode source: a fixed batch scored under the sampler, rewards from the step's generator; it keeps
    (sampler's parameters, trained policy's parameters, sampler object) of every training step."""

    def __init__(self, trained: Bigram):
        self.trained, self.steps = trained, []
        gen = torch.Generator().manual_seed(1)
        self.ids = torch.randint(VOCAB, (ROWS, PROMPT + REPLY), generator=gen)
        self.mask = torch.zeros(ROWS, PROMPT + REPLY, dtype=torch.float64)
        self.mask[:, PROMPT:] = 1

    def collect(self, sampler, keys, generator, training) -> TokenBatch:
        rewards = torch.rand(len(keys), generator=generator, dtype=torch.float64)
        batch = reply_batch(self.ids[:len(keys)], self.mask[:len(keys)], PROMPT, 1, rewards)
        with torch.no_grad():
            batch.logp_old = sequence_log_probs(sampler, batch) * batch.action_mask
        if training:
            self.steps.append((every_parameter(sampler.module), every_parameter(self.trained.module), sampler))
        return batch


def every_parameter(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def train(settings: ReinforceSettings, run: RunSettings | None = None) -> tuple[Bigram, Recorder]:
    policy = Bigram()
    source = Recorder(policy)
    train_episodes(policy, EpisodeSource(source.collect, list(range(ROWS)), [0], stats=lambda b: {
        "reward": float(b.rewards.mean()), "pass_rate": 0.0}), settings, run or RunSettings(progress=False))
    return policy, source


SETTINGS = {"steps": 6, "batch_size": ROWS, "eval_every": 100, "eval_per_task": 1, "lr": 0.1}


@pytest.mark.parametrize("staleness", [1, 2, 3])
def test_the_sampler_has_the_parameters_of_k_steps_earlier_exactly(staleness):
    _, source = train(ReinforceSettings(**SETTINGS, staleness=staleness, loss="cispo", is_correction="token-tis"))
    trained = [t["table"] for _, t, _ in source.steps]
    assert all(not torch.equal(a, b) for a, b in zip(trained, trained[1:]))      # every step moves the policy
    for step, (sampled, _, sampler) in enumerate(source.steps):
        assert torch.equal(sampled["table"], trained[max(0, step - staleness)])
        assert sampler.module is not source.trained.module


def test_staleness_0_samples_with_the_trained_policy_and_a_correction_changes_nothing():
    plain, source = train(ReinforceSettings(**SETTINGS))
    assert all(sampler is source.trained for _, _, sampler in source.steps)
    for options in ({"staleness": 0}, {"staleness": 0, "is_correction": "token-tis"},
                    {"staleness": 0, "is_correction": "geo-mask", "is_cap": 1.01}):
        other, _ = train(ReinforceSettings(**SETTINGS, **options))
        assert torch.equal(other.module.table, plain.module.table), options


def test_the_stale_sampler_reaches_the_loss_through_the_correction_alone():
    """This source's tokens are fixed, so the sampler only reaches the update through its log-probs: without a
    correction a stale run is the fresh one (the ratio compares pi to pi_old, the current policy), with one
    the weights rho = pi_old / mu see the stale sampler and the run changes."""
    fresh, _ = train(ReinforceSettings(**SETTINGS, loss="cispo"))
    stale, _ = train(ReinforceSettings(**SETTINGS, loss="cispo", staleness=1))
    corrected, _ = train(ReinforceSettings(**SETTINGS, loss="cispo", staleness=1, is_correction="token-mask",
                                           is_cap=1.05))
    assert torch.equal(stale.module.table, fresh.module.table)
    assert not torch.equal(corrected.module.table, stale.module.table)


def test_a_resumed_stale_run_repeats_the_uninterrupted_one(tmp_path):
    settings = ReinforceSettings(**SETTINGS, staleness=2, loss="ppo", is_correction="sequence-tis", num_iterations=2)
    straight, _ = train(settings, RunSettings(out=tmp_path / "straight", progress=False))
    train(settings, RunSettings(out=tmp_path / "resumed", stop_at=3, progress=False))
    resumed, _ = train(settings, RunSettings(out=tmp_path / "resumed", resume=True, progress=False))
    assert torch.equal(resumed.module.table, straight.module.table)


def test_the_stale_sampler_queue_is_bounded():
    policy = Bigram()
    sampler = StaleSampler(policy, 2)
    for _ in range(5):
        sampler.advance(policy.module)
        with torch.no_grad():
            policy.module.table.add_(1.0)
    assert len(sampler.state()) == 3
    with pytest.raises(ValueError, match="at least 1 step behind"):
        StaleSampler(policy, 0)


@pytest.mark.experiment
def test_both_trainers_train_with_a_zoo_loss_a_correction_and_staleness(tmp_path, capsys):
    assert main(["train-agent", "--quick", "--loss", "cispo", "--staleness", "1", "--out", str(tmp_path / "a")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "a" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all("clip_ratio" in r and r["grad_norm"] > 0 for r in rows)
    lm = ["train-lm", "--default-size", "quick", "--steps", "2", "--eval-prompts", "4"]
    assert main([*lm, "--loss", "gspo", "--is-correction", "token-tis", "--out", str(tmp_path / "l")]) == 0
    assert main([*lm, "--loss", "ppo", "--is-correction", "token-tis", "--staleness", "1", "--is-cap", "1.0001",
                 "--out", str(tmp_path / "s")]) == 0
    on, stale = ([json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
                 for d in ("l", "s"))
    assert [r["is_weight_mean"] for r in on] == [1.0, 1.0]              # on-policy: the sampler is pi_old exactly
    assert stale[0]["is_weight_mean"] == 1.0 and stale[1]["is_weight_mean"] < 1.0   # step 2 sampled by step 1's
    assert main(["train-lm", "--loss", "sapo", "--epsilon", "0.1", "--out", str(tmp_path / "x")]) == 2
    assert "sapo has no clip range" in capsys.readouterr().err
