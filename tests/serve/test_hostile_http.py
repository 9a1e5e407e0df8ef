"""Raw sockets against the live server: a Host or Origin header sent twice is refused, and a client
that leaves or stalls mid-body is one line in the log (never a ``ClientDisconnect`` traceback)."""

from __future__ import annotations

import json
import logging
import re
import socket
import time

import pytest

from attnlab.serve import app as app_module


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def logs():
    """What the app and uvicorn log while the test runs (uvicorn's loggers do not propagate)."""
    handler = Records()
    names = ("attnlab.serve", "uvicorn.error", "uvicorn")
    for name in names:
        logging.getLogger(name).addHandler(handler)
    yield handler.records
    for name in names:
        logging.getLogger(name).removeHandler(handler)


def _raw(live, head: bytes, body: bytes = b"", *, wait: float = 0.3, answer: bool = True) -> bytes:
    """Send ``head`` (the request line and headers, without the blank line) and ``body`` on one
    connection; return what came back (``answer=False``: close after ``wait`` seconds instead)."""
    port = live.client.port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.replace(b"PORT", str(port).encode()) + b"\r\n\r\n" + body)
        if not answer:
            time.sleep(wait)
            return b""
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


def _status(reply: bytes) -> tuple[int, dict]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body) if body.startswith(b"{") else {}


GET = b"GET /api/models HTTP/1.1\r\nConnection: close\r\n"


@pytest.mark.parametrize(
    "headers, refused",
    [
        (b"Host: 127.0.0.1:PORT\r\nOrigin: http://evil.example\r\nOrigin: http://127.0.0.1:PORT", 403),
        (b"Host: 127.0.0.1:PORT\r\nOrigin: http://127.0.0.1:PORT\r\nOrigin: http://127.0.0.1:PORT", 403),
        # h11 refuses a second Host before the app sees the request (RFC 9112 section 3.2)
        (b"Host: 127.0.0.1:PORT\r\nHost: 127.0.0.1:PORT", 400),
        (b"Host: evil.example\r\nHost: 127.0.0.1:PORT", 400),
    ],
)
def test_a_host_or_origin_sent_twice_is_refused(live, headers, refused):
    status, data = _status(_raw(live, GET + headers))
    assert status == refused and (refused == 400 or "2 Origin headers" in data["error"])
    status, data = _status(_raw(live, GET + b"Host: 127.0.0.1:PORT\r\nOrigin: http://127.0.0.1:PORT"))
    assert status == 200 and data["models"]


POST = b"POST /api/tokens HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Type: application/json\r\n"


def _wait_for(records, count: int) -> list[logging.LogRecord]:
    for _ in range(200):
        if len(records) >= count:
            break
        time.sleep(0.02)
    return records


@pytest.mark.parametrize(
    "head, body, got",
    [
        (POST + b"Content-Length: 100", b'{"text": "a', 11),  # a short body
        (POST + b"Transfer-Encoding: chunked", b'5\r\n{"tex\r\nzz not a chunk', 5),  # chunked garbage
        (POST + b"Content-Length: 100", b"", 0),  # headers, then nothing
    ],
)
def test_a_client_that_leaves_mid_body_is_one_line_in_the_log(live, logs, head, body, got):
    _raw(live, head, body, answer=False)
    records = _wait_for(logs, 1)
    time.sleep(0.2)  # anything else it would log
    assert len(records) == 1 and records[0].name == "attnlab.serve" and records[0].exc_info is None
    line = records[0].getMessage()
    assert "/api/tokens" in line and "left after" in line and "\n" not in line
    assert f"after {got} bytes" in line
    status, data = _status(_raw(live, POST + b"Content-Length: 13\r\nConnection: close", b'{"text": "a"}'))
    assert status == 200 and data["tokens"]


def test_a_stalled_body_is_answered_408_and_logged_once(live, logs, monkeypatch):
    monkeypatch.setattr(app_module, "BODY_SECONDS", 0.5)
    started = time.perf_counter()
    status, data = _status(_raw(live, POST + b"Content-Length: 100\r\nConnection: close", b'{"te'))
    assert status == 408 and "0.5 s" in data["error"] and time.perf_counter() - started < 10
    records = _wait_for(logs, 1)
    assert len(records) == 1 and re.search(
        r"^attnlab serve: /\S*: .*\bbody\b.*\b0\.5 s\b", records[0].getMessage()
    )


def test_the_guard_refuses_a_second_host_whatever_the_parser():
    """The guard itself, for a parser that would let two Host headers through."""
    import asyncio
    import concurrent.futures

    sent = []

    async def app(scope, receive, send):
        raise AssertionError("the request reached the app")

    async def send(message):
        sent.append(message)

    host = [(b"host", b"127.0.0.1:8000")]
    scope = {"type": "http", "headers": host * 2, "method": "GET", "path": "/"}
    guarded = app_module.Guard(app, {"127.0.0.1:8000"})(scope, None, send)
    # a loop of its own, in a thread: a browser test earlier in this process may hold the main
    # thread's event loop (Playwright's sync API), where asyncio.run refuses to start
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, guarded).result()
    assert sent[0]["status"] == 403 and b"2 Host headers" in sent[1]["body"]
