"""``attnlab serve [MODEL ...] [--port N] [--host 127.0.0.1] [--open]``: the local web app that looks
inside the loaded models with the user's own text (:mod:`attnlab.serve`)."""

from __future__ import annotations

import threading
import time

import click

from attnlab.commands._errors import BadInput, usage_errors
from attnlab.commands._types import NON_NEGATIVE, Positive

MAX_PORT = 65535


def _table(models) -> list[str]:
    from attnlab.serve import views

    rows = [views.describe(loaded, i, name) for i, (name, loaded) in enumerate(models)]
    width = max(len(r["name"]) for r in rows)
    lines = [f"  #  {'name':<{width}}  kind  layers x heads  views"]
    for r in rows:
        sizes = f"{r['layers']} x {r['heads']}"
        lines.append(
            f"{r['index']:>3}  {r['name']:<{width}}  {r['kind']:<4}  {sizes:<14}  {', '.join(r['views'])}"
        )
    return lines


@click.command("serve")
@click.argument("sources", nargs=-1, metavar="[MODEL]...")
@click.option(
    "--port", type=NON_NEGATIVE, default=8000, show_default=True, help="TCP port (0: any free port)."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but this machine's loopback lets the network in (with a warning).",
)
@click.option(
    "--open", "open_browser", is_flag=True, help="Open the page in the default web browser once up."
)
@click.option(
    "--threads",
    type=Positive(256),
    default=1,
    show_default=True,
    help="Torch threads for each request's model work.",
)
@click.option(
    "--queue",
    type=NON_NEGATIVE,
    default=8,
    show_default=True,
    help="Requests that may wait behind the running one; past that the server answers 503 + Retry-After.",
)
@click.option("--quiet", is_flag=True, help="Print only the address to open.")
@usage_errors
def serve(sources, port, host, open_browser, threads, queue, quiet) -> None:
    """Serve a page, on this machine, where you type text and see what MODEL does with it: tokens,
    attention (lines and heatmaps), head detectors, next-token distributions, the logit lens,
    generation, head ablation, sentence similarity and a parameter audit. MODEL: minilm, a Hugging
    Face folder or a folder written by attnlab train (default: minilm and any run under out/demo).
    Models load once, at start; the page makes no request beyond this server."""
    if port > MAX_PORT:
        raise BadInput(f"--port must be at most {MAX_PORT}, got {port}")
    if queue > 1000:
        raise BadInput(f"--queue must be at most 1000, got {queue}")
    import torch

    from attnlab.models.load import origin_of
    from attnlab.serve import server
    from attnlab.serve.app import create_app

    torch.set_num_threads(threads)
    chosen = list(sources) or server.default_sources()
    for source in chosen:
        origin_of(source)  # a source that is no model is one error line before anything is loaded
    sock = server.bind(host, port)  # a port in use is said before minutes of loading, not after
    start = time.perf_counter()
    if not quiet:
        click.echo(f"loading {', '.join(chosen)} ...", err=True)
    try:
        models = server.load_models(chosen, skip_unservable=not sources)
    except BaseException:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    url = server.url_of(sock, host)
    if not server.is_loopback(host):
        click.echo(
            f"warning: listening on {host}:{bound}, not only this machine: anyone who can reach it may use "
            "the server (it answers only to the Host names it was started for)",
            err=True,
        )
    if not quiet:
        click.echo(f"attnlab serve: {len(models)} model(s) loaded in {time.perf_counter() - start:.1f} s")
        click.echo("\n".join(_table(models)))
    click.echo(f"open {url}" + ("" if quiet else "  (Ctrl-C stops the server)"))

    def opened() -> None:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    app = create_app(
        models, server.hosts_for(host, bound), queue=queue, on_ready=opened if open_browser else None
    )
    try:
        server.serve_forever(app, sock)
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        pass
    if not quiet:
        click.echo("attnlab serve: stopped")
