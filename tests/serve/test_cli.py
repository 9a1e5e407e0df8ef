"""``attnlab serve`` as a command: bad arguments and models it cannot show exit 2 with one line; it
prints the models and the address, warns when it listens beyond this machine, and --open opens the
page once the server is up."""

from __future__ import annotations

import contextlib
import io
import socket
import threading

import pytest

from attnlab.cli import main
from attnlab.serve import server


def _invoke(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as done:
            return int(done.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def _one_error(code: int, err: str, needle: str) -> None:
    """Exit 2 and one ``Error:`` line (after the progress line "loading ...", when loading began)."""
    lines = err.splitlines()
    assert code == 2 and lines[-1].startswith("Error: ") and needle in lines[-1], err
    assert len(lines) <= 2 and all(x.startswith("loading ") for x in lines[:-1]) and "Traceback" not in err


def test_bad_arguments_exit_2_with_one_line(tmp_path, gpt_dir):
    _one_error(*_invoke(["serve", "--port", "70000"])[::2], "--port must be at most 65535")
    _one_error(*_invoke(["serve", "--port", "-1"])[::2], "--port")
    _one_error(*_invoke(["serve", "--queue", "5000"])[::2], "--queue must be at most 1000")
    _one_error(*_invoke(["serve", str(tmp_path / "nothing")])[::2], "is not a model attnlab can load")
    _one_error(*_invoke(["serve", str(gpt_dir), "--host", "", "--quiet"])[::2], "--host must be")
    _one_error(*_invoke(["serve", str(gpt_dir), "--host", "no such.invalid", "--quiet"])[::2], "--host")


def test_a_model_serve_cannot_show_is_named(tmp_path):
    from attnlab.models import Transformer, TransformerConfig

    config = TransformerConfig(
        12, 12, d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=1
    )
    Transformer(config).save(tmp_path / "seq2seq")
    _one_error(*_invoke(["serve", str(tmp_path / "seq2seq")])[::2], "holds a 'transformer' model")


def test_a_port_in_use_is_one_line(gpt_dir):
    taken = server.bind("127.0.0.1", 0)
    try:
        code, _, err = _invoke(["serve", str(gpt_dir), "--port", str(taken.getsockname()[1]), "--quiet"])
        _one_error(code, err, "cannot listen on 127.0.0.1")
        code, _, err = _invoke(["serve", str(gpt_dir), "--port", str(taken.getsockname()[1])])
        _one_error(code, err, "cannot listen on 127.0.0.1")
        assert len(err.splitlines()) == 1  # said before any model loads: no "loading ..." line
    finally:
        taken.close()


def test_it_prints_the_models_and_warns_beyond_this_machine(gpt_dir, monkeypatch):
    served = []
    monkeypatch.setattr(server, "bind", lambda host, port: socket.create_server(("127.0.0.1", 0)))
    monkeypatch.setattr(server, "serve_forever", lambda app, sock: served.append(sock.close()))
    code, out, err = _invoke(["serve", str(gpt_dir), str(gpt_dir), "--host", "0.0.0.0", "--port", "0"])
    assert code == 0 and len(served) == 1
    assert "warning: listening on 0.0.0.0" in err
    lines = out.splitlines()
    assert lines[0].startswith("attnlab serve: 2 model(s) loaded")
    assert [line.split()[:3] for line in lines[2:4]] == [
        ["0", gpt_dir.name, "gpt"],
        ["1", f"{gpt_dir.name}-2", "gpt"],
    ]
    assert any(line.startswith("open http://127.0.0.1:") for line in lines)
    code, out, err = _invoke(["serve", str(gpt_dir), "--port", "0", "--quiet"])
    assert code == 0 and err == "" and out.startswith("open http://127.0.0.1:") and out.count("\n") == 1


def test_open_runs_once_the_server_is_up(gpt):
    from attnlab.serve.app import create_app

    up = threading.Event()
    sock = server.bind("127.0.0.1", 0)
    app = create_app([("g", gpt)], server.hosts_for("127.0.0.1", sock.getsockname()[1]), on_ready=up.set)
    assert not up.is_set()
    with server.background(app, sock):
        assert up.wait(30)


def test_sources_are_named_apart(gpt_dir):
    names = [name for name, _ in server.load_models([str(gpt_dir), str(gpt_dir)])]
    assert names == [gpt_dir.name, f"{gpt_dir.name}-2"]
    with pytest.raises(ValueError, match=r"^'/no/such/folder' .*'minilm'"):
        server.load_models(["/no/such/folder"])
