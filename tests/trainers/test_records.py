"""samples.jsonl: the per-token numbers agree with the update's own diagnostics, recording changes no number of the
run, the file stays within its bound and a resumed run records each step once."""

import json
import math

import pytest
import torch

from pglab.batch import POLICY, PROMPT, TokenBatch
from pglab.envs.bugfix import make_tasks
from pglab.models import TinyAgent
from pglab.trainers.episodes import ReinforceSettings
from pglab.trainers.loop import RunSettings
from pglab.trainers.records import SAMPLES, SampleBound, recorded_rows, token_quantities
from pglab.trainers.tinyagent import train_reinforce
from pglab.trainers.update import UpdateSpec, pg_loss, reply_advantages

COLUMNS = ("ids", "text", "owner", "logp", "adv", "clipped")


def synthetic_batch(generator: torch.Generator, B: int = 6, T: int = 9) -> TokenBatch:
    """B rows of T positions: 2 prompt tokens, then policy tokens to a random length; log-probs of three policies
    far enough apart that PPO's clip and the mismatch mask bind on some tokens."""
    lengths = torch.randint(4, T + 1, (B,), generator=generator)
    positions = torch.arange(T)
    attention = (positions < lengths[:, None]).long()
    action = attention * (positions >= 2)
    owner = torch.where(action.bool(), POLICY, PROMPT) * attention

    def logps():
        return -torch.rand(B, T, generator=generator, dtype=torch.float64) * 2 * action

    return TokenBatch(ids=torch.randint(1, 50, (B, T), generator=generator) * attention, attention_mask=attention,
                      action_mask=action, owner=owner, group=torch.arange(B) // 2,
                      rewards=torch.randint(0, 2, (B,), generator=generator).double(), logp_old=logps(),
                      rollout_logp=logps())


@pytest.mark.parametrize("loss", ["ppo", "cispo", "reinforce"])
def test_token_flags_count_what_the_update_counts(loss):
    """The clipped tokens are clip_count of pg_loss, the masked ones its is_masked_fraction, for 20 random batches."""
    generator = torch.Generator().manual_seed(7)
    spec = UpdateSpec("rloo", 2, loss=loss, is_correction="token-mask", is_cap=1.5, ratio=loss == "reinforce")
    seen = 0
    for _ in range(20):
        batch = synthetic_batch(generator)
        logp = -torch.rand(batch.ids.shape, generator=generator, dtype=torch.float64) * 2 * batch.action_mask
        reply_adv = reply_advantages(batch.rewards, spec)
        found = token_quantities(logp, batch, reply_adv, spec)
        _, parts = pg_loss(logp, batch, reply_adv, spec)
        mask = batch.action_mask.bool()
        if loss != "cispo":        # CISPO clips the weight, never the gradient: no token loses its gradient
            assert int(found["clipped"].sum()) == int(parts["clip_count"])
        else:
            assert not found["clipped"].any()
        assert float(found["masked"].sum()) / float(mask.sum()) == pytest.approx(float(parts["is_masked_fraction"]),
                                                                                abs=1e-12)
        assert torch.equal(found["ratio"][mask], torch.exp(logp - batch.logp_old)[mask])
        assert torch.equal(found["adv"][mask], reply_adv[:, None].expand_as(logp)[mask])
        seen += int(found["clipped"].sum())
    assert seen > 0 or loss == "cispo"          # the batches do make the clip bind


def test_recorded_rows_and_steps_stay_within_the_bound():
    assert recorded_rows(3, 4) == [0, 1, 2]
    assert recorded_rows(64, 4) == [0, 16, 32, 48]
    bound = SampleBound(rows=4, total_rows=40)
    assert bound.every(10) == 1 and bound.every(11) == 2 and bound.every(400) == 40
    with pytest.raises(ValueError, match="SampleBound.rows must be a whole number >= 1"):
        SampleBound(rows=0)


