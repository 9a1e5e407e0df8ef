"""Starting ``attnlab serve``: load the models once, bind the socket, run uvicorn (in the foreground
for the command, in a thread for tests and the benchmark).

The socket is bound before uvicorn starts, so a port in use or a host that is not this machine's
is one clear ``ValueError`` (and port 0 picks a free port, whose number the Host guard needs).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from attnlab.models.load import Loaded, load, origin_of
from attnlab.serve import views

DEMO = Path("out") / "demo"  # where `make demo` writes; a run saved under it is served by default


def default_sources(root: Path = DEMO) -> list[str]:
    """``minilm`` and every run written by ``attnlab train`` one or two folders below ``root``."""
    found = ["minilm"]
    if root.is_dir():
        for folder in sorted([*root.glob("*"), *root.glob("*/*")]):
            with contextlib.suppress(ValueError, OSError):
                if folder.is_dir() and origin_of(folder) == "run":
                    found.append(str(folder))
    return found


def run_name(source: str) -> str:
    """A model's name on the page: ``minilm``, or its folder's name; a folder named just ``model``
    (where ``attnlab demo`` saves its language model: ``out/demo/lm/model``) is named by the folder
    above it (``lm``)."""
    path = Path(source)
    if path.name == "model" and path.parent.name not in ("", "."):
        return path.parent.name
    return path.name or str(source)


def load_models(sources: list[str], *, skip_unservable: bool = False) -> list[tuple[str, Loaded]]:
    """``(name, loaded)`` for each source, loaded once through :func:`attnlab.models.load`; names are
    ``minilm`` or the folder's name (:func:`run_name`), made distinct with ``-2``, ``-3`` ... A source
    serve cannot show is a ``ValueError`` (or, with ``skip_unservable``, left out)."""
    out: list[tuple[str, Loaded]] = []
    names: set[str] = set()
    for source in sources:
        loaded = load(source)
        try:
            views.check_servable(loaded)
        except ValueError:
            if skip_unservable:
                continue
            raise
        base = run_name(source)
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.add(name)
        warm(loaded)
        out.append((name, loaded))
    return out


def warm(loaded: Loaded) -> None:
    """Run one short text through ``loaded`` so the first request does not pay torch's first-call costs."""
    with contextlib.suppress(ValueError):
        views.attention(loaded, "The cat sat.")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port); ``ValueError`` if it cannot be."""
    if not isinstance(host, str) or not host or any(ch.isspace() for ch in host) or len(host) > 253:
        raise ValueError(f"host= must be an address or a host name, got {host!r}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ValueError(f"host={host!r} is not an address of this machine ({exc})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)  # listening now, so a second server on the same port fails here, clearly
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def hosts_for(host: str, port: int) -> set[str]:
    """The ``Host`` headers the server answers to: ``host:port``, plus ``localhost`` and the loopback
    addresses when it listens on this machine only or on every interface (``0.0.0.0``, ``::``)."""
    names = {host}
    if is_loopback(host) or host in ("0.0.0.0", "::"):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if host in ("0.0.0.0", "::"):
        names.add(socket.gethostname())
    bracketed = {f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names}  # IPv6 in brackets
    return {f"{n}:{port}" for n in bracketed} | (bracketed if port == 80 else set())  # :80 may be left out


def url_of(sock: socket.socket, host: str) -> str:
    """The address to open in a browser."""
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def _server(app, sock: socket.socket):
    import uvicorn  # the server itself: imported only when one is started

    config = uvicorn.Config(
        app,
        http="h11",  # the parser whose limits are set below (and which refuses a second Host: 400)
        log_level="warning",
        access_log=False,
        lifespan="on",
        limit_concurrency=256,  # connections; the model queue (jobs.Jobs) is the tighter bound
        timeout_keep_alive=5,
        server_header=False,
        h11_max_incomplete_event_size=16 * 1024,  # request line and headers
    )
    return uvicorn.Server(config)


def serve_forever(app, sock: socket.socket) -> None:
    """Run the server on ``sock`` until interrupted (Ctrl-C)."""
    _server(app, sock).run(sockets=[sock])


@contextlib.contextmanager
def background(app, sock: socket.socket) -> Iterator[str]:
    """Run the server in a thread for the ``with`` block; yields its URL."""
    server = _server(app, sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server stopped while starting")
            thread.join(0.02)
        host = sock.getsockname()[0]
        yield url_of(sock, host)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
