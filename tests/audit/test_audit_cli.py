"""pglab audit on the command line: --list, --preset, --loss module:function, --json, and one-line refusals."""

import json
import textwrap

import pytest

from pglab.audit import PRESETS
from pglab.cli import main

USER_LOSS = textwrap.dedent('''
    from pglab.estimators import leave_one_out, reinforce_loss

    def my_loss(logp, ref_logp, rewards, mask, group):
        advantages = leave_one_out(rewards.view(-1, 4)).view(-1)
        return reinforce_loss(logp, advantages, mask, "seq_mean_token_sum")

    def rows(logp, ref_logp, rewards, mask, group):
        return logp.sum(-1)
''')


def test_list_names_every_preset(capsys):
    assert main(["audit", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PRESETS)
    assert {"pglab", "trl-grpo", "trl-grpo-kl-corrected", "trl-rloo", "verl-low_var_kl-token-mean",
            "openrlhf-reinforce"} <= set(PRESETS)


def test_preset_prints_the_table_and_writes_json(tmp_path, capsys):
    path = tmp_path / "audit.json"
    assert main(["audit", "--preset", "trl-rloo", "--beta", "0.2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "relative bias" in out and "reverse_kl" in out and "E[g]" in out     # rich markup is escaped
    report = json.loads(path.read_text())
    assert {"relative_bias", "cosine", "scale", "scaled_bias", "total_variance", "exact", "follows"} <= set(report)
    assert report["exact"] is True and report["follows"] == "reverse_kl" and report["relative_bias"] < 1e-9
    assert report["config"]["beta"] == 0.2
    assert out.splitlines()[0] == "verdict: unbiased: E[g] = grad J" and report["verdict"] == "unbiased: E[g] = grad J"


def test_pglabs_own_exact_loss_reads_as_unbiased_up_to_its_step_size_factor(capsys):
    assert main(["audit", "--preset", "pglab"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "verdict: unbiased up to a step-size factor 0.5"


def report_of(follows, scale=1.0, exact=True, scale_se=None, scaled_bias=0.0, weights=None):
    from pglab.audit.core import AuditReport

    return AuditReport(relative_bias=abs(1 - scale), cosine=1.0, scale=scale, scaled_bias=scaled_bias,
                       total_variance=0.0, exact=exact, follows=follows, batches=1, structure="exact",
                       prompt_weights=weights, standard_errors={} if scale_se is None else {"scale": scale_se})


@pytest.mark.parametrize("report, line", [
    (report_of("reverse_kl", 1.0 + 1e-12), "unbiased: E[g] = grad J"),
    (report_of("reverse_kl", 1.0 + 1e-6), "unbiased up to a step-size factor 1"),
    (report_of("reverse_kl", 0.97, exact=False, scale_se=0.02),
     "unbiased: E[g] = grad J (within the Monte Carlo noise)"),
    (report_of("reverse_kl", 0.9, exact=False, scale_se=0.02),
     "unbiased up to a step-size factor 0.9 (within the Monte Carlo noise)"),
    (report_of("tokenwise_forward_kl", 2.0), "biased: follows E[r] - beta sum_s d(s) KL(ref(.|s) || pi(.|s)), "
                                             "state weights d held fixed (tokenwise_forward_kl)"),
    (report_of("reweighted", weights=[0.5, 1.5]), "biased: follows J with each prompt's term reweighted (0.5, 1.5)"),
    (report_of(None, scaled_bias=0.3412), "biased: no objective found, scaled bias 0.34"),
])
def test_the_verdict_says_the_audit_in_one_line(report, line):
    from pglab.audit.report import verdict

    assert verdict(report) == line


def test_a_users_loss_from_a_file_and_from_a_module(tmp_path, capsys, monkeypatch):
    (tmp_path / "mylosses.py").write_text(USER_LOSS)
    path = tmp_path / "a.json"
    assert main(["audit", "--loss", f"{tmp_path / 'mylosses.py'}:my_loss", "--beta", "0", "--json", str(path)]) == 0
    assert json.loads(path.read_text())["follows"] == "reverse_kl"
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "--loss", "mylosses:my_loss", "--variable-length", "--beta", "0"]) == 0
    assert "reverse_kl" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["audit"], "name a loss"),
    (["audit", "--preset", "trl-rloo", "--loss", "a:b"], "name a loss"),
    (["audit", "--preset", "nope"], "unknown preset 'nope'"),
    (["audit", "--preset", "trl-rloo", "--group-size", "0"], "--group-size must be >= 1"),
    (["audit", "--preset", "trl-rloo", "--beta", "-1"], "--beta must be"),
    (["audit", "--preset", "trl-rloo", "--policy", "lstm"], "expects one of ['table', 'gpt2']"),
    (["audit", "--loss", "nomodule_here:f"], "cannot import"),
    (["audit", "--loss", "justaname"], "module:function"),
    (["audit", "--preset", "trl-rloo", "--json", "/no/such/folder/a.json"], "does not exist"),
])
def test_bad_input_is_one_line_with_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_malformed_loss_names_the_signature(tmp_path, capsys):
    (tmp_path / "mylosses.py").write_text(USER_LOSS)
    assert main(["audit", "--loss", f"{tmp_path / 'mylosses.py'}:rows"]) == 2
    err = capsys.readouterr().err
    assert "not a scalar" in err and "loss_fn(logp, ref_logp, rewards, mask, group)" in err and err.count("\n") == 1
