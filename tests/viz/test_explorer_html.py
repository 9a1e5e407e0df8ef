"""The explorer page as text: data is JSON (never markup), one script allowed by hash, no network."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re

import numpy as np
import pytest

from attnlab.interp import attention_views
from attnlab.viz import explorer as ex
from attnlab.viz.explorer import AttentionView, Explorer, render_html

HOSTILE = "</script><img src=x onerror=alert(1)> & \u2028\u2029 <!-- x"


def _view(t_q=3, t_k=3, layers=1, heads=2, q=None, k=None, kind="self"):
    w = np.full((layers, heads, t_q, t_k), 1.0 / t_k, dtype=np.float32)
    return AttentionView("v", kind, q or [f"q{i}" for i in range(t_q)], k or [f"k{j}" for j in range(t_k)], w)


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="attn-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_hostile_text_is_escaped_json_and_round_trips():
    tokens = HOSTILE.split(" ")
    page = render_html(
        [_view(len(tokens), len(tokens), q=tokens, k=tokens)], model_label=HOSTILE, sentence=HOSTILE
    )
    assert "<img" not in page and "<!-- x" not in page
    assert "\u2028" not in page and "\u2029" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    data = _data(page)  # JSON's \u003c escapes decode back to the exact text
    assert data["sentence"] == HOSTILE and data["model"] == HOSTILE
    assert data["views"][0]["queries"] == tokens


def test_csp_forbids_network_and_allows_exactly_our_script_and_style():
    page = render_html([_view()], model_label="m")
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1))
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'" and directives["connect-src"] == "'none'"
    assert directives["img-src"] == "'none'" and "unsafe" not in csp
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    for text, key in ((script, "script-src"), (style, "style-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert directives[key] == f"'sha256-{digest}'"
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)  # nothing fetched from anywhere
    assert "http://" not in page and "https://" not in page


def test_weights_round_trip_float32_exactly_and_float16_when_huge(monkeypatch):
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(5), size=(2, 3, 4)).astype(np.float32)  # [2, 3, 4, 5], rows sum to 1
    v = AttentionView("v", "cross", list("abcd"), list("vwxyz"), w)
    data = v.to_json()
    assert (data["layers"], data["heads"], data["tq"], data["tk"]) == (2, 3, 4, 5)
    back = np.frombuffer(base64.b64decode(data["weights"]), dtype="<f4").reshape(w.shape)
    assert data["dtype"] == "float32" and np.array_equal(back, w)
    monkeypatch.setattr(attention_views, "FLOAT32_LIMIT", 10)  # the view serialises itself
    data = v.to_json()
    half = np.frombuffer(base64.b64decode(data["weights"]), dtype="<f2").reshape(w.shape)
    assert data["dtype"] == "float16" and np.max(np.abs(half - w)) < 5e-4


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"weights": np.zeros((2, 3, 3))}, "[L, h, T_q, T_k]"),
        ({"query_tokens": ["a", "b"]}, "query_tokens has 2 tokens"),
        ({"key_tokens": ["a"]}, "key_tokens has 1 tokens"),
        ({"kind": "sideways"}, "kind must be one of"),
        ({"weights": np.full((1, 1, 3, 3), np.nan)}, "NaN"),
    ],
)
def test_attention_view_rejects_bad_input(kwargs, words):
    base = {
        "name": "v",
        "kind": "self",
        "query_tokens": list("abc"),
        "key_tokens": list("abc"),
        "weights": np.full((1, 1, 3, 3), 1 / 3),
    }
    with pytest.raises(ValueError, match=re.escape(words)):
        AttentionView(**{**base, **kwargs})


def test_render_rejects_no_views_and_bad_threshold():
    with pytest.raises(ValueError, match="at least one"):
        render_html([], model_label="m")
    with pytest.raises(ValueError, match="min_weight"):
        render_html([_view()], model_label="m", min_weight=1.5)


def test_repr_html_isolates_the_page_in_an_iframe(tmp_path):
    e = Explorer([_view(q=["<b>"], t_q=1)], model_label="m", sentence="<b>bold?</b>")
    frame = e._repr_html_()
    assert frame.startswith('<iframe srcdoc="') and 'sandbox="allow-scripts"' in frame
    assert "<b>" not in frame  # the whole page is attribute-escaped
    assert html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1)) == e.html
    path = e.save(tmp_path / "sub" / "p.html")
    assert path.read_text(encoding="utf-8") == e.html


def test_opening_focus_picks_the_heaviest_word_to_word_link_and_prefers_cross_attention():
    import numpy as np

    from attnlab.viz.explorer import AttentionView, Explorer, opening_focus

    toks = ["[CLS]", "the", "cat", "sat", "on", "it", "[SEP]"]
    w = np.full((2, 3, 7, 7), 1 / 7, dtype=np.float32)
    w[0, 0, 5, 6] = 0.99  # to a special token: ignored
    w[1, 1, 3, 2] = 0.95  # adjacent words: ignored (previous-token heads are everywhere)
    w[1, 2, 5, 2] = 0.60  # "it" -> "cat", two positions or more apart: chosen
    w[0, 1, 1, 4] = 0.55
    view = AttentionView("self", "self", toks, toks, w)
    assert opening_focus([view]) == {"view": 0, "layer": 1, "head": 2, "query": 5}
    assert opening_focus([view], "the", "on") == {"view": 0, "layer": 0, "head": 1, "query": 1}
    cross = AttentionView("cross", "cross", ["<bos>", "x"], ["a", "b", "c"], np.full((1, 1, 2, 3), 1 / 3))
    assert opening_focus([view, cross])["view"] == 1  # an encoder-decoder opens on its alignment
    with pytest.raises(ValueError, match="focus token 'dog'"):
        opening_focus([view], "dog", "cat")
    page = Explorer([view], model_label="toy", sentence="the cat sat on it")
    assert "head 1.2 (layer 1) query 5" in repr(page) and "toy" in repr(page)
    with pytest.raises(ValueError, match="relative .html path"):
        Explorer([view], model_label="toy", back=("javascript:alert(1)", "x"))
    with pytest.raises(ValueError, match="relative .html path"):
        Explorer([view], model_label="toy", links=[("https://example.org/x.html", "x")])
    with pytest.raises(ValueError, match="focus query 9 is out of range"):
        Explorer([view], model_label="toy", focus={"view": 0, "layer": 0, "head": 0, "query": 9})


def _page(tmp_path) -> Explorer:
    return Explorer([_view()], model_label="toy", sentence="a b c")


def test_a_saved_page_is_recognised_and_other_files_are_not(tmp_path):
    page = tmp_path / "p.html"
    _page(tmp_path).save(page)
    (tmp_path / "notes.html").write_text("<html><title>my notes</title></html>")
    assert ex.is_explorer_page(page)
    assert not ex.is_explorer_page(tmp_path / "notes.html") and not ex.is_explorer_page(tmp_path / "none")


@pytest.fixture
def no_model(monkeypatch, tmp_path):
    """`attnlab explore` with the model run replaced by a toy page (what --out holds is the point)."""
    monkeypatch.setattr(ex, "explore", lambda sentence, *a, **k: _page(tmp_path))
    monkeypatch.chdir(tmp_path)


def _explore(*args):
    from click.testing import CliRunner

    from attnlab.cli import cli

    return CliRunner().invoke(cli, ["explore", "a b c", *args])


def test_explore_keeps_a_file_that_is_not_its_page_unless_overwrite(tmp_path, no_model):
    precious = tmp_path / "precious.txt"
    precious.write_text("139 KB of someone's text")
    refused = _explore("--out", str(precious))
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"Error: --out {precious} exists and is not an attnlab explorer page; it would be replaced: "
        "choose another name, or pass --overwrite\n"
    )
    assert precious.read_text() == "139 KB of someone's text"  # it was replaced by HTML without a word
    replaced = _explore("--out", str(precious), "--overwrite")
    assert replaced.exit_code == 0 and ex.is_explorer_page(precious)
    again = _explore("--out", str(precious))  # now a page explore wrote: replaced without asking
    assert again.exit_code == 0, again.output
    (tmp_path / "empty.html").touch()  # nothing to lose
    assert _explore("--out", str(tmp_path / "empty.html")).exit_code == 0


@pytest.mark.parametrize(
    "out, message",
    [
        ("-", "Error: --out writes a file, not standard output: give a file name, not '-'\n"),
        ("/dev/null", "Error: --out /dev/null exists and is not a regular file; give a file name\n"),
    ],
)
def test_explore_refuses_standard_output_and_devices_as_out(tmp_path, no_model, out, message):
    result = _explore("--out", out)
    assert result.exit_code == 2 and result.stderr == message
    assert not (tmp_path / "-").exists()  # it wrote a file named '-'


@pytest.mark.parametrize(
    "sentence, message",
    [
        ("", "Error: SENTENCE is empty\n"),
        ("   ", "Error: SENTENCE is empty (only whitespace)\n"),  # was the library's "sentence must be..."
        ("ws.txt", "Error: SENTENCE is empty (ws.txt holds only whitespace)\n"),
        ("empty.txt", "Error: SENTENCE is empty (empty.txt holds no text)\n"),
    ],
)
def test_explore_says_an_empty_sentence_one_way(tmp_path, no_model, sentence, message):
    from click.testing import CliRunner

    from attnlab.cli import cli

    (tmp_path / "ws.txt").write_text(" \t \n\n")
    (tmp_path / "empty.txt").write_text("")
    result = CliRunner().invoke(cli, ["explore", sentence, "--out", "x.html"])
    assert result.exit_code == 2 and result.stderr == message
