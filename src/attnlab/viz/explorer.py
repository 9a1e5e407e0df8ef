"""The attention explorer: one self-contained HTML page for the weights softmax(Q K^T / sqrt(d_k) + M).

A model's attention is gathered into :class:`AttentionView` objects, each holding the weights
``A [L, h, T_q, T_k]`` of one kind of attention (encoder self-attention, decoder causal
self-attention or encoder-decoder cross-attention) with the query and key token texts. The page is
built from ONE template with its JS and CSS (``viz/explorer/``) inlined, the weights embedded as
JSON data (never markup), and a strict Content-Security-Policy: no network, no foreign script.

Entry points: :func:`explorer_html` (sentence + model -> HTML string), :func:`explore` (an
:class:`Explorer` object with ``_repr_html_`` for notebooks), :func:`write_explorer` (writes the
file), :func:`render_html` (precomputed views -> HTML).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
import re
from pathlib import Path

import numpy as np

from attnlab._io import atomic_write_bytes
from attnlab.interp.badges import badges
from attnlab.models.load import load, origin_of

ASSETS = Path(__file__).with_name("explorer")
KINDS = ("self", "causal", "cross")
EXPLANATIONS = {
    "self": "Encoder self-attention: each token (left) spreads one unit of attention over every token of "
    "the same sentence (right); a line's thickness is the weight, its colour the head.",
    "causal": "Decoder causal self-attention: each token (left) attends only to itself and earlier tokens "
    "(right); weights to later tokens are exactly zero.",
    "cross": "Encoder-decoder cross-attention: each target token (left) spreads one unit of attention over "
    "the source tokens (right).",
}
FLOAT32_LIMIT = 1 << 22  # above this many weights, embed float16 to keep the file small
MIN_WEIGHT = 0.01  # edges lighter than this are not drawn (the heatmap still shows every weight)


@dataclasses.dataclass(frozen=True)
class AttentionView:
    """One kind of attention of one model: weights ``A [L, h, T_q, T_k]`` and the token texts.

    Args:
        name: shown in the page, e.g. ``"encoder self-attention"``.
        kind: ``"self"``, ``"causal"`` or ``"cross"`` (chooses the one-line explanation).
        query_tokens: ``T_q`` texts (rows / left column). key_tokens: ``T_k`` texts (columns / right).
        weights: ``[L, h, T_q, T_k]``; each row sums to one over the keys.
    """

    name: str
    kind: str
    query_tokens: tuple
    key_tokens: tuple
    weights: np.ndarray

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}")
        w = np.asarray(self.weights, dtype=np.float32)
        if w.ndim != 4:
            raise ValueError(f"weights must be [L, h, T_q, T_k], got shape {list(w.shape)}")
        if min(w.shape) == 0:
            raise ValueError(f"weights must not be empty, got shape {list(w.shape)}")
        q, k = tuple(str(t) for t in self.query_tokens), tuple(str(t) for t in self.key_tokens)
        if len(q) != w.shape[2]:
            raise ValueError(
                f"query_tokens has {len(q)} tokens but weights {list(w.shape)} has T_q={w.shape[2]}"
            )
        if len(k) != w.shape[3]:
            raise ValueError(
                f"key_tokens has {len(k)} tokens but weights {list(w.shape)} has T_k={w.shape[3]}"
            )
        if not np.all(np.isfinite(w)):
            raise ValueError(f"weights contains NaN or infinite values (shape {list(w.shape)})")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "query_tokens", q)
        object.__setattr__(self, "key_tokens", k)

    def to_json(self) -> dict:
        """The view as the page reads it: weights as little-endian float32 (float16 if huge) base64."""
        dtype = "<f4" if self.weights.size <= FLOAT32_LIMIT else "<f2"
        raw = np.ascontiguousarray(self.weights, dtype=dtype).tobytes()
        layers, heads, t_q, t_k = self.weights.shape
        return {
            "name": self.name,
            "kind": self.kind,
            "explanation": EXPLANATIONS[self.kind],
            "queries": list(self.query_tokens),
            "keys": list(self.key_tokens),
            "layers": layers,
            "heads": heads,
            "tq": t_q,
            "tk": t_k,
            "dtype": "float32" if dtype == "<f4" else "float16",
            "weights": base64.b64encode(raw).decode("ascii"),
            "badges": self.badges(),
        }

    def badges(self) -> list[list[str]]:
        """Per layer and head, its detector scores above 0.4 (``"prev 0.93"``, from
        :func:`attnlab.interp.scan.badges`); empty unless queries and keys are the same tokens."""
        layers, heads, t_q, t_k = self.weights.shape
        none = [[""] * heads for _ in range(layers)]
        if self.kind == "cross" or t_q != t_k or self.query_tokens != self.key_tokens:
            return none  # the patterns relate positions of one sequence
        try:
            return badges(self.weights, list(self.query_tokens))
        except ValueError:  # e.g. all-zero weights: no attention to score, so no badge
            return none


# --- gathering attention from models -------------------------------------------------------------


def _stack(per_layer) -> np.ndarray:
    """list over layers of ``[1, h, T_q, T_k]`` tensors -> ``[L, h, T_q, T_k]`` float32."""
    return np.stack([np.asarray(a.detach().float().cpu())[0] for a in per_layer])  # [L, h, T_q, T_k]


def minilm_views(sentence: str, model_name: str = "minilm", device: str = "cpu") -> list[AttentionView]:
    """Encoder self-attention of the pretrained MiniLM (6 layers x 12 heads) for one sentence.

    Runs ``BertEncoder.forward(ids, output_attentions=True)`` on ``device``; ``attentions`` is a list
    of ``[1, h, T, T]``, T counting ``[CLS]`` and ``[SEP]``.
    """
    import torch

    model, tokenizer = load(model_name)
    # embed() truncates to the sentence-embedding length (256 for MiniLM); the explorer shows every
    # token up to the model's position limit (512) and refuses longer input instead of cutting it
    tokenizer.backend.no_truncation()
    tokenizer.encode(sentence)  # characters it maps to [UNK]: one warning naming them
    enc = tokenizer.backend.encode(sentence)
    max_len = int(getattr(getattr(model, "config", None), "max_len", 512) or 512)
    if len(enc.ids) > max_len:
        raise ValueError(
            f"sentence has {len(enc.ids)} tokens but {model_name} has {max_len} positions; shorten it"
        )
    model = model.to(device)
    ids = torch.tensor([enc.ids], device=device)  # [1, T]
    model.eval()
    with torch.no_grad():
        out = model(ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    weights = _stack(out["attentions"])  # [L, h, T, T]
    return [AttentionView("encoder self-attention", "self", enc.tokens, enc.tokens, weights)]


def trained_views(
    model,
    src_ids: list[int],
    src_tokens: list[str],
    tgt_ids: list[int] | None = None,
    tgt_tokens: list[str] | None = None,
) -> list[AttentionView]:
    """Attention of an attnlab model on one example, by teacher forcing.

    ``transformer``: ``forward(src [1, S], tgt_in [1, T], return_attention=True)`` gives encoder
    self-attention ``[L, h, S, S]``, decoder causal self-attention ``[L, h, T, T]`` and cross-attention
    ``[L, h, T, S]``. ``attention-rnn``: the alignment ``[1, T, S]`` becomes one layer with one head.
    ``gpt``: ``forward(ids [1, S], return_attention=True)``, causal self-attention ``[L, h, S, S]``
    (``tgt_*`` unused).

    Args:
        model: an attnlab model (``load_model(dir)`` or freshly built).
        src_ids: ``S`` source ids; src_tokens: their ``S`` texts.
        tgt_ids: ``T`` decoder input ids (``[BOS] + y``); tgt_tokens: their texts.
    """
    import torch

    kind = getattr(model, "kind", "")
    if len(src_ids) != len(src_tokens):
        raise ValueError(f"src_ids has {len(src_ids)} ids but src_tokens has {len(src_tokens)} texts")
    model.eval()
    device = next(model.parameters()).device  # inputs go where the model is
    src = torch.tensor([src_ids], dtype=torch.long, device=device)  # [1, S]
    if kind == "gpt":
        with torch.no_grad():
            _, attn = model(src, return_attention=True)  # list over layers of [1, h, S, S]
        return [
            AttentionView("decoder causal self-attention", "causal", src_tokens, src_tokens, _stack(attn))
        ]
    if kind not in ("transformer", "attention-rnn"):
        raise ValueError(
            f"model kind {kind!r} has no attention weights to explore "
            f"(need transformer, attention-rnn or gpt; a fixed-context RNN has none)"
        )
    if tgt_ids is None or tgt_tokens is None or len(tgt_ids) != len(tgt_tokens):
        raise ValueError("a sequence-to-sequence model needs tgt_ids and tgt_tokens of equal length")
    tgt = torch.tensor([tgt_ids], dtype=torch.long, device=device)  # [1, T]
    with torch.no_grad():
        _, attn = model(src, tgt, return_attention=True)
    if kind == "attention-rnn":
        w = np.asarray(attn.detach().float().cpu())[0][None, None]  # [T, S] -> [1, 1, T, S]
        return [AttentionView("cross-attention (alignment)", "cross", tgt_tokens, src_tokens, w)]
    return [
        AttentionView("encoder self-attention", "self", src_tokens, src_tokens, _stack(attn["encoder_self"])),
        AttentionView(
            "decoder causal self-attention", "causal", tgt_tokens, tgt_tokens, _stack(attn["decoder_self"])
        ),
        AttentionView(
            "encoder-decoder cross-attention", "cross", tgt_tokens, src_tokens, _stack(attn["cross"])
        ),
    ]


def trained_dir_views(
    sentence: str, directory: str | Path, device: str = "cpu"
) -> tuple[list[AttentionView], str]:
    """Views of a model trained by ``attnlab train`` (folder with ``latest.json``) on ``sentence``.

    The task saved with the checkpoint gives the tokenizer; the model's own greedy output is the
    target that is teacher-forced back in (``src = x + [EOS]``, ``tgt_in = [BOS] + y``; a GPT reads
    ``[BOS] + x + [SEP] + y``).
    """
    from attnlab.tasks import BOS, EOS, SEP, get_task
    from attnlab.training.evaluate import predict

    directory = Path(directory)
    loaded = load(directory)
    if loaded.task is None:  # a text run: a decoder with its own tokenizer.json
        return hf_views(sentence, directory, device)
    model, spec = loaded.model, loaded.task
    task = get_task(spec["name"], **spec.get("params", {}))
    tok = task.tokenizer
    tok.check_text(sentence, task.name)  # as translate does: never a silent <unk>
    pred = predict(model, task, [sentence])[0]  # decoded on the CPU (short), attention on ``device``
    model = model.to(device)
    if model.kind == "gpt":
        ids = [BOS] + tok.encode(sentence) + [SEP] + tok.encode(pred)
        views = trained_views(model, ids, [tok.token(i) for i in ids])
    else:
        src = tok.encode(sentence) + [EOS]
        tgt = [BOS] + tok.encode(pred)
        views = trained_views(model, src, [tok.token(i) for i in src], tgt, [tok.token(i) for i in tgt])
    return views, f"{model.kind} trained on {spec['name']} ({directory.name}); output {pred!r}"


def hf_views(sentence: str, directory: str | Path, device: str = "cpu") -> tuple[list[AttentionView], str]:
    """Attention of a Hugging Face checkpoint directory (GPT-2, Llama, Mistral, Qwen2: causal
    self-attention ``[L, h, T, T]``; BERT: self-attention) on ``sentence``, tokenised with the
    checkpoint's own ``tokenizer.json``; each token shown as the text it decodes to."""
    import torch

    model, tokenizer = load(directory, device=device)
    if tokenizer is None:
        raise ValueError(f"{directory} has no tokenizer.json beside the model; cannot tokenize the sentence")
    c = model.config
    ids = tokenizer.encode(sentence)  # characters it maps to <unk>: one warning naming them
    if len(ids) > c.max_len:
        raise ValueError(
            f"sentence has {len(ids)} tokens but {directory} has {c.max_len} positions; shorten it"
        )
    texts = tokenizer.tokens(ids)
    label = f"{Path(directory).name}: {c.num_layers} layers x {c.num_heads} heads"
    if getattr(model, "kind", "") == "gpt":
        kv = c.num_kv_heads or c.num_heads
        window = f", window {c.window}" if c.window else ""
        return trained_views(model, ids, texts), f"{label} ({kv} key/value heads{window}), causal"
    with torch.no_grad():
        x = torch.tensor([ids], device=device)  # [1, T]
        out = model(x, attention_mask=torch.ones_like(x), output_attentions=True)
    return [AttentionView("encoder self-attention", "self", texts, texts, _stack(out["attentions"]))], label


