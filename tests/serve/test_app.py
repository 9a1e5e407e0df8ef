"""The server over HTTP: answers equal the views, and every guard holds (Host and Origin checks, no
CORS header, bounded JSON bodies, no path from the client, JSON errors, a bug is a 500 that leaves
the server running, a full queue is a 503 with Retry-After)."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from attnlab.serve import app as app_module
from attnlab.serve import server, views
from attnlab.serve.jobs import Busy, Jobs

SENTENCE = "The animal didn't cross the street because it was too tired."


def _no_cors(headers: dict) -> None:
    assert not [k for k in headers if k.startswith("access-control-")]


def test_answers_equal_the_views(live, minilm, gpt):
    status, headers, data = live.client.post("attention", {"model": 0, "text": SENTENCE})
    assert status == 200 and headers["content-type"] == "application/json"
    direct = views.attention(minilm, SENTENCE)
    assert data["weights"] == direct["weights"] and data["tokens"] == direct["tokens"]
    assert float(headers["server-timing"].split("dur=")[1]) > 0
    _no_cors(headers)
    status, _, data = live.client.post("next", {"model": "tiny-gpt", "text": "the cat"})
    assert status == 200 and data == views.next_tokens(gpt, "the cat")


def test_models_list_names_no_path(live, gpt_dir):
    status, headers, data = live.client.request("GET", "/api/models")
    assert status == 200 and [m["name"] for m in data["models"]] == ["minilm", "tiny-gpt"]
    assert str(gpt_dir) not in str(data) and data["models"][1]["causal"] and not data["models"][0]["causal"]
    assert "similarity" in data["models"][0]["views"] and "lens" in data["models"][1]["views"]
    # what one layer is, as each model declares it (the audit view's text names it)
    assert [m["layer"] for m in data["models"]] == ["encoder layer", "decoder layer"]
    _no_cors(headers)


def test_the_model_list_in_the_page_cannot_end_its_element():
    label = "</script><img src=x onerror=alert(1)> & \u2028"
    text = app_module.script_json({"label": label})
    assert not set(text) & set("<>&\u2028") and text.isascii() and json.loads(text) == {"label": label}


def test_page_and_files_ship_with_a_strict_policy(live):
    status, headers, body = live.client.request("GET", "/")
    assert status == 200 and b'src="/static/app.js"' in body and b"{{SERVED}}" not in body
    served = body.split(b'<script type="application/json" id="served">')[1].split(b"</script>")[0]
    assert json.loads(served) == live.client.request("GET", "/api/models")[2]
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    for name in ("app.js", "draw.js", "app.css"):
        status, headers, body = live.client.request("GET", f"/static/{name}")
        assert status == 200 and len(body) > 500
        _no_cors(headers)
    js = b"".join(live.client.request("GET", f"/static/{n}")[2] for n in ("app.js", "draw.js"))
    for sink in (
        b"innerHTML",
        b"outerHTML",
        b"insertAdjacentHTML",
        b"document.write",
        b"eval(",
        b"http://",
        b"https://",
    ):
        assert sink not in js, sink  # text is only ever set as text, and nothing is fetched from elsewhere
    status, _, page = live.client.request("GET", "/concepts/05-scaled-dot-product.html")
    assert status == 200 and b"<math" in page


@pytest.mark.parametrize(
    "path", ["/static/../app.py", "/static/%2e%2e%2fviews.py", "/concepts/../../etc/passwd", "/static/", "/x"]
)
def test_no_path_reaches_a_file_that_is_not_listed(live, path):
    status, headers, data = live.client.request("GET", path)
    assert status == 404 and "error" in data


def test_foreign_host_and_origin_are_refused(live):
    port = live.client.port
    for host in (f"evil.example:{port}", "127.0.0.1:1", "", f"localhost.evil.example:{port}"):
        status, headers, data = live.client.request("GET", "/api/models", headers={"Host": host})
        assert status == 403 and "DNS rebinding" in data["error"]
        _no_cors(headers)
    status, _, data = live.client.request("GET", "/api/models", headers={"Host": f"localhost:{port}"})
    assert status == 200
    status, _, data = live.client.post("tokens", {"text": "a"}, headers={"Origin": "http://evil.example"})
    assert status == 403 and "origin" in data["error"]
    status, _, _ = live.client.post("tokens", {"text": "a"}, headers={"Origin": live.url.rstrip("/")})
    assert status == 200


@pytest.mark.parametrize(
    "body, headers, status, message",
    [
        (b'{"text": "a"}', {"Content-Type": "text/plain"}, 415, "application/json"),
        (b"x" * (app_module.MAX_BODY + 1), {"Content-Type": "application/json"}, 413, "at most"),
        (b"{not json", {"Content-Type": "application/json"}, 400, "not JSON"),
        (b"[" * 40_000 + b"]" * 40_000, {"Content-Type": "application/json"}, 413, "bytes"),
        (b"[" * 5_000 + b"]" * 5_000, {"Content-Type": "application/json"}, 400, "not JSON"),
        (b"\xff\xfe", {"Content-Type": "application/json"}, 400, "not JSON"),
        (b'["text"]', {"Content-Type": "application/json"}, 400, "JSON object"),
        (b'{"model": 7, "text": "a"}', {"Content-Type": "application/json"}, 404, "no model 7"),
        (b'{"model": "/etc", "text": "a"}', {"Content-Type": "application/json"}, 404, "no model"),
        (b'{"model": true, "text": "a"}', {"Content-Type": "application/json"}, 404, "no model true is"),
        (b'{"text": ""}', {"Content-Type": "application/json"}, 400, "empty"),
        (b'{"text": "a", "file": "/etc/passwd"}', {"Content-Type": "application/json"}, 400, "not file"),
    ],
)
def test_bad_requests_get_one_clear_json_error(live, body, headers, status, message):
    got, head, data = live.client.request("POST", "/api/tokens", body, headers)
    assert got == status and message in data["error"] and "\n" not in data["error"]
    _no_cors(head)


def test_unknown_view_and_wrong_method(live):
    status, _, data = live.client.post("attentoin", {"text": "a"})
    assert status == 404 and "did you mean 'attention'" in data["error"]
    status, _, data = live.client.request("GET", "/api/attention")
    assert status == 405 and "error" in data
    status, _, data = live.client.post("lens", {"model": 0, "text": "a"})
    assert status == 400 and "does not apply" in data["error"]


def test_a_bug_is_a_500_and_the_server_keeps_serving(live, monkeypatch):
    def broken(view, loaded, body):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(views, "answer", broken)
    status, _, data = live.client.post("tokens", {"text": "a"})
    assert status == 500 and "ZeroDivisionError" in data["error"] and "keeps running" in data["error"]
    monkeypatch.undo()
    status, _, data = live.client.post("tokens", {"text": "a"})
    assert status == 200 and data["tokens"]


def test_the_queue_is_bounded_and_counts_work_until_it_finishes():
    release = threading.Event()

    async def scenario():
        jobs = Jobs(queue=1)  # one running + one waiting
        first = asyncio.ensure_future(jobs.run(release.wait))
        second = asyncio.ensure_future(jobs.run(lambda: 2))
        await asyncio.sleep(0.05)
        with pytest.raises(Busy) as busy:
            await jobs.run(lambda: 3)
        assert busy.value.retry_after >= 1 and jobs.pending == 2
        first.cancel()  # its client left while it ran: the thread is still busy with it, so it still counts
        await asyncio.sleep(0.05)
        assert jobs.pending == 2
        second.cancel()  # its client left before it started: the job is dropped and its place freed
        await asyncio.sleep(0.05)
        assert jobs.pending == 1
        release.set()
        for _ in range(200):
            if jobs.pending == 0:
                break
            await asyncio.sleep(0.01)
        assert jobs.pending == 0 and jobs.done == 2
        assert (await jobs.run(lambda: 4))[0] == 4
        jobs.close()

    # a loop of its own, in a thread: Playwright's sync API (the browser tests) may hold this thread's
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, scenario()).result()


def test_hosts_and_loopback():
    assert server.is_loopback("127.0.0.1") and server.is_loopback("::1") and server.is_loopback("localhost")
    assert not server.is_loopback("0.0.0.0") and not server.is_loopback("192.168.1.4")
    assert server.hosts_for("127.0.0.1", 8000) >= {"127.0.0.1:8000", "localhost:8000", "[::1]:8000"}
    assert server.hosts_for("192.168.1.4", 8000) == {"192.168.1.4:8000"}
    assert "127.0.0.1" in server.hosts_for("127.0.0.1", 80)  # a browser leaves out :80
    with pytest.raises(ValueError, match="host="):
        server.bind("no such host.invalid", 0)
    sock = server.bind("127.0.0.1", 0)
    try:
        with pytest.raises(ValueError, match="cannot listen on 127.0.0.1"):
            server.bind("127.0.0.1", sock.getsockname()[1]).close()
    finally:
        sock.close()


def test_default_models_are_minilm_and_the_demo_runs(tmp_path):
    assert server.default_sources(tmp_path / "none") == ["minilm"]
    run = tmp_path / "induction" / "gpt-run"
    run.mkdir(parents=True)
    (run / "latest.json").write_text("{}")
    (tmp_path / "bottleneck").mkdir()
    assert server.default_sources(tmp_path) == ["minilm", str(run)]


def test_a_run_saved_as_model_is_named_by_its_folder():
    assert server.run_name("out/demo/lm/model") == "lm"  # where attnlab demo saves its language model
    assert server.run_name("runs/shakespeare") == "shakespeare" and server.run_name("minilm") == "minilm"
    assert server.run_name("model") == "model"  # nothing above it to name it by
