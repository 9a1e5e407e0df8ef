"""``attnlab serve``: one 32-token sentence on MiniLM, every layer and head, measured on the server
(compute, HTTP round trip) and in Chromium (request + drawing; the first render of a fresh page)."""

from __future__ import annotations

import http.client
import json
import os
import statistics
import time

from _common import summary, table, target, time_interleaved

NAME = "serve"
TITLE = "attnlab serve: one 32-token sentence on MiniLM"
SENTENCE = (
    "The animal didn't cross the street because it was too tired, so it lay down in the shade of an old "
    "oak tree near the river."
)  # 32 MiniLM tokens with [CLS] and [SEP]
CHROMIUM = "/usr/bin/chromium"


def p95(xs: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(0.95 * len(s)) - 1))]


# the math view's query: head 4.2 at "it" (token 10), as a click on the page asks for it
MATH = {"layer": 4, "head": 2, "position": 10}


def _server_side(url: str, repeats: int) -> dict[str, tuple[list[float], list[float], int]]:
    """Per view (attention, math), (compute ms from Server-Timing, round trip ms, response bytes) of
    ``repeats`` sequential requests, the two views interleaved so that both see the same load."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    bodies = {
        "attention": json.dumps({"model": 0, "text": SENTENCE}),
        "math": json.dumps({"model": 0, "text": SENTENCE, **MATH}),
    }
    out = {view: ([], [], 0) for view in bodies}
    for _ in range(repeats + 1):  # the first is a warm-up
        for view, body in bodies.items():
            compute, trip, _ = out[view]
            t0 = time.perf_counter()
            conn.request(
                "POST", f"/api/{view}", body, {"Content-Type": "application/json", "Host": f"{host}:{port}"}
            )
            r = conn.getresponse()
            data = r.read()
            trip.append((time.perf_counter() - t0) * 1e3)
            compute.append(float(r.getheader("Server-Timing").split("dur=")[1]))
            out[view] = (compute, trip, len(data))
            if r.status != 200:
                raise RuntimeError(f"the server answered {r.status}: {data[:200]!r}")
    conn.close()
    return {view: (c[1:], t[1:], size) for view, (c, t, size) in out.items()}


def _browser(url: str, repeats: int, loads: int) -> dict | None:
    """Chromium: first render of ``loads`` fresh pages, then ``repeats`` runs of the sentence."""
    if not os.access(CHROMIUM, os.X_OK):
        return None
    from playwright.sync_api import sync_playwright

    first, total, draw = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        for _ in range(loads):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]", timeout=120000)
            first.append(page.evaluate("window.attnServe.timings().first"))
            page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", timeout=120000)
        page.fill("#text", SENTENCE)
        for _ in range(repeats + 1):
            page.evaluate("window.attnServe.run()")  # resolves once every view of the run is drawn
            last = page.evaluate("window.attnServe.timings().last")
            total.append(last["total"])
            draw.append(last["render"])
        tokens = page.locator("button.tok").count()
        browser.close()
    return {"first": first, "total": total[1:], "draw": draw[1:], "tokens": tokens}


def _row(what: str, xs: list[float]) -> list[str]:
    return [
        what,
        f"{statistics.median(xs):.1f} ms",
        f"{p95(xs):.1f} ms",
        f"{min(xs):.1f}–{max(xs):.1f} ms",
        str(len(xs)),
    ]


def _in_process(loaded, repeats: int) -> dict[str, list[float]]:
    """ms of MiniLM's bare forward and of the whole attention view, interleaved, no server running."""
    from attnlab.serve import views

    ids = views.as_batch(loaded, loaded.tokenizer.encode(SENTENCE))
    runs = time_interleaved(
        {"forward": lambda: views.forward(loaded, ids), "view": lambda: views.attention(loaded, SENTENCE)},
        repeats=repeats,
    )
    return {k: [x * 1e3 for x in v] for k, v in runs.items()}


