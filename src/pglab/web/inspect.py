"""`pglab inspect RUN [RUN2]`: a run's step timeline, warnings and recorded transcripts on a local page.

The same stack as ``pglab serve`` (Starlette + uvicorn, the ``web`` extra; the page and its script are in the
package: no CDN, no network). The runs are read once at start (:func:`pglab.apps.inspect.load_run`); GET
/api/runs gives every run's steps and warnings, GET /api/samples?run=i&step=s the recorded rows of one step.
"""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pglab.apps.inspect import InspectedRun
from pglab.runtime.options import SettingsError
from pglab.web.server import STATIC, health, server_error


def _index(request: Request) -> FileResponse:
    return FileResponse(STATIC / "inspect.html")


def _whole(request: Request, key: str, high: int) -> int:
    """The query parameter ``key`` as a whole number in [0, high); ValueError with the fix otherwise."""
    raw = request.query_params.get(key, "")
    if not raw.isdigit() or int(raw) >= high:
        raise ValueError(f"{key} must be a whole number below {high}, got {raw!r}")
    return int(raw)


def create_inspect_app(runs: Sequence[InspectedRun]) -> Starlette:
    """The inspect page's ASGI app over ``runs`` (one column each)."""
    summaries = [run.summary() for run in runs]

    async def all_runs(request: Request) -> JSONResponse:
        return JSONResponse({"runs": summaries})

    async def samples(request: Request) -> JSONResponse:
        try:
            run = runs[_whole(request, "run", len(runs))]
            step = _whole(request, "step", 2**62)
        except ValueError as err:
            return JSONResponse({"error": str(err)}, 400)
        if step not in run.samples:
            return JSONResponse({"error": f"step {step} has no recorded samples; pick one of the listed steps"}, 404)
        return JSONResponse({"step": step, "rows": run.samples[step]})

    routes = [Route("/", _index), Route("/api/health", health), Route("/api/runs", all_runs),
              Route("/api/samples", samples), Mount("/static", StaticFiles(directory=STATIC), name="static")]
    return Starlette(routes=routes, exception_handlers={Exception: server_error})


def check_port(host: str, port: int) -> int:
    """``port`` when a local server can take it on ``host`` (1024-65535 and free, or 0: any free one);
    SettingsError naming the fix otherwise."""
    if isinstance(port, bool) or not isinstance(port, int) or not (port == 0 or 1024 <= port <= 65535):
        raise SettingsError(f"--port must be a whole number from 1024 to 65535 (or 0: any free port), got {port!r}")
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            raise SettingsError(f"cannot listen on {host}:{port} ({err.strerror}); pass another --port") from None
    return port


def serve_inspect(runs: Sequence[InspectedRun], host: str = "127.0.0.1", port: int = 8001, browser: bool = True,
                  echo: Callable[[str], None] = print) -> None:
    """Serve the page until Ctrl-C; once it answers, ``echo`` its address and (``browser``) open it."""
    import uvicorn

    config = uvicorn.Config(create_inspect_app(runs), host=host, port=check_port(host, port), log_level="warning")
    server = uvicorn.Server(config)

    def announce() -> None:
        while not server.started:
            threading.Event().wait(0.05)
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        echo(f"pglab inspect: http://{host}:{bound}/ (Ctrl-C to stop)")
        if browser:
            webbrowser.open(f"http://{host}:{bound}/")

    threading.Thread(target=announce, daemon=True).start()
    server.run()


__all__ = ["check_port", "create_inspect_app", "serve_inspect"]
