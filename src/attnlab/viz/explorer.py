"""The attention explorer: one self-contained HTML page for the weights softmax(Q K^T / sqrt(d_k) + M).

A model (any source :func:`attnlab.models.load` reads) is run once and its attention read at its
hook points (:mod:`attnlab.interp.attention_views`) into :class:`AttentionView` objects, each holding the
weights ``A [L, h, T_q, T_k]`` of one stack of layers (encoder self-attention, decoder causal
self-attention or encoder-decoder cross-attention) with the query and key token texts and each
layer's module path; a head is written ``layer.head`` from 0, as the CLI writes it. The page is
built from ONE template with its JS and CSS (``viz/explorer/``) inlined, the weights embedded as
JSON data (never markup), and a strict Content-Security-Policy: no network, no foreign script.

Entry points: :func:`explorer_html` (sentence + model -> HTML string), :func:`explore` (an
:class:`Explorer` object with ``_repr_html_`` for notebooks), :func:`write_explorer` (writes the
file), :func:`render_html` (precomputed views -> HTML).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

import numpy as np

from attnlab._io import atomic_write_bytes
from attnlab.interp.attention_views import KINDS, AttentionView, attention_views, model_views  # noqa: F401

ASSETS = Path(__file__).with_name("explorer")
MIN_WEIGHT = 0.01  # edges lighter than this are not drawn (the heatmap still shows every weight)


# --- the page ------------------------------------------------------------------------------------


def _json_for_script(data) -> str:
    """JSON that cannot end a <script> element or break JS: <, >, &, U+2028, U+2029 escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(script: str, style: str) -> str:
    """No network at all (``default-src 'none'``); only our one script and one style, by hash."""
    return (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        f"img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


SPECIAL = {"[cls]", "[sep]", "[pad]", "<bos>", "<eos>", "<pad>", "<s>", "</s>", "<unk>", "<sep>"}
_BACK_HREF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.html$")


def _plain(token: str) -> str:
    """A token's text without tokenizer markers (``##`` pieces, ``Ġ``/``▁`` spaces), lower-cased."""
    return token.replace("##", "").replace("\u0120", "").replace("\u2581", "").strip().lower()


def _content(token: str) -> bool:
    t = _plain(token)
    return bool(t) and t not in SPECIAL and any(c.isalnum() for c in t)


def opening_focus(views: list[AttentionView], query: str | None = None, key: str | None = None) -> dict:
    """Where the page opens: ``{"view", "layer", "head", "query"}`` (indices).

    The view is the first cross-attention view if there is one (a trained encoder-decoder opens on
    the alignment), else the first. With ``query`` and ``key`` token texts (e.g. ``"it"``,
    ``"animal"``) it opens on ``query`` and the layer and head where it attends most to ``key``;
    otherwise on the (layer, head, query) with the largest weight from a word to another word at
    least two positions away (cross-attention: any position), special tokens and punctuation left out.
    """
    index = next((i for i, v in enumerate(views) if v.kind == "cross"), 0)
    v = views[index]
    w = np.asarray(v.weights, dtype=np.float64)  # [L, h, T_q, T_k]
    if query is not None and key is not None:
        qs = [i for i, t in enumerate(v.query_tokens) if _plain(t) == query.lower()]
        ks = [j for j, t in enumerate(v.key_tokens) if _plain(t) == key.lower()]
        if not qs or not ks:
            missing = query if not qs else key
            raise ValueError(f"focus token {missing!r} is not among the tokens of view {v.name!r}")
        i, j = qs[0], ks[0]
        layer, head = np.unravel_index(int(np.argmax(w[:, :, i, j])), w.shape[:2])
        return {"view": index, "layer": int(layer), "head": int(head), "query": int(i)}
    allowed = np.zeros(w.shape[2:], dtype=bool)  # [T_q, T_k]
    for i, tq in enumerate(v.query_tokens):
        for j, tk in enumerate(v.key_tokens):
            far = v.kind == "cross" or abs(i - j) >= 2
            allowed[i, j] = far and _content(tq) and _content(tk)
    if not allowed.any():
        return {"view": index, "layer": 0, "head": -1, "query": 0}
    scored = np.where(allowed, w, -1.0)
    layer, head, i, _ = np.unravel_index(int(np.argmax(scored)), scored.shape)
    return {"view": index, "layer": int(layer), "head": int(head), "query": int(i)}


def _check_focus(views: list[AttentionView], focus: dict) -> None:
    keys = {"view", "layer", "head", "query"}
    if not isinstance(focus, dict) or set(focus) != keys:
        raise ValueError(f"focus must be a dict with keys {sorted(keys)}, got {focus!r}")
    if not 0 <= focus["view"] < len(views):
        raise ValueError(f"focus view {focus['view']} is out of range: there are {len(views)} views")
    layers, heads, t_q, _ = views[focus["view"]].weights.shape
    if not 0 <= focus["layer"] < layers or not -1 <= focus["head"] < heads:
        raise ValueError(
            f"focus layer/head {focus['layer']}/{focus['head']} outside {layers} layers x {heads} heads"
        )
    if focus["query"] is not None and not 0 <= focus["query"] < t_q:
        raise ValueError(f"focus query {focus['query']} is out of range: the view has {t_q} query tokens")


def render_html(
    views: list[AttentionView],
    *,
    model_label: str,
    sentence: str = "",
    min_weight: float = MIN_WEIGHT,
    focus: dict | None = None,
    back: tuple[str, str] | None = None,
    links: list[tuple[str, str]] = (),
) -> str:
    """The explorer page for precomputed views (one self-contained HTML document).

    Args:
        views: one or more :class:`AttentionView`.
        model_label: which model, shown on the page.
        sentence: the input text, shown on the page (as text).
        min_weight: edges with a smaller weight are not drawn as lines.
        focus: where the page opens (:func:`opening_focus`; computed when ``None``).
        back: ``(href, text)`` of a link back to the page that made this one (a relative
            ``.html`` path, e.g. the demo report's ``index.html``).
        links: more ``(href, text)`` links shown under it (relative ``.html`` paths, e.g. the
            concept pages the demo report writes next to the explorer).
    """
    if not views:
        raise ValueError("views must hold at least one AttentionView")
    if not 0.0 <= float(min_weight) < 1.0:
        raise ValueError(f"min_weight must be in [0, 1), got {min_weight}")
    template = (ASSETS / "template.html").read_text(encoding="utf-8")
    script = (ASSETS / "explorer.js").read_text(encoding="utf-8")
    style = (ASSETS / "explorer.css").read_text(encoding="utf-8")
    if "</script" in script.lower() or "</style" in style.lower():
        raise ValueError("explorer assets must not contain closing tags")
    if focus is not None:
        _check_focus(views, focus)
    for href, _ in ([back] if back is not None else []) + list(links):
        if not _BACK_HREF.match(str(href)):
            raise ValueError(f"a link must be a relative .html path, got {href!r}")
    data = {
        "model": str(model_label),
        "sentence": str(sentence),
        "minWeight": float(min_weight),
        "views": [v.to_json() for v in views],
        "initial": opening_focus(views) if focus is None else dict(focus),
        "back": None if back is None else {"href": str(back[0]), "text": str(back[1])},
        "links": [{"href": str(h), "text": str(t)} for h, t in links],
    }
    parts = {
        "CSP": html.escape(content_security_policy(script, style), quote=True),
        "STYLE": style,
        "SCRIPT": script,
        "DATA": _json_for_script(data),
    }
    # one pass, so text inserted for one placeholder is never searched for another
    return re.sub(r"\{\{(CSP|STYLE|SCRIPT|DATA)\}\}", lambda m: parts[m.group(1)], template)


class Explorer:
    """An explorer page as an object: ``.html``, ``.save(path)``, and ``_repr_html_`` for notebooks."""

    def __init__(
        self,
        views: list[AttentionView],
        *,
        model_label: str,
        sentence: str = "",
        min_weight: float = MIN_WEIGHT,
        focus: dict | None = None,
        back: tuple[str, str] | None = None,
        links: list[tuple[str, str]] = (),
    ):
        self.views = list(views)
        self.model_label = model_label
        self.sentence = sentence
        self.focus = opening_focus(self.views) if focus is None else dict(focus)
        self.html = render_html(
            self.views,
            model_label=model_label,
            sentence=sentence,
            min_weight=min_weight,
            focus=self.focus,
            back=back,
            links=links,
        )

    def __repr__(self) -> str:
        shapes = ", ".join(f"{v.name} {list(v.weights.shape)}" for v in self.views)
        f = self.focus
        layer = self.views[f["view"]].layer_names[f["layer"]]
        head = f"all heads of {layer}" if f["head"] < 0 else f"head {f['layer']}.{f['head']} ({layer})"
        return (
            f"Explorer({self.model_label!r}, sentence={self.sentence!r}, views=[{shapes}], "
            f"opens on view {f['view']} {head} query {f['query']}, "
            f"{len(self.html):,} bytes of HTML; .save(path) writes it)"
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        atomic_write_bytes(path, self.html.encode("utf-8"))
        return path

    def _repr_html_(self) -> str:
        # an iframe keeps the page's CSP and script isolated from the notebook around it
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width:100%;height:760px;'
            f'border:1px solid #ccc" sandbox="allow-scripts"></iframe>'
        )


PAGE_MARK = b"<title>attnlab attention explorer</title>"  # the template's: in every page written


def is_explorer_page(path: str | Path) -> bool:
    """Whether the file at ``path`` is a page :meth:`Explorer.save` wrote (the template's title in
    its first 4 KiB): one ``attnlab explore`` may replace without asking, unlike any other file."""
    try:
        with open(path, "rb") as f:
            return PAGE_MARK in f.read(4096)
    except OSError:
        return False


def explore(
    sentence: str, model: str | Path = "minilm", *, min_weight: float = MIN_WEIGHT, device: str = "cpu"
) -> Explorer:
    """Run ``sentence`` through ``model`` (any source :func:`attnlab.models.load` reads) on ``device``
    and return an :class:`Explorer`."""
    views, label = attention_views(sentence, model, device)
    return Explorer(views, model_label=label, sentence=sentence, min_weight=min_weight)


def explorer_html(sentence: str, model: str | Path = "minilm", *, min_weight: float = MIN_WEIGHT) -> str:
    """The explorer page (HTML text) for ``sentence`` run through ``model``."""
    return explore(sentence, model, min_weight=min_weight).html


def write_explorer(
    sentence: str,
    model: str | Path = "minilm",
    out_path: str | Path = "explorer.html",
    *,
    min_weight: float = MIN_WEIGHT,
    focus: tuple[str, str] | None = None,
    back: tuple[str, str] | None = None,
    links: list[tuple[str, str]] = (),
) -> Path:
    """Write the explorer page for ``sentence`` and ``model`` to ``out_path`` atomically; return the path.

    ``focus=(query_token, key_token)`` opens the page on that token and the head where it attends
    most to the key (e.g. ``("it", "animal")``); ``back=(href, text)`` adds a link back, ``links`` more
    links (relative ``.html`` paths).
    """
    out = Path(out_path)
    if out.is_dir():
        raise ValueError(f"out_path={out} is a folder; give a file name such as explorer.html")
    views, label = attention_views(sentence, model)
    where = None if focus is None else opening_focus(views, *focus)
    page = Explorer(
        views,
        model_label=label,
        sentence=sentence,
        min_weight=min_weight,
        focus=where,
        back=back,
        links=links,
    )
    return page.save(out)
