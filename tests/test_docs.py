"""Every ```python block of README.md and docs/*.md runs as written (blocks of one page share a namespace), and
prints, or leaves behind, what its page says it does."""

import re

import pytest

from support import ROOT
from support.docs import PAGES, python_blocks


def readme(out: str, namespace: dict) -> None:
    """"It prints the exact expected reward J of the learned policy, close to the best arm's 8.0, and the
    probability it gives the best arm"."""
    found = re.fullmatch(r"J = (\d+\.\d{3}) of 8\.0; P\(best\) = (\d\.\d{3})\n", out)
    assert found, out
    value, best = map(float, found.groups())
    assert 7.9 < value <= 8.0 and 0.9 < best <= 1.0, out
    assert value == round(namespace["bandit"].exact_value(namespace["theta"]).item(), 3)


def agent(out: str, namespace: dict) -> None:
    """"With every reward 0 the advantages are all zero, so the step is skipped" (4 tasks x 2 episodes)."""
    shape, skipped = out.splitlines()
    assert shape.startswith("(8, ") and "'reward': 0.0" in shape, shape
    assert skipped == "skipped: every advantage is 0"


def agents(out: str, namespace: dict) -> None:
    """calc_env.py: reset(seed) poses one sum; step(text) -> (observation, reward, done, info), reward 1 for the
    right answer."""
    env = namespace["make_env"]()
    question = env.reset(seed=3)
    a, b = map(int, re.match(r"What is (\d+) \+ (\d+)\?", question).groups())
    assert env.step(f"<call> add {a} {b} </call>") == (str(a + b), 0.0, False, {})
    assert env.step(f"<call> answer {a + b} </call>") == ("done", 1.0, True, {})
    assert out == ""


def audit(out: str, namespace: dict) -> None:
    """"It is exact (every batch enumerated), biased against J, and what it follows instead is the per-token
    forward KL"."""
    exact, follows, relative_bias, scale = out.split()
    assert exact == "True" and follows == "tokenwise_forward_kl" and float(relative_bias) > 0 and float(scale) > 0


def bugfix(out: str, namespace: dict) -> None:
    """The scripted writer's correct clamp is graded "reward 1 (pass)" in the rendered episode."""
    assert "reward 1 (pass)" in out, out


def experiments(out: str, namespace: dict) -> None:
    """run_experiment("loo-enumeration", quick=True) holds its claims; the first two are printed."""
    assert out.startswith("True ['n = 2: ") and out.count("'n = ") == 2, out


def tabular(out: str, namespace: dict) -> None:
    """The comments: a 4x4 lake with gamma 0.95, grad [S, A], G [N] per step, J = start @ V."""
    mdp, theta = namespace["mdp"], namespace["theta"]
    assert mdp.gamma == 0.95 and theta.shape == (16, 4) and namespace["grad"].shape == (16, 4)
    assert namespace["G"].shape == namespace["batch"].rewards.shape
    assert namespace["J"].item() == (mdp.start @ mdp.values(mdp.policy(theta))).item()
    assert out == ""


EXPECTED = {"README.md": readme, "agent.md": agent, "agents.md": agents, "audit.md": audit, "bugfix.md": bugfix,
            "experiments.md": experiments, "tabular.md": tabular}
"""What each page's blocks print or leave behind: (printed text, the blocks' namespace) -> asserts."""
TIERS = {"agent.md": pytest.mark.integration, "bugfix.md": pytest.mark.integration,
         "experiments.md": pytest.mark.experiment}
"""Pages whose blocks start the sandbox's processes (BugFixEnv grades in it) or run an experiment; the others are
unit tests."""


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name, marks=TIERS.get(p.name, ()))
                                  for p in PAGES if python_blocks(p)])
def test_snippets_run_and_do_what_their_page_says(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                      # snippets that write files write them here
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(python_blocks(page)):
        exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)
    assert page.name in EXPECTED, f"{page.name} has python blocks: add what they print to EXPECTED in test_docs.py"
    EXPECTED[page.name](capsys.readouterr().out, namespace)


def test_every_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    missing = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in readme]
    assert not missing, f"README.md does not mention {missing}"
