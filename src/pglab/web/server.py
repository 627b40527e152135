"""`pglab serve`: the course chapter's two demos as a local web page (Starlette + uvicorn, the ``web`` extra).

GET / serves the page and /static its assets (all in the package: no CDN, no network). POST
/api/cloud and /api/race answer with ``pglab.web.api``; bad input gets a 4xx with a one-line
message, any other failure a 500 with its type, and the server keeps serving.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
MAX_BODY = 16_384
"""Bytes: every valid request is well under 1 KB."""


def _api():
    """The math (torch and pglab), imported on first use so that the server starts at once."""
    from pglab.web import api

    return api


async def _call(request: Request, name: str) -> JSONResponse:
    if int(request.headers.get("content-length") or 0) > MAX_BODY:
        return JSONResponse({"error": f"request body over {MAX_BODY} bytes; send only the controls"}, 413)
    raw = await request.body()
    if len(raw) > MAX_BODY:
        return JSONResponse({"error": f"request body over {MAX_BODY} bytes; send only the controls"}, 413)
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return JSONResponse({"error": "the body must be a JSON object, e.g. {\"pi\": [0.3, 0.3, 0.4]}"}, 400)
    if not isinstance(body, dict):
        return JSONResponse({"error": "the body must be a JSON object of controls"}, 400)
    api = await run_in_threadpool(_api)
    try:
        return JSONResponse(await run_in_threadpool(getattr(api, name), body))
    except api.ApiError as err:
        return JSONResponse({"error": str(err)}, 400)


async def cloud(request: Request) -> JSONResponse:
    return await _call(request, "cloud")


async def race(request: Request) -> JSONResponse:
    return await _call(request, "race")


async def index(request: Request) -> FileResponse:
    return FileResponse(STATIC / "index.html")


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server keeps running"}, 500)


def _warm_up() -> None:
    """Import torch and the API in the background, so the first request does not wait for it."""
    import torch

    torch.set_num_threads(1)
    _api()


def create_app(warm_up: bool = True) -> Starlette:
    """The demos' ASGI app."""
    if warm_up:
        threading.Thread(target=_warm_up, daemon=True).start()
    routes = [
        Route("/", index),
        Route("/api/health", health),
        Route("/api/cloud", cloud, methods=["POST"]),
        Route("/api/race", race, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={Exception: server_error})


def serve(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the demos' server until Ctrl-C."""
    import uvicorn

    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
