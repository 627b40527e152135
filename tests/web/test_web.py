"""pglab serve: the demos' JSON API (exact numbers, refusals, 1,000 requests) and the served process over HTTP."""

import os
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install '.[web]'")
pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: pip install '.[dev,web]'")
from starlette.testclient import TestClient  # noqa: E402

from pglab.envs.bandit import GaussianBandit  # noqa: E402
from pglab.web.server import create_app  # noqa: E402
from support.net import free_port  # noqa: E402
from support.server import start_server  # noqa: E402

UNIFORM = [1 / 3, 1 / 3, 1 - 2 / 3]


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(warm_up=False)) as c:
        yield c


@pytest.mark.parametrize("c, baseline, book", [(0, "zero", 4.15), (0, "J", 0.52), (10, "zero", 102.0),
                                               (10, "J", 0.52)])
def test_cloud_spreads_at_the_uniform_policy(client, c, baseline, book):
    """The chapter's spreads (noiseless rewards 1, 2, 4 + c), from the closed form, to the book's precision."""
    data = client.post("/api/cloud", json={"pi": UNIFORM, "c": c, "sigma": 0, "baseline": baseline}).json()
    exact = float(GaussianBandit([1 + c, 2 + c, 4 + c], 0.0).exact_total_variance(
        [0.0, 0.0, 0.0], 0.0 if baseline == "zero" else (7 / 3 + c)))
    assert data["spread_exact"] == pytest.approx(exact, rel=1e-9)
    assert round(data["spread_exact"], 0 if book > 100 else 2) == book


def test_cloud_samples_are_a_prefix_of_the_seed_and_slide_along_their_spokes(client):
    body = {"pi": [0.2, 0.3, 0.5], "c": 5, "sigma": 1, "baseline": "zero", "samples": 30, "seed": 7}
    first = client.post("/api/cloud", json=body).json()
    more = client.post("/api/cloud", json={**body, "samples": 55}).json()
    assert more["samples"][:30] == first["samples"] and len(more["samples"]) == 55
    moved = client.post("/api/cloud", json={**body, "baseline": "b*"}).json()
    for a, b in zip(first["samples"], moved["samples"]):
        assert a["arm"] == b["arm"]
        score = first["scores"][a["arm"]]
        # each estimate is (r - b) * score: changing b moves it along its own spoke by (b - b') * score
        shift = [ga - gb for ga, gb in zip(a["g"], b["g"])]
        assert shift == pytest.approx([moved["b"] * s for s in score], abs=2e-3)


def test_cloud_measured_spread_is_within_three_standard_errors(client):
    """5,000 draws at sigma = 1: the measured total variance lies within 3 se of the exact one (se from the
    per-sample squared deviations of the returned estimates)."""
    import torch

    from pglab.estimators import squared_deviations
    from pglab.stats import standard_error

    data = client.post("/api/cloud", json={"pi": UNIFORM, "c": 0, "sigma": 1, "samples": 5000, "seed": 3}).json()
    estimates = torch.tensor([s["g"] for s in data["samples"]], dtype=torch.float64)
    se = float(standard_error(squared_deviations(estimates)))
    assert abs(data["spread_measured"] - data["spread_exact"]) < 3 * se


@pytest.mark.parametrize("path, body, fix", [
    ("/api/cloud", {"pi": [0.5, 0.6, 0.1]}, "sum to 1"),
    ("/api/cloud", {"pi": [1.0, 0.0, 0.0]}, ">= 0.001"),
    ("/api/cloud", {"pi": "uniform"}, "list of 3"),
    ("/api/cloud", {"pi": UNIFORM, "samples": 10**9}, "whole number in [0, 5000]"),
    ("/api/cloud", {"pi": UNIFORM, "samples": 2.5}, "whole number"),
    ("/api/cloud", {"pi": UNIFORM, "c": 1e9}, "c must be in"),
    ("/api/cloud", {"pi": UNIFORM, "baseline": "median"}, "baseline must be"),
    ("/api/race", {"start": UNIFORM, "steps": 10**6}, "steps must be"),
    ("/api/race", {"start": UNIFORM, "alpha": 0}, "alpha must be in"),
    ("/api/race", {"start": UNIFORM, "alpha": True}, "finite number"),
])
def test_bad_input_gets_a_400_naming_the_fix(client, path, body, fix):
    response = client.post(path, json=body)
    assert response.status_code == 400 and fix in response.json()["error"]


