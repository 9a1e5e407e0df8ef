"""Shared pieces of the serve tests: MiniLM and a small character-level GPT loaded once, a live
server on a free localhost port (uvicorn in a thread), and a plain HTTP client for it."""

from __future__ import annotations

import http.client
import json
import types
from urllib.parse import urlsplit

import pytest
import torch

from attnlab.models import GPT, GPTConfig, load
from attnlab.tasks.text_tokenizer import char_tokenizer

ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:'!?-0123456789"
# the explorer's hostile strings (tests/viz), split at spaces, and two more: each is ONE token of the
# word-level GPT below, so the page has to show a token whose text is markup
HOSTILE_TEXTS = [
    "it was </script><img src=x onerror=alert(1)> & \u2028 done",
    "</script><img src=x onerror=alert(1)> & \u2028\u2029 <!-- x",
    "<script>alert(1)</script> <img src=x onerror=alert(1)>",
]
WORDS = "the cat sat on a mat . dog ran it was too tired and done x".split()
WORDS += sorted({w for t in HOSTILE_TEXTS for w in t.split()} - set(WORDS))


def _save_gpt(out, tokenizer):
    torch.manual_seed(0)
    vocab = tokenizer.get_vocab_size()
    config = GPTConfig(vocab_size=vocab, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=96)
    GPT(config).eval().save(out)
    tokenizer.save(str(out / "tokenizer.json"))
    return out


@pytest.fixture(scope="session")
def gpt_dir(tmp_path_factory):
    """A 2-layer, 4-head GPT (random weights, seed 0) saved with a word-level tokenizer.json (words
    split at whitespace; [UNK] for the rest) whose words include hostile markup: what
    ``attnlab.models.load`` reads as a saved model."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *WORDS])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return _save_gpt(tmp_path_factory.mktemp("tiny-gpt"), tok)


@pytest.fixture(scope="session")
def char_gpt(tmp_path_factory):
    """The same GPT with a character tokenizer (a character it lacks is dropped, not <unk>)."""
    return load(_save_gpt(tmp_path_factory.mktemp("char-gpt"), char_tokenizer(ALPHABET)))


@pytest.fixture(scope="session")
def minilm():
    return load("minilm")


@pytest.fixture(scope="session")
def gpt(gpt_dir):
    return load(gpt_dir)


class Client:
    """Requests to a live server: ``(status, headers, parsed JSON or raw bytes)``."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.url, self.host, self.port = url, parts.hostname, parts.port
        self.netloc = parts.netloc

    def request(self, method: str, path: str, body=None, headers: dict | None = None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        sent = {"Host": self.netloc}
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=sent)
            r = conn.getresponse()
            data = r.read()
            head = {k.lower(): v for k, v in r.getheaders()}
        finally:
            conn.close()
        if head.get("content-type", "").startswith("application/json"):
            return r.status, head, json.loads(data)
        return r.status, head, data

    def post(self, view: str, body, headers: dict | None = None):
        return self.request("POST", f"/api/{view}", body, headers)


@pytest.fixture(scope="session")
def live(minilm, gpt):
    """A server with MiniLM (index 0) and the tiny GPT (index 1) on a free port of 127.0.0.1."""
    from attnlab.serve import server
    from attnlab.serve.app import create_app

    sock = server.bind("127.0.0.1", 0)
    hosts = server.hosts_for("127.0.0.1", sock.getsockname()[1])
    app = create_app([("minilm", minilm), ("tiny-gpt", gpt)], hosts)
    with server.background(app, sock) as url:
        yield types.SimpleNamespace(url=url, client=Client(url), app=app)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Model work on one torch thread, as `attnlab serve` runs it by default (--threads 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def hostile_texts():
    """Texts whose words are markup (test modules cannot import this file under importlib mode)."""
    return list(HOSTILE_TEXTS)
