"""pglab inspect in a real browser (headless Chromium driven by Playwright) on a `train-agent --quick` run: the
transcripts show every policy token with a colour and its advantage, the filters hide and show episodes, a second
run gets its own column. Skipped with the reason without Chromium or Playwright (tests/setup_system.sh)."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install '.[web]'")
pytest.importorskip("transformers")
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install '.[dev]'")

from pglab.cli import main  # noqa: E402
from support import ROOT  # noqa: E402
from support.net import free_port  # noqa: E402

CHROMIUM = os.environ.get("PGLAB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("PGLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
QUICK = ["--quick", "--steps", "2", "--episodes-per-step", "4", "--group-size", "2", "--advantage", "rloo",
         "--eval-per-task", "1"]
"""train-agent --quick cut to two steps of four episodes (rloo: some advantages are 0, some not)."""

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found: run tests/setup_system.sh "
                                                          "(apt-get install chromium) or set PGLAB_CHROMIUM")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A train-agent --quick run and a copy of it under another name (the second column)."""
    first = tmp_path_factory.mktemp("inspect") / "agent-run"
    assert main(["train-agent", *QUICK, "--out", str(first)]) == 0
    second = first.with_name("agent-run-copy")
    shutil.copytree(first, second, ignore=shutil.ignore_patterns("policy", "checkpoint.pt"))
    return first, second


def inspect_server(port: int, *folders: Path) -> subprocess.Popen:
    """`pglab inspect FOLDERS --port port --no-browser` in a subprocess, once it prints its address."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-m", "pglab", "inspect", *map(str, folders), "--port", str(port),
                             "--no-browser"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    began = time.perf_counter()
    line = proc.stdout.readline()
    if f":{port}/" not in line:
        proc.kill()
        raise RuntimeError(f"pglab inspect did not start within {time.perf_counter() - began:.0f} s: {line}"
                           f"{proc.stdout.read()}")
    return proc


@pytest.fixture(scope="module")
def page(runs):
    port = free_port()
    proc = inspect_server(port, *runs)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            pg = browser.new_context(viewport={"width": 1400, "height": 1400}).new_page()
            errors = []
            pg.on("pageerror", lambda exc: errors.append(str(exc)))
            pg.goto(f"http://127.0.0.1:{port}/")
            pg.wait_for_function("document.body.dataset.ready === 'true'", timeout=20_000)
            yield pg
            assert not errors, errors
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)


def shown_number(x: float) -> str:
    """A number as the page's fmt writes it."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2f}" if abs(x) >= 1 else f"{x:.4f}"


def recorded(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def test_transcripts_show_every_policy_token_with_its_advantage(page, runs):
    """The last recorded step's episodes: one per recorded row, every policy token a coloured span whose value is
    the recorded advantage, the transcript's text the recorded tokens' text."""
    lines = [line for line in recorded(runs[0]) if line["step"] == 1]
    episodes = page.locator("#run-0 .episode")
    assert episodes.count() == len(lines) == 4
    for k, line in enumerate(lines):
        episode = episodes.nth(k)
        assert episode.locator(".transcript").text_content() == "".join(line["text"])
        spans = episode.locator(".tok.policy")
        policy = [i for i, o in enumerate(line["owner"]) if o == 2]
        assert spans.count() == len(policy) > 0
        shown = spans.evaluate_all("nodes => nodes.map(n => [Number(n.dataset.value), n.style.backgroundColor, "
                                   "n.title])")
        for (value, colour, title), i in zip(shown, policy):
            assert value == line["adv"][i] and colour.startswith("rgba(") and title.startswith("advantage = ")
        assert f"advantage {shown_number(line['advantage'])}" in episode.locator(".episode-head").text_content()
    assert page.locator("#run-0 .metric[data-metric=reward] polyline").count() == 1
    assert page.locator("#run-0 .warnings li").count() >= 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "inspect_train_agent.png"), full_page=True)


def test_failed_filter_hides_passing_episodes_and_shows_them_again(page, runs):
    lines = [line for line in recorded(runs[0]) if line["step"] == 1]
    failed = sum(line["passed"] is False for line in lines)
    visible = "#run-0 .episode:not([hidden])"
    page.check("#f-failed")
    assert page.locator(visible).count() == failed
    page.uncheck("#f-failed")
    assert page.locator(visible).count() == len(lines)
    page.check("#f-clipped")                    # reinforce's -A log pi clips nothing
    assert page.locator(visible).count() == 0
    page.uncheck("#f-clipped")


def test_second_run_has_its_own_column_and_steps(page, runs):
    assert page.locator(".run").count() == 2
    assert page.locator("#run-1 h2").text_content() == runs[1].name
    first = [line for line in recorded(runs[1]) if line["step"] == 0][0]
    page.select_option("#run-1 select.step", "0")
    page.wait_for_function("t => document.querySelector('#run-1 .episode .transcript').textContent === t",
                           arg="".join(first["text"]))
    page.select_option("#quantity", "mismatch")
    titles = page.locator("#run-1 .episode .tok.policy").evaluate_all("nodes => nodes.map(n => n.title)")
    assert titles and all(t.startswith("sampler/trainer mismatch = ") for t in titles)