@pytest.mark.parametrize("raw", ['{"pi": [NaN, 0.5, 0.5]}', '{"pi": [0.3, 0.3, 0.4], "c": Infinity}', "[1, 2]",
                                 "not json", '{"pi": [0.3, 0.3, 0.4'])
def test_malformed_bodies_get_a_400(client, raw):
    response = client.post("/api/cloud", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]


def test_huge_bodies_get_a_413(client):
    response = client.post("/api/cloud", content=b"{" + b" " * 100_000 + b"}")
    assert response.status_code == 413


def test_race_matches_the_trainer_and_counts_commitments(client):
    data = client.post("/api/race", json={"start": UNIFORM, "c": 10, "alpha": 0.1, "steps": 400, "seed": 0}).json()
    none, running = data["methods"]["none"], data["methods"]["running"]
    assert len(none["paths"]) == 12 and len(none["paths"][0]) == 401
    assert none["final"]["wrong"] == none["committed_to_wrong"][-1]
    assert 3 <= none["final"]["wrong"] <= 6 and running["final"]["wrong"] == 0
    assert none["not_committed_to_best"][0] == 12


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc to read the resident memory")
@pytest.mark.integration
def test_a_thousand_requests_raise_nothing_and_do_not_grow_memory(client):
    bodies = [("/api/cloud", {"pi": [0.2, 0.3, 0.5], "c": 10, "sigma": 1, "baseline": "J", "samples": 25, "seed": 1}),
              ("/api/race", {"start": [0.05, 0.9, 0.05], "c": 15, "alpha": 0.1, "steps": 20, "seed": 2}),
              ("/api/cloud", {"pi": [0.5, 0.6, 0.1]}),
              ("/api/race", {"start": UNIFORM, "steps": -1})]
    for path, body in bodies * 25:                      # warm up allocator pools and caches
        client.post(path, json=body)
    before = _rss_bytes()
    for i in range(1000):
        path, body = bodies[i % len(bodies)]
        response = client.post(path, json=body)
        assert response.status_code in (200, 400), response.text
    grown = _rss_bytes() - before
    assert grown < 16 * 2**20, f"resident memory grew by {grown / 2**20:.1f} MiB over 1,000 requests"


@pytest.mark.integration
def test_serve_answers_on_loopback(client):
    """The served process over real HTTP on 127.0.0.1: the page and its assets, the health check, and the API's
    numbers and refusals exactly as the in-process app gives them."""
    import httpx

    port = free_port()
    proc, _ = start_server(port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as served:
            page = served.get("/")
            assert page.status_code == 200 and "<title>pglab: policy-gradient demos" in page.text
            for asset in ("/static/app.js", "/static/style.css"):
                assert served.get(asset).content == client.get(asset).content, asset
            assert served.get("/api/health").json() == {"ok": True}
            for path, body in [("/api/cloud", {"pi": [0.2, 0.3, 0.5], "c": 10, "sigma": 1, "baseline": "J",
                                               "samples": 25, "seed": 1}),
                               ("/api/race", {"start": [0.05, 0.9, 0.05], "c": 15, "steps": 20, "seed": 2}),
                               ("/api/cloud", {"pi": [0.5, 0.6, 0.1]})]:
                answer, expected = served.post(path, json=body), client.post(path, json=body)
                assert (answer.status_code, answer.json()) == (expected.status_code, expected.json()), path
    finally:
        proc.terminate()
        proc.wait(10)


def test_serve_refuses_a_bad_port():
    from pglab.cli import main

    assert main(["serve", "--port", "70000"]) == 2