@pytest.mark.experiment
@pytest.mark.usefixtures("one_thread")
def test_recording_changes_no_number_and_resumes_once(cloned_agent, tok, tmp_path):
    """PPO twice per batch: the rows with and without a run folder are equal; the recorded pi_old (log-prob over
    ratio) is the sampler's up to roundoff (same parameters, a full pass instead of the KV cache); every (step, row)
    appears once after a stop, a line left past the checkpoint and a resume."""
    settings = ReinforceSettings(steps=3, batch_size=4, eval_every=3, eval_per_task=1, baseline_init=0.1, seed=3,
                                 loss="ppo", num_iterations=2, advantage="rloo", group_size=2)

    def run(out=None, stop_at=None, resume=False):
        model = TinyAgent(config=cloned_agent.config)
        model.load_state_dict(cloned_agent.state_dict())
        return train_reinforce(model, tok, make_tasks("train"), make_tasks("heldout"), settings,
                               RunSettings(out=out, stop_at=stop_at, resume=resume, checkpoint_every=1,
                                           progress=False))

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    bare, recorded = run(), run(tmp_path / "whole")
    assert strip(bare["history"]) == strip(recorded["history"])
    lines = [json.loads(line) for line in (tmp_path / "whole" / SAMPLES).read_text().splitlines()]
    assert [(line["step"], line["row"]) for line in lines] == [(s, r) for s in range(3) for r in range(4)]
    for line in lines:
        n = len(line["ids"])
        assert all(len(line[c]) == n for c in (*COLUMNS, "ratio", "sampler_logp")) and 0 < n <= 512
        policy = [i for i, o in enumerate(line["owner"]) if o == POLICY]
        assert policy and all(line["text"][i] for i in policy)
        # pi_old is the sampler's parameters: log pi - log ratio = log mu up to the 4 decimals kept (1e-3 at ratio
        # >= 0.1) and float32 roundoff
        assert max(abs(line["logp"][i] - math.log(line["ratio"][i]) - line["sampler_logp"][i]) for i in policy
                   if line["ratio"][i] >= 0.1) < 1e-3
        assert line["passed"] in (True, False) and line["reward"] is not None
    run(tmp_path / "stopped", stop_at=2)
    with open(tmp_path / "stopped" / SAMPLES, "a") as f:         # a step written after the checkpoint, then a crash
        f.write(json.dumps(lines[-1]) + "\n")
    run(tmp_path / "stopped", resume=True)
    again = [json.loads(line) for line in (tmp_path / "stopped" / SAMPLES).read_text().splitlines()]
    assert [(line["step"], line["row"]) for line in again] == [(line["step"], line["row"]) for line in lines]


@pytest.mark.experiment
@pytest.mark.usefixtures("one_thread")
def test_train_lm_records_its_replies_numbered_as_its_metrics(tmp_path):
    """A 2-step train-lm run with a KL in the reward: the same metrics with and without a run folder; 4 of its 8
    replies per step recorded under metrics.jsonl's step numbers; at the first step the policy is the reference,
    so the log-ratio to it is 0 and every policy token's advantage is its reply's (k1 = 0)."""
    pytest.importorskip("transformers")
    from pglab.models.default_lm import save_random_gpt2
    from pglab.trainers.lm import RLConfig, train_lm

    save_random_gpt2(tmp_path / "model", vocab=300, layers=1, width=32, heads=2)
    (tmp_path / "prompts.txt").write_text("\n".join(f"the film number {i} was really quite something"
                                                    for i in range(16)))
    settings = dict(model=str(tmp_path / "model"), prompts=str(tmp_path / "prompts.txt"), reward="vader", max_steps=2,
                    prompts_per_step=4, num_generations=2, prompt_length=4, max_completion_length=6, eval_prompts=2,
                    eval_generations=1, learning_rate=1e-2, beta=0.1, eval_every=2)
    bare = train_lm(RLConfig(**settings), progress=False)
    run = train_lm(RLConfig(**settings, output_dir=str(tmp_path / "run")), progress=False)
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in bare.history] == [
        {k: v for k, v in r.items() if k != "seconds"} for r in run.history]
    lines = [json.loads(line) for line in (tmp_path / "run" / SAMPLES).read_text().splitlines()]
    assert [(line["step"], line["row"]) for line in lines] == [(s, r) for s in (1, 2) for r in (0, 2, 4, 6)]
    for line in lines:
        policy = [i for i, o in enumerate(line["owner"]) if o == POLICY]
        assert len(policy) == 6 and all(len(line[c]) == len(line["ids"]) for c in (*COLUMNS, "ref_logp"))
        if line["step"] == 1:
            assert max(abs(line["logp"][i] - line["ref_logp"][i]) for i in policy) < 1e-3
            assert all(line["adv"][i] == pytest.approx(line["advantage"], abs=2e-4) for i in policy)
