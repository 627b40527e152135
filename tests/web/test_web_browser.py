"""The demos in a real browser: headless Chromium (Debian's package) driven by Playwright.

It drags the policy, presses the buttons, reads the displayed numbers and compares them with the
exact values; it keeps a screenshot of each demo in test-artifacts/ (or $PGLAB_TEST_ARTIFACTS).
Without Chromium or Playwright the tests are skipped with the reason (tests/setup_system.sh
installs Debian's chromium). No browser is ever downloaded.
"""

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install '.[web]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install '.[dev]'")

from pglab.envs.bandit import GaussianBandit  # noqa: E402
from support import ROOT  # noqa: E402
from support.net import free_port  # noqa: E402
from support.server import start_server  # noqa: E402

CHROMIUM = os.environ.get("PGLAB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("PGLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found: run tests/setup_system.sh "
                                                          "(apt-get install chromium) or set PGLAB_CHROMIUM")]


@pytest.fixture(scope="module")
def page():
    port = free_port()
    proc, _ = start_server(port)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": 1100, "height": 1400})
            pg = context.new_page()
            errors = []
            pg.on("pageerror", lambda exc: errors.append(str(exc)))
            pg.goto(f"http://127.0.0.1:{port}/")
            pg.wait_for_function("document.getElementById('spread-exact').textContent.length > 0")
            yield pg
            assert not errors, errors
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)


def shown(page, selector: str, text: str) -> str:
    """Wait until the element shows ``text`` (the page answers asynchronously) and return it."""
    page.wait_for_function("([s, t]) => document.querySelector(s).textContent === t", arg=[selector, text],
                           timeout=10_000)
    return page.text_content(selector)


def spread_text(c: float, b: float | None) -> str:
    """The exact spread at the uniform policy, noiseless rewards 1, 2, 4 + c, as the page formats it."""
    bandit = GaussianBandit([1 + c, 2 + c, 4 + c], 0.0)
    value = float(bandit.exact_total_variance([0.0, 0.0, 0.0], bandit.exact_value([0.0, 0.0, 0.0]) if b is None
                                               else b))
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}"


def test_cloud_shows_the_chapters_spreads(page):
    """4.15 at b = 0, 0.52 at b = J; about 102 at c = 10, b = 0; 0.52 at c = 10, b = J."""
    assert shown(page, "#spread-exact", spread_text(0, 0.0)) == "4.15"
    page.click("#b-J")
    assert shown(page, "#spread-exact", spread_text(0, None)) == "0.52"
    page.fill("#c", "10")
    page.press("#c", "Enter")
    page.click("#b-zero")
    assert shown(page, "#spread-exact", spread_text(10, 0.0)) == "102"
    page.click("#b-J")
    assert shown(page, "#spread-exact", spread_text(10, None)) == "0.52"
    assert page.text_content("#J") == "12.33"
    page.click("#add25")
    page.click("#add25")
    assert shown(page, "#n-samples", "50") == "50"
    assert page.locator("#cloud circle.dot").count() == 50
    page.click("#zoom")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#cloud-demo").screenshot(path=str(ARTIFACTS / "demo1_gradient_cloud.png"))
    page.click("#clear")
    assert shown(page, "#n-samples", "0") == "0"


def test_cloud_drag_and_keyboard_move_the_policy(page):
    page.click("#reset")
    shown(page, "#pi-readout", "(0.33, 0.33, 0.33)")
    for selector in ("#policy", "#tri polygon"):                   # a redraw may still be replacing them
        page.locator(selector).wait_for(state="visible")
    box = page.locator("#policy").bounding_box()
    corner = page.locator("#tri polygon").bounding_box()          # arm 1 is the bottom-left corner
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(corner["x"] + 0.2 * corner["width"], corner["y"] + 0.85 * corner["height"], steps=8)
    page.mouse.up()
    page.wait_for_function("document.getElementById('pi-readout').textContent !== '(0.33, 0.33, 0.33)'")
    page.wait_for_timeout(300)
    pi = [float(x) for x in page.text_content("#pi-readout").strip("()").split(",")]
    assert pi[0] > 0.5, pi
    bandit = GaussianBandit([1.0, 2.0, 4.0], 0.0)
    import torch

    theta = torch.tensor(pi, dtype=torch.float64).log()
    # The readout rounds pi to 2 decimals, which moves J by at most 4 * 0.005 * 3 = 0.06.
    assert abs(float(page.text_content("#J")) - float(bandit.exact_value(theta))) < 0.07
    page.focus("#policy")
    before = page.text_content("#pi-readout")
    page.keyboard.press("ArrowUp")
    page.wait_for_function("b => document.getElementById('pi-readout').textContent !== b", arg=before)


def test_race_counts_runs_committed_to_a_wrong_arm(page):
    """c = 10, alpha = 0.1, 400 steps from the uniform start: 3-6 of 12 without, none with the baseline."""
    page.click("#speed")
    page.click("#speed")
    assert page.text_content("#speed") == "Speed 4×"
    page.click("#play")
    shown(page, "#race-step", "400")
    wrong_without = int(page.text_content("#nb-wrong").split()[0])
    assert 3 <= wrong_without <= 6
    assert page.text_content("#b-wrong") == "0 of 12"
    assert page.text_content("#b-uncommitted") == "0 of 12"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#race-demo").screenshot(path=str(ARTIFACTS / "demo2_race.png"))
    page.click("#plus10")
    shown(page, "#race-step", "410")
    box = page.locator("#race-tri polygon").bounding_box()       # tap near the arm-2 corner
    page.mouse.click(box["x"] + 0.85 * box["width"], box["y"] + 0.9 * box["height"])
    shown(page, "#race-step", "0")
    assert page.text_content("#nb-uncommitted") == "12 of 12"


def test_phone_sized_screen_has_no_sideways_scroll(page):
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(200)
    assert page.evaluate("document.documentElement.scrollWidth") <= 391
    page.set_viewport_size({"width": 1100, "height": 1400})