def _targets(
    compute: list[float], math: list[float], page: dict | None, bare: dict, t: int, busy: str
) -> list[dict]:
    fwd, view = (statistics.median(bare[k]) for k in ("forward", "view"))
    limit = (
        f"the model itself: MiniLM's bare forward on these {t} tokens took {fwd:.0f} ms (median) in the same "
        f"process, the whole view (weights through the hooks, detectors, JSON) {view:.0f} ms; {busy}"
    )
    worst = p95(compute)
    out = [
        target("server compute, 95th percentile", "< 100 ms", worst, worst < 100, f"{worst:.1f} ms", limit)
    ]
    for name, stat in (("median", statistics.median), ("95th percentile", p95)):
        a, m = stat(compute), stat(math)
        out.append(
            target(
                f"math view's server compute, {name}, at most the attention view's",
                "<= attention",
                m / a,
                m <= a,
                f"{m:.1f} ms vs {a:.1f} ms",
                "the math view runs the same forward (every layer's weights captured, so the same paths) "
                "but no detectors and a few KiB of JSON",
            )
        )
    if page is not None:
        first = max(page["first"])
        why = f"the request and Chromium's work for a new page share the cores with other jobs ({busy})"
        out.append(
            target(
                "first render of the page (slowest load)",
                "< 1 s",
                first,
                first < 1000,
                f"{first:.0f} ms",
                why,
            )
        )
    return out


def run(ctx: dict) -> dict:
    import torch

    from attnlab.serve import server
    from attnlab.serve.app import create_app

    quick = ctx.get("quick", False)
    repeats, loads = (8, 2) if quick else (60, 8)
    torch.set_num_threads(1)  # what `attnlab serve` uses by default (--threads 1)
    models = server.load_models(["minilm"])
    t = len(models[0][1].tokenizer.encode(SENTENCE))
    load_before = os.getloadavg()[0]
    bare = _in_process(models[0][1], max(5, repeats // 3))
    sock = server.bind("127.0.0.1", 0)
    app = create_app(models, server.hosts_for("127.0.0.1", sock.getsockname()[1]))
    with server.background(app, sock) as url:
        served = _server_side(url, repeats)
        (compute, trip, size), (math, math_trip, math_size) = served["attention"], served["math"]
        page = _browser(url, repeats // 2, loads)
    load_after = os.getloadavg()[0]
    busy = f"load average {load_before:.0f}-{load_after:.0f} on {os.cpu_count()} cores during the run"
    rows = [_row("server: compute (Server-Timing)", compute), _row("server: HTTP round trip", trip)]
    rows += [_row("server: the math view's compute (head 4.2 at one query)", math)]
    rows += [_row("server: the math view's HTTP round trip", math_trip)]
    rows += [_row("in process, no server: the attention view", bare["view"])]
    rows += [_row("in process, no server: MiniLM's bare forward", bare["forward"])]
    if page is not None:
        rows += [
            _row("browser: request + drawing", page["total"]),
            _row("browser: drawing only", page["draw"]),
        ]
        rows += [_row("browser: first render of a fresh page", page["first"])]
    notes = [
        f"One request: the {t} tokens, the weights of all 6 layers x 12 heads ([6, 12, {t}, {t}] float32, "
        f"{size / 1024:.0f} KiB of JSON with base64) and the five head detectors; one torch thread "
        "(the server's default). Requests one at a time from one client, after a warm-up request.",
        "Browser: Debian's Chromium, headless, through Playwright on the same machine; 'request + drawing' "
        "runs from the click to the tokens, lines, heatmap and detector grid drawn; 'first render' from "
        "the navigation start of a fresh page to the same point (the page's own performance.now()).",
        f"Load average (1 min) {load_before:.1f} before and {load_after:.1f} after: a shared machine.",
    ]
    raw = {
        "compute_ms": summary(compute),
        "math_compute_ms": summary(math),
        "math_trip_ms": summary(math_trip),
        "math_bytes": math_size,
        "trip_ms": summary(trip),
        "browser": page,
        "tokens": t,
        "bytes": size,
    }
    raw["in_process_ms"] = {k: summary(v) for k, v in bare.items()}
    raw["load_average"] = [load_before, load_after]
    columns = ["what", "median", "95th percentile", "min–max", "runs"]
    return {
        "name": NAME,
        "title": TITLE,
        "raw": raw,
        "targets": _targets(compute, math, page, bare, t, busy),
        "tables": [table(f"MiniLM, {t} tokens, all layers and heads (POST /api/attention)", columns, rows)],
        "notes": notes,
    }