def attention_views(
    sentence: str, model: str | Path = "minilm", device: str = "cpu"
) -> tuple[list[AttentionView], str]:
    """Run ``sentence`` through ``model`` on ``device`` (``"cpu"``, ``"cuda"``, or ``"auto"``: CUDA
    when present): ``"minilm"``, a Hugging Face checkpoint directory (``config.json`` with a
    ``model_type``: see :func:`hf_views`) or a folder written by ``attnlab train``.

    Returns:
        ``(views, model_label)``.
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError("sentence must be a non-empty string")
    from attnlab.devices import resolve_device

    device = resolve_device(device)
    origin = origin_of(model)  # which of attnlab.models.load's sources it is (one-line error if none)
    if origin == "pretrained":
        views = minilm_views(sentence, str(model), device=device)
        layers, heads = views[0].weights.shape[:2]
        return views, f"MiniLM (all-MiniLM-L6-v2), {layers} layers x {heads} heads"
    if origin == "run":
        return trained_dir_views(sentence, model, device)
    return hf_views(sentence, model, device)


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
        return (
            f"Explorer({self.model_label!r}, sentence={self.sentence!r}, views=[{shapes}], "
            f"opens on view {f['view']} layer {f['layer'] + 1} head {f['head'] + 1} query {f['query']}, "
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


def explore(
    sentence: str, model: str | Path = "minilm", *, min_weight: float = MIN_WEIGHT, device: str = "cpu"
) -> Explorer:
    """Run ``sentence`` through ``model`` (``"minilm"`` or a saved folder) on ``device`` and return an
    :class:`Explorer`."""
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
        raise ValueError(f"--out {out} is a folder; give a file name such as explorer.html")
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
