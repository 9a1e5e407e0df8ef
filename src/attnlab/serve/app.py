"""The ASGI app of ``attnlab serve``: the page, its script and style, the concept pages, and one JSON
endpoint per view of :mod:`attnlab.serve.views` (which holds every computation).

=====================  =====================================================================
``GET /``              the page (``static/index.html``), strict Content-Security-Policy
``GET /static/NAME``   its script and style (a fixed list read from the package at start)
``GET /concepts/NAME`` a concept page (only the names :mod:`attnlab.concepts` lists)
``GET /api/models``    the models loaded at start (index, name, sizes, views; never a path)
``POST /api/VIEW``     ``{"model": index or name, "text": ..., ...}`` -> the view's JSON
=====================  =====================================================================

Guards: a request whose ``Host`` is not one this server was started for is refused (DNS
rebinding), as is a cross-origin ``Origin`` and a request with two of either header; no CORS header
is ever sent; a POST must be ``application/json`` of at most :data:`MAX_BODY` bytes, sent within
:data:`BODY_SECONDS` (a client that leaves mid-body is one line in the log); every error is JSON
``{"error": ...}`` with a 4xx status (5xx only for ``Busy``, with ``Retry-After``, and for a bug,
which is logged and never stops the server). Model work runs on
:class:`~attnlab.serve.jobs.Jobs`' worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import traceback
from collections.abc import Callable
from importlib.resources import files

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from attnlab import concepts
from attnlab._checks import did_you_mean
from attnlab._io import dumps_json
from attnlab.models.load import Loaded
from attnlab.serve import views
from attnlab.serve.jobs import Busy, Jobs

MAX_BODY = 64 * 1024  # bytes of one request body: two texts of MAX_CHARS characters, JSON-escaped
BODY_SECONDS = 30.0  # to send one whole body: a stalled client does not hold a connection forever
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "draw.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = [  # on every response; never an Access-Control-* header
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
log = logging.getLogger("attnlab.serve")


def _json(data, status: int = 200, headers: dict | None = None) -> Response:
    return Response(dumps_json(data), status, headers, media_type="application/json")


def script_json(data) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``: ASCII only (``dumps_json``
    escapes the rest, U+2028/9 included) with ``<``, ``>`` and ``&`` escaped too, so a model label
    holding ``</script>`` cannot end the element."""
    text = dumps_json(data)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(ch, esc)
    return text


def error(status: int, message: str, headers: dict | None = None) -> Response:
    """``{"error": message}`` with ``status``."""
    return _json({"error": message}, status, headers)


class Guard:
    """Pure ASGI middleware: refuse a foreign ``Host`` or ``Origin``, or either header sent twice;
    add :data:`HEADERS`."""

    def __init__(self, app, hosts: set[str]):
        self.app, self.hosts = app, {h.lower() for h in hosts}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers: dict[str, list[str]] = {}
        for k, v in scope["headers"]:
            headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
        host, origin = headers.get("host", [""])[-1].lower(), headers.get("origin", [None])[-1]
        twice = [name for name in ("host", "origin") if len(headers.get(name, ())) > 1]
        refusal = None
        if twice:  # which one a proxy or a browser reads is anyone's guess: neither is trusted
            refusal = f"the request has {len(headers[twice[0]])} {twice[0].title()} headers; one is allowed"
        elif host not in self.hosts:
            served = " or ".join(sorted(self.hosts))
            refusal = f"this server answers to Host {served}, not {host!r} (a DNS rebinding guard)"
        elif origin is not None and origin.lower() not in self.origins:
            refusal = f"requests from the origin {origin!r} are refused: only the page this server serves"

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        if refusal is not None:
            return await error(403, refusal)(scope, receive, send_with_headers)
        return await self.app(scope, receive, send_with_headers)


