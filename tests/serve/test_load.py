"""A bounded load test on localhost: ``attnlab serve minilm`` in its own process gets 50 concurrent
requests and a burst of malformed ones at the same time. Every request gets a correct answer or a
clean error (503 + Retry-After when the queue is full, a 4xx otherwise), the server's memory stays
bounded, and it keeps serving afterwards; Ctrl-C stops it cleanly."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from attnlab.serve import views

pytestmark = pytest.mark.slow
SENTENCE = "The animal didn't cross the street because it was too tired"
MEMORY_GROWTH_MB = 300  # what 50 requests may leave behind at most (answers are ~400 KB each)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _start():
    """``attnlab serve minilm --port 0 --quiet`` -> (process, host, port), once it prints its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnlab", "serve", "minilm", "--port", "0", "--quiet", "--queue", "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(180)
    if not line or not line[0].startswith("open http://"):
        proc.kill()
        pytest.fail(f"the server did not start: {line} {proc.stderr.read()[-500:]}")
    host, port = line[0].split("//")[1].rstrip("/\n").rsplit(":", 1)
    return proc, host, int(port)


def _raw(host: str, port: int, data: bytes) -> tuple[int | None, bytes]:
    """Send raw bytes; (status or None when the server closed without one, body)."""
    with socket.create_connection((host, port), timeout=60) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):  # the server refused before reading everything
            pass
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    reply = b"".join(chunks)
    if not reply.startswith(b"HTTP/1.1 "):
        return None, reply
    return int(reply[9:12]), reply.split(b"\r\n\r\n", 1)[-1]


def _post(host: str, port: int, body: bytes):
    return _raw(host, port, _post_bytes(host, port, body))


def _malformed(host: str, port: int) -> list[bytes]:
    ok = json.dumps({"text": "a"}).encode()
    return [
        b"\x00\xff garbage that is not HTTP\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: " + b"x" * 40_000 + b"\r\n\r\n",  # headers past the bound
        f"GET /api/models HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n".encode(),
        f"DELETE /api/attention HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode(),
        f"GET /static/../../etc/passwd HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode(),
        f"POST /api/attention HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: 50000000\r\nConnection: close\r\n\r\n{{}}".encode(),  # a claimed 50 MB body
    ] + [
        _post_bytes(host, port, b"{oops"),
        _post_bytes(host, port, json.dumps({"text": "x" * 5000}).encode()),
        _post_bytes(
            host, port, json.dumps({"text": "<script>alert(1)</script>", "model": "../../x"}).encode()
        ),
        _post_bytes(host, port, ok, kind="text/plain"),
        _post_bytes(host, port, b"[" * 30_000 + b"]" * 30_000),
        _post_bytes(host, port, json.dumps({"text": ["a"]}).encode()),
    ]


def _post_bytes(host, port, body, kind="application/json") -> bytes:
    return (
        f"POST /api/attention HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _check_good(minilm, text: str, status: int, body: bytes) -> str:
    if status == 503:
        assert json.loads(body)["error"].startswith("the server is busy")
        return "busy"
    assert status == 200, (status, body[:200])
    data = json.loads(body)
    assert [t["id"] for t in data["tokens"]] == minilm.tokenizer.encode(text)
    w = views.unpack(data["weights"])  # [L, h, T, T]
    assert (w.sum(-1) - 1).abs().max() < 1e-5
    return "answered"


def test_fifty_concurrent_requests_and_a_malformed_burst(minilm):
    proc, host, port = _start()
    try:
        status, _ = _post(host, port, json.dumps({"text": SENTENCE}).encode())
        assert status == 200
        before = _rss_mb(proc.pid)
        texts = [f"{SENTENCE} {i}." for i in range(50)]
        bad = _malformed(host, port)
        with ThreadPoolExecutor(max_workers=64) as pool:
            good = [pool.submit(_post, host, port, json.dumps({"text": t}).encode()) for t in texts]
            broken = [pool.submit(_raw, host, port, b) for b in bad]
            outcomes = [_check_good(minilm, t, *f.result()) for t, f in zip(texts, good)]
            replies = [f.result() for f in broken]
        assert outcomes.count("answered") >= 9 and set(outcomes) <= {"answered", "busy"}
        for raw, (status, body) in zip(bad, replies):
            # uvicorn refuses what is not HTTP (a plain 400) or closes; everything else is ours, in JSON
            assert status is None or 400 <= status < 500, (raw[:60], status, body[:120])
            if status is not None and raw.startswith((b"POST", b"GET /api", b"DELETE")):
                assert "error" in json.loads(body), (raw[:60], body[:120])
        after = _rss_mb(proc.pid)
        assert after - before < MEMORY_GROWTH_MB, (before, after)
        status, body = _post(host, port, json.dumps({"text": SENTENCE}).encode())
        assert status == 200 and proc.poll() is None  # still serving
        assert _check_good(minilm, SENTENCE, status, body) == "answered"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    err = proc.stderr.read()
    assert "Traceback" not in err, err[-2000:]
    assert proc.returncode == 0, (proc.returncode, err[-500:])
