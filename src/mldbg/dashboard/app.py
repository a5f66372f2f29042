"""The live dashboard: a FastAPI app serving one page and a JSON API over one or more runs.

The whole API (run discovery and status, configuration, server-sent events at /api/events,
per-layer health, several tensors per call, findings' evidence, the profiler panel, stop,
time axes, evaluation passes, compression) is specified in docs/dashboard_api.md; the list
below is the original core of it.

`create_app(paths, rules=None, refresh_seconds=1.0)` builds it; `mldbg dashboard PATH...`
serves it with uvicorn. A background thread re-reads every run each `refresh_seconds`, another
runs the rules over the new steps; the page polls the API and redraws in place.

JSON endpoints (all GET; errors are `{"detail": "..."}` with 404 for an unknown run, tensor or
step, 400 for a bad parameter, never a stack trace). NaN and infinities, which JSON lacks,
are sent as the strings "NaN", "Infinity", "-Infinity". `since=STEP` on the series endpoints
returns only the steps after STEP, for incremental polling.

    /api/runs                                   {"runs": [run summary...], "reductions", "percentiles",
                                                 "refresh_seconds", "rules"}; a summary is
                                                 {name, path, status (waiting|running|finished|error),
                                                 steps, last_step, workers, loaded_all_steps, finished,
                                                 seconds_since_new_step, findings, rules_failed,
                                                 corrupt, error}
    /api/runs/{run}                             one run summary
    /api/runs/{run}/tensors                     {"tensors": [names], "collections": {collection: [names]}}
    /api/runs/{run}/scalars?since=&limit=&offset=&match=
                                                {"series": [{name, collection, steps, modes, values}],
                                                 "scalars_total"}: the `losses` and `scalars`
                                                 collections over global steps, each step with its
                                                 mode (TRAIN, EVAL, ...); `limit`, `offset`, `match`:
                                                 a page of the scalars (the losses always whole)
    /api/runs/{run}/reduction?tensor=NAME&reduction=mean&abs=false&since=
                                                {tensor, reduction, abs, steps, modes, values}: the saved
                                                 reduction, or computed from the raw values
                                                 (min max mean std variance sum prod l1 l2)
    /api/runs/{run}/distribution?tensor=NAME&since=
                                                {tensor, percentiles, steps, modes, values: [[one per
                                                 percentile] per step], nonfinite, size}
    /api/runs/{run}/histogram?tensor=NAME&step=N&bins=30
                                                {tensor, step, mode, steps, edges, counts, nonfinite, size};
                                                 without step, the tensor's last step
    /api/runs/{run}/findings                    {enabled, done, rules, checked_step, findings: [{run, rule,
                                                 step, mode, message, tensors, suggestion}], skipped, errors}:
                                                 the rules run live (incrementally) on each refresh;
                                                 `done` once the run ended and every step was checked
    /api/findings                               {"runs": {run: findings of that run as above}}

The page is `/` (static/index.html + dashboard.js); Plotly.js is served from the installed
`plotly` package at /static/plotly.min.js, so the dashboard works with no internet.

Every request first passes `mldbg.access`: a `Host` header that does not name this server is
answered 421 (DNS rebinding), and a dashboard bound to a non-loopback address (or given a
token) answers 401 to a request without its token (`?token=`, which also sets a cookie,
`Authorization: Bearer`, or that cookie).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import importlib.resources
import json
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from typing import Any

from mldbg.access import Access
from mldbg.dashboard.data import PERCENTILES, AlreadyEnded, Dashboard, NotFound, UnknownRun
from mldbg.dashboard.events import sse
from mldbg.errors import InvalidConfig, MldbgError
from mldbg.store.reductions import REDUCTION_NAMES

log = logging.getLogger("mldbg")

STATIC = ("index.html", "dashboard.js", "dashboard.css")
MEDIA = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css"}


def plotly_js() -> bytes:
    """plotly.min.js as shipped inside the `plotly` Python package (no CDN)."""
    try:
        return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise InvalidConfig(
            f"the dashboard draws with Plotly.js from the `plotly` package, which is missing ({e}): "
            "pip install 'mldbg[dashboard]'"
        ) from None


PING_SECONDS = 15.0


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:20] + '"'


def _static(name: str) -> bytes:
    return (importlib.resources.files("mldbg.dashboard") / "static" / name).read_bytes()


def create_app(
    paths: Sequence[str | os.PathLike[str]],
    rules: Sequence[Any] | None = None,
    refresh_seconds: float = 1.0,
    *,
    stall_seconds: float = 60.0,
    host: str = "127.0.0.1",
    port: int | None = None,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> Any:
    """A FastAPI app serving the runs at `paths` (local paths or s3:// URLs; a local folder of
    runs serves each run in it). `rules`: None runs the default rule set live on every run, a
    list of rule specs (as `mldbg check --rule`) those, `[]` none. The refresher thread runs
    while the app does (its lifespan); `app.state.dashboard` is the data layer.

    `host` and `port`: where it will be served (the `Host` header must name it; see
    `mldbg.access`); `token`: required on every request when set, and generated when `host`
    is not a loopback address (`app.state.access.token`, `app.state.access.url(base)`);
    `allowed_hosts`: more names a browser may use to reach it (behind a proxy, say)."""
    from fastapi import FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import Response, StreamingResponse
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware.gzip import GZipMiddleware

    # the handlers' annotations are strings (`from __future__ import annotations`): FastAPI
    # resolves `Request` in this module's namespace, where the lazy import must put it
    globals().setdefault("Request", Request)

    dashboard = Dashboard(paths, rules=rules, refresh_seconds=refresh_seconds, stall_seconds=stall_seconds)
    js = plotly_js()
    pages = {name: _static(name) for name in STATIC}
    etags = {name: _etag(body) for name, body in pages.items()}
    # plotly.min.js compressed once, in the background (about 0.2 s), served with Content-Encoding
    packed: dict[str, bytes] = {}
    packer = threading.Thread(target=lambda: packed.update(js=gzip.compress(js, 6)), daemon=True)
    packer.start()
    js_etag = _etag(js)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        dashboard.start()
        try:
            yield
        finally:
            dashboard.stop()

    access = Access(host=host, port=port, token=token, allowed_hosts=allowed_hosts)
    app = FastAPI(title="mldbg dashboard", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.dashboard = dashboard
    app.state.access = access
    # JSON over 1 KB compressed; never the event stream (Starlette skips text/event-stream),
    # nor plotly.min.js, which goes pre-compressed (a response with Content-Encoding is left alone)
    app.add_middleware(GZipMiddleware, minimum_size=1000, compresslevel=5)

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        refused = access.check(request.url.query, request.headers)
        if refused is not None:
            status, reason = refused
            return error(status, f"{reason} ({request.url.path} refused)")
        response = await call_next(request)
        if access.token is not None and access.token_ok(request.url.query, {})[1]:
            response.headers["Set-Cookie"] = access.cookie_header()
        return response

    def send(content: Any, status: int = 200) -> Response:
        body = json.dumps(content, separators=(",", ":"), allow_nan=False)
        return Response(
            body, status_code=status, media_type="application/json", headers={"Cache-Control": "no-store"}
        )

    def error(status: int, message: str) -> Response:
        return send({"detail": message}, status)

    @app.exception_handler(UnknownRun)
    async def _unknown_run(request: Request, e: UnknownRun) -> Response:
        return error(404, str(e))

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, e: NotFound) -> Response:
        return error(404, str(e))

    @app.exception_handler(InvalidConfig)
    async def _invalid(request: Request, e: InvalidConfig) -> Response:
        return error(400, str(e))

    @app.exception_handler(AlreadyEnded)
    async def _ended(request: Request, e: AlreadyEnded) -> Response:
        return error(409, str(e))

    @app.exception_handler(MldbgError)
    async def _mldbg(request: Request, e: MldbgError) -> Response:
        return error(500, f"{type(e).__name__}: {e}")

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, e: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err.get('loc', ())[1:]) or 'request'}: {err.get('msg', err)}"
            for err in e.errors()
        )
        return error(400, f"bad request to {request.url.path}: {problems}")

    @app.exception_handler(Exception)
    async def _internal(request: Request, e: Exception) -> Response:
        log.exception("mldbg dashboard: %s failed", request.url.path)
        return error(500, f"internal error on {request.url.path}: {type(e).__name__}: {e}")

    # the page -------------------------------------------------------------------------------
    def asset(request: Request, body: bytes, name: str, etag: str, cache: bool = False) -> Response:
        media = MEDIA[os.path.splitext(name)[1]]
        headers = {
            "Cache-Control": "public, max-age=31536000, immutable" if cache else "no-cache",
            "ETag": etag,
        }
        if etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=media, headers=headers)

    @app.get("/", include_in_schema=False)
    def index(request: Request) -> Response:
        return asset(request, pages["index.html"], "index.html", etags["index.html"])

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly(request: Request) -> Response:
        if "gzip" not in request.headers.get("accept-encoding", "").lower():
            return asset(request, js, "plotly.min.js", js_etag, cache=True)
        packer.join()
        response = asset(request, packed["js"], "plotly.min.js", js_etag, cache=True)
        response.headers["Content-Encoding"] = "gzip"
        response.headers["Vary"] = "Accept-Encoding"
        return response

    @app.get("/static/{name}", include_in_schema=False)
    def static(request: Request, name: str) -> Response:
        if name not in pages:
            return error(404, f"no static file {name!r}")
        return asset(request, pages[name], name, etags[name])

    # the API --------------------------------------------------------------------------------
    @app.get("/api/runs")
    def runs() -> Response:
        return send(
            {
                "runs": [r.summary() for r in dashboard.runs.values()],
                "reductions": list(REDUCTION_NAMES),
                "percentiles": list(PERCENTILES),
                "refresh_seconds": dashboard.refresh_seconds,
                "stall_seconds": dashboard.stall_seconds,
                "sources": [source.location for source in dashboard.sources],
                "rules": {
                    "enabled": dashboard.with_rules,
                    "specs": None if dashboard.rule_specs is None else [str(s) for s in dashboard.rule_specs],
                },
            }
        )

    @app.get("/api/findings")
    def all_findings() -> Response:
        return send({"runs": {name: r.findings_info() for name, r in dashboard.runs.items()}})

    @app.get("/api/scalars")
    def many_scalars(
        run: list[str] = Query(..., description="run names"),  # noqa: B008
        since: int | None = None,
        limit: int | None = None,
        offset: int = 0,
        match: str | None = None,
    ) -> Response:
        out: dict[str, Any] = {}
        for name in run:
            try:
                out[name] = dashboard.run(name).scalars(since, limit, offset, match)
            except MldbgError as e:
                out[name] = {"detail": str(e)}
        return send({"runs": out})

    @app.get("/api/events")
    async def events(request: Request) -> Response:
        """Server-sent events (docs/dashboard_api.md): hello, then what the refresher saw."""
        log_ = dashboard.events
        last = request.headers.get("last-event-id", "")

        async def hello() -> str:
            summaries = await run_in_threadpool(lambda: [r.summary() for r in dashboard.runs.values()])
            return sse("hello", {"runs": summaries, "seq": log_.seq}, log_.seq)

        async def stream() -> AsyncIterator[str]:
            seq = int(last) if last.isdigit() and log_.since(int(last)) is not None else None
            if seq is None:
                seq = log_.seq
                yield await hello()
            pinged = time.monotonic()
            while True:
                found = log_.since(seq)
                if found is None:  # too far behind: start again from the current state
                    seq = log_.seq
                    yield await hello()
                    continue
                for number, name, data in found:
                    yield sse(name, data, number)
                    seq = number
                if time.monotonic() - pinged > PING_SECONDS:
                    pinged = time.monotonic()
                    yield ": ping\n\n"
                await asyncio.sleep(0.1)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # run names may hold "/" (runs told apart by their parent folder): `:path` converters,
    # the specific routes before the bare one
    @app.get("/api/runs/{run:path}/tensors")
    def tensors(run: str) -> Response:
        return send(dashboard.run(run).tensors())

    @app.get("/api/runs/{run:path}/scalars")
    def scalars(
        run: str,
        since: int | None = None,
        limit: int | None = None,
        offset: int = 0,
        match: str | None = None,
    ) -> Response:
        return send(dashboard.run(run).scalars(since, limit, offset, match))

    @app.get("/api/runs/{run:path}/reduction")
    def reduction(
        run: str,
        tensor: str = Query(..., description="tensor name"),
        reduction: str = "mean",
        abs: bool = False,
        since: int | None = None,
    ) -> Response:
        return send(dashboard.run(run).reduction(tensor, reduction, abs, since))

    @app.get("/api/runs/{run:path}/distribution")
    def distribution(run: str, tensor: str = Query(...), since: int | None = None) -> Response:
        return send(dashboard.run(run).distribution(tensor, since))

    @app.get("/api/runs/{run:path}/histogram")
    def histogram(run: str, tensor: str = Query(...), step: int | None = None, bins: int = 30) -> Response:
        return send(dashboard.run(run).histogram(tensor, step, bins))

    @app.get("/api/runs/{run:path}/findings/{id}/evidence")
    def evidence(run: str, id: int) -> Response:
        return send(dashboard.run(run).evidence(id))

    @app.get("/api/runs/{run:path}/findings")
    def findings(run: str) -> Response:
        return send(dashboard.run(run).findings_info())

    @app.get("/api/runs/{run:path}/config")
    def config(run: str) -> Response:
        return send(dashboard.run(run).config())

    @app.get("/api/runs/{run:path}/series")
    def series(
        run: str,
        tensor: list[str] = Query(..., description="tensor names (or regexes with regex=true)"),  # noqa: B008
        reduction: str = "l2",
        abs: bool = False,
        since: int | None = None,
        regex: bool = False,
    ) -> Response:
        return send(dashboard.run(run).series(tensor, reduction, abs, since, regex))

    @app.get("/api/runs/{run:path}/layers")
    def layers(run: str, since: int | None = None) -> Response:
        return send(dashboard.run(run).layers(since))

    @app.get("/api/runs/{run:path}/profiler")
    def profiler(run: str) -> Response:
        return send(dashboard.run(run).profiler())

    @app.post("/api/runs/{run:path}/stop")
    async def stop(run: str, request: Request) -> Response:
        if request.headers.get("x-mldbg") != "1":
            return error(
                403, f"POST {request.url.path} refused: send the header `X-Mldbg: 1` (as the page does)"
            )
        origin = request.headers.get("origin")
        if origin:
            problem = access.host_problem(urllib.parse.urlsplit(origin).netloc or origin)
            if problem is not None:
                return error(403, f"POST {request.url.path} refused: Origin {origin!r} is not this dashboard")
        reason = ""
        raw = await request.body()
        if raw:
            try:
                given = json.loads(raw)
                reason = str(given.get("reason", "")) if isinstance(given, dict) else ""
            except ValueError:
                return error(
                    400, f'POST {request.url.path}: the body is not JSON; send {{"reason": "..."}} or nothing'
                )
        target = dashboard.run(run)
        answer = await run_in_threadpool(target.stop, reason)
        dashboard.events.publish(
            "stop", {"run": target.name, "reason": answer["reason"], "requested": time.time()}
        )
        return send(answer, 202)

    @app.get("/api/runs/{run:path}")
    def one_run(run: str) -> Response:
        return send(dashboard.run(run).summary())

    @app.get("/api/{rest:path}", include_in_schema=False)
    def unknown_api(rest: str) -> Response:
        return error(
            404, f"no endpoint /api/{rest}; see /api/runs (the endpoints are listed in docs/dashboard_api.md)"
        )

    return app