async def read_json(request: Request) -> dict:
    """The request's JSON object, read up to :data:`MAX_BODY` bytes within :data:`BODY_SECONDS` (an
    ``HTTPException`` past either, or for anything but a JSON object sent as ``application/json``). A
    client that leaves mid-body is one line in the log, not a traceback."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise HTTPException(415, f"send the request as application/json, not {kind or 'no content type'}")
    declared = request.headers.get("content-length", "0")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise HTTPException(413, f"the request body has {int(declared):,} bytes; at most {MAX_BODY:,}")
    body = bytearray()

    async def gather() -> None:
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > MAX_BODY:
                raise HTTPException(413, f"the request body is longer than {MAX_BODY:,} bytes")

    try:
        await asyncio.wait_for(gather(), BODY_SECONDS)
    except ClientDisconnect:  # a short body, a broken chunk, a client gone: nobody to answer
        path, got = request.url.path, len(body)
        log.warning("attnlab serve: %s: the client left after %d bytes of its body", path, got)
        raise HTTPException(400, "the client disconnected before the request body ended") from None
    except asyncio.TimeoutError:  # noqa: UP041 (not yet TimeoutError on Python 3.10)
        log.warning("attnlab serve: %s: no whole body after %g s; closed", request.url.path, BODY_SECONDS)
        raise HTTPException(408, f"the request body did not arrive within {BODY_SECONDS:g} s") from None
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HTTPException(
            400, f"the request body is not JSON: {str(exc)[:80] or type(exc).__name__}"
        ) from None
    if not isinstance(data, dict):
        raise HTTPException(400, f"the request body must be a JSON object, got {type(data).__name__}")
    return data


class Served:
    """The models loaded at start, by index and by name (the only way a client chooses one)."""

    def __init__(self, models: list[tuple[str, Loaded]]):
        if not models:
            raise ValueError("no model to serve")
        self.names = [name for name, _ in models]
        self.loaded = [loaded for _, loaded in models]
        for loaded in self.loaded:
            views.check_servable(loaded)
        self.info = [views.describe(m, i, n) for i, (n, m) in enumerate(models)]

    def pick(self, value) -> Loaded:
        if value is None:
            return self.loaded[0]
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(self.loaded):
            return self.loaded[value]
        if isinstance(value, str) and value in self.names:
            return self.loaded[self.names.index(value)]
        hint = did_you_mean(value, self.names) if isinstance(value, str) else ""
        raise HTTPException(
            404,
            f"no model {views.shown(value)} is loaded: choose 0..{len(self.names) - 1} or "
            f"{views.shown(self.names)}{hint}",
        )


def _package_files() -> dict[str, bytes]:
    folder = files("attnlab.serve") / "static"
    return {name: (folder / name).read_bytes() for name in ("index.html", *STATIC)}


class Endpoints:
    """The routes' handlers over one set of served models, one job queue and the package's files."""

    def __init__(self, served: Served, jobs: Jobs):
        self.served, self.jobs, self.static = served, jobs, _package_files()
        # the model list rides in the page as JSON data (never run: not a script's type), so the page
        # asks for its first view at once instead of after one more round trip
        self.index = self.static["index.html"].replace(b"{{SERVED}}", script_json(self.listing()).encode())
        self.pages = {concepts.html_name(md): md for md in ["README.md", *concepts.page_names()]}
        self.rendered: dict[str, bytes] = {}

    def listing(self) -> dict:
        """The models (no path), each view's text and concept pages, and the bounds."""
        limits = {"max_chars": views.MAX_CHARS, "max_body": MAX_BODY, "queue": self.jobs.capacity}
        return {"models": self.served.info, "guide": views.guide(), "limits": limits}

    async def page(self, request: Request) -> Response:
        headers = {"content-security-policy": PAGE_POLICY}
        return Response(self.index, headers=headers, media_type="text/html; charset=utf-8")

    async def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            raise HTTPException(404, f"no file {name!r}")
        return Response(self.static[name], media_type=STATIC[name])

    async def concept(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.pages:
            raise HTTPException(404, f"no concept page {name!r}")
        if name not in self.rendered:
            self.rendered[name] = concepts.render_page(self.pages[name], back=("/", "attnlab serve")).encode()
        return Response(self.rendered[name], media_type="text/html; charset=utf-8")

    async def models(self, request: Request) -> Response:
        return _json(self.listing())

    async def view(self, request: Request) -> Response:
        name = request.path_params["view"]
        if name not in views.VIEWS:
            raise HTTPException(404, f"there is no view {name!r}{did_you_mean(name, views.VIEWS)}")
        body = await read_json(request)
        loaded = self.served.pick(body.get("model"))
        try:
            views.check_request(name, loaded, body)  # bad input never takes a place in the queue
            result, seconds = await self.jobs.run(views.answer, name, loaded, body)
        except Busy as busy:
            return error(503, str(busy), {"retry-after": str(busy.retry_after)})
        except ValueError as exc:
            return error(400, str(exc).splitlines()[0] if str(exc) else "bad input")
        except Exception as exc:  # a bug: logged once, answered, and the server goes on
            log.error("attnlab serve: /api/%s failed:\n%s", name, "".join(traceback.format_exception(exc)))
            return error(500, f"internal error ({type(exc).__name__}); the server keeps running")
        return _json(result, headers={"server-timing": f"compute;dur={seconds * 1e3:.2f}"})


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return error(exc.status_code, str(exc.detail))


def create_app(
    models: list[tuple[str, Loaded]],
    hosts: set[str],
    *,
    queue: int = 8,
    on_ready: Callable[[], None] | None = None,
):
    """The app serving ``models`` (``(name, loaded)`` pairs) to requests addressed to ``hosts``
    (``"127.0.0.1:8000"`` ...), with a queue of ``queue`` requests behind the one running;
    ``on_ready()`` runs once the server is up."""
    jobs = Jobs(queue)
    e = Endpoints(Served(models), jobs)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if on_ready is not None:
            on_ready()
        yield
        jobs.close()

    routes = [
        Route("/", e.page, methods=["GET"]),
        Route("/static/{name}", e.asset, methods=["GET"]),
        Route("/concepts/{name}", e.concept, methods=["GET"]),
        Route("/api/models", e.models, methods=["GET"]),
        Route("/api/{view}", e.view, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error})
    app.state.jobs = jobs
    return Guard(app, hosts)
