"""Embed a whole file of sentences, streamed: bounded memory, input order kept, resumable.

The input (a file or ``-`` for stdin; one sentence per line, or JSON Lines with a text field) is
read ``chunk_size`` sentences at a time (512 by default: a part is seconds of work, so an
interrupt loses little); each chunk is embedded (:func:`attnlab.models.sentence.embed`, sorted by
token count inside the chunk, progress after every batch) and written atomically as one part of
``OUT.parts/`` (:mod:`attnlab.embedding.parts`: the part's file name carries the sha256 of its text and
of its own bytes). When every chunk is done, they are assembled, again under a temporary name, into
``OUT.npy`` or ``OUT.safetensors`` (``embeddings``: float32 ``[N, d_model]``, row i = sentence i),
and the parts folder is removed. Memory holds one chunk, whatever the length of the file.

After an interruption (Ctrl-C: :class:`Interrupted` says how many sentences were kept; SIGKILL,
power loss), ``resume=True`` re-reads the input, checks each finished part's text hash against the
text it now reads and its bytes against their sha256 (a damaged part is embedded again, said in one
line), embeds only the missing chunks, and assembles the same bytes an uninterrupted run writes. A
lock (``fcntl.flock`` on ``OUT.parts/lock``, with the writer's pid, released by the kernel when its
holder dies) keeps two writers apart.

Lines: each line is one sentence (its ``\\n`` / ``\\r\\n`` removed); an empty line is embedded as the
empty string, so row i always belongs to line i + 1. Bytes that are not UTF-8, a NUL byte (a
binary file), a JSONL line that is not an object holding a string under ``field``: a
``ValueError`` naming the line, before any output exists under the final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.embedding import parts as embed_parts
from attnlab.models.precision import check_dtype
from attnlab.models.sentence import embed, unknown_words
from attnlab.names import CHUNK_SIZE
from attnlab.names import STREAM_FORMATS as FORMATS
from attnlab.progress import progress as progress_bar
from attnlab.tasks.text_source import read_lines

OUTPUTS = (".npy", ".safetensors")
MANIFEST_VERSION = embed_parts.VERSION


def _describe(source: str) -> str:
    return "stdin" if source == "-" else source


def _open_binary(source: str):
    if source == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    path = Path(source)
    if path.is_dir():
        raise ValueError(f"source={source} is a directory, not a file")
    try:
        return open(path, "rb")  # noqa: SIM115 (returned to a with-statement)
    except OSError as exc:
        raise ValueError(f"cannot read source={source}: {exc.strerror or exc}") from None


def read_sentences(source: str, fmt: str = "lines", field: str = "text") -> Iterator[str]:
    """The sentences of ``source`` (a path, or ``"-"`` for stdin), one at a time, in order.

    ``fmt="lines"``: every line is a sentence (line ending removed, a UTF-8 BOM on line 1 ignored).
    ``fmt="jsonl"``: every line is a JSON object and the sentence is its string ``field``.
    Raises ``ValueError`` naming the line for invalid UTF-8, a NUL byte (binary input), a line
    longer than :data:`~attnlab.tasks.text_source.MAX_LINE_BYTES` (:func:`read_lines`), invalid
    JSON, a missing or non-string field, or an empty JSONL line.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    name = _describe(source)
    with _open_binary(source) as f:
        for number, raw in read_lines(f, name):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{name} line {number} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                    f"{exc.start + 1})"
                ) from None
            if fmt == "lines":
                yield text
                continue
            if not text.strip():
                raise ValueError(f"{name} line {number} is empty; expected a JSON object with {field!r}")
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{name} line {number} is not valid JSON: {exc.msg}") from None
            except RecursionError:
                raise ValueError(f"{name} line {number} is JSON nested too deeply to read") from None
            if not isinstance(obj, dict) or field not in obj:
                raise ValueError(f"{name} line {number} has no field {field!r}")
            if not isinstance(obj[field], str):
                raise ValueError(
                    f"{name} line {number}: field {field!r} is {type(obj[field]).__name__}, not a string"
                )
            yield obj[field]


def count_sentences(source: str, fmt: str = "lines", field: str = "text") -> int:
    """Validate a whole input file and count its sentences (a first pass: errors before any work)."""
    return sum(1 for _ in read_sentences(source, fmt, field))


def chunks(sentences: Iterator[str], size: int) -> Iterator[list[str]]:
    """Consecutive lists of ``size`` sentences (the last may be shorter)."""
    batch: list[str] = []
    for s in sentences:
        batch.append(s)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def chunk_hash(texts: list[str]) -> str:
    """sha256 of a chunk's sentences (each UTF-8 encoded, length-prefixed): its identity on resume."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:16]


def _write_header(f, out: Path, n: int, d: int) -> None:
    """The header of the final file for ``n`` rows of ``d`` float32 values (data follows, row-major)."""
    if out.suffix == ".npy":
        np.lib.format.write_array_header_1_0(
            f,
            {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n, d)},
        )
        return
    meta = {"embeddings": {"dtype": "F32", "shape": [n, d], "data_offsets": [0, 4 * n * d]}}
    header = json.dumps(meta, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # the data starts 8-byte aligned
    f.write(len(header).to_bytes(8, "little"))
    f.write(header)


def assemble(parts: list[Path], out: Path, d: int) -> int:
    """Concatenate the chunk arrays ``parts`` (each float32 ``[k, d]``) into ``out`` (.npy or
    .safetensors) under a temporary name, then rename it: ``out`` is either complete or absent.
    Reads one chunk at a time. Returns the number of rows."""
    n = 0
    for p in parts:
        arr = np.load(p, mmap_mode="r")
        if arr.ndim != 2 or arr.shape[1] != d or arr.dtype != np.float32:
            raise ValueError(f"chunk {p} holds {arr.dtype} {list(arr.shape)}, expected float32 [k, {d}]")
        n += arr.shape[0]
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            _write_header(f, out, n, d)
            for p in parts:
                f.write(np.ascontiguousarray(np.load(p), dtype="<f4").tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return n


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`embed_file`: ``kept`` of ``total`` sentences (None: stdin, not counted)
    are safe in ``parts`` finished parts under ``folder``; ``--resume`` continues from there."""

    def __init__(self, kept: int, parts: int, total: int | None, folder: Path):
        super().__init__(kept, parts, total, folder)
        self.kept, self.parts, self.total, self.folder = kept, parts, total, folder

    def __str__(self) -> str:
        of = f" of {self.total:,}" if self.total is not None else ""
        return f"interrupted: {self.kept:,}{of} sentences kept in {self.parts:,} part(s) in {self.folder}"


def _check_output(output: str, resume: bool, overwrite: bool) -> tuple[Path, Path]:
    out = Path(output)
    if out.suffix not in OUTPUTS:
        raise ValueError(f"output= must end in {' or '.join(OUTPUTS)}, got {output!r}")
    if resume and overwrite:
        raise ValueError("resume=True and overwrite=True exclude each other")
    if not out.parent.is_dir():
        raise ValueError(f"output={output}: the folder {out.parent} does not exist")
    if out.is_dir():
        raise ValueError(f"output={output} is a directory")
    if out.exists() and not out.is_file():  # renaming over a device or a pipe would replace it
        raise ValueError(f"output={output} exists and is not a regular file; give a file name")
    parts = out.with_name(out.name + ".parts")
    if parts.is_dir():  # a run still writing there is not an interrupted one
        embed_parts.refuse_if_locked(parts, output)
    if out.exists() and not overwrite and not (resume and parts.is_dir()):
        raise ValueError(f"output={output} already exists; pass overwrite=True to replace it")
    if parts.is_dir() and not (resume or overwrite):
        raise ValueError(
            f"{parts} holds an interrupted run; pass resume=True to continue it or overwrite=True to "
            "start again"
        )
    if resume and parts.is_dir():
        embed_parts.read_manifest(parts)  # a damaged one is refused before the model loads
    return out, parts


def check_job(
    source: str,
    output: str,
    fmt: str = "lines",
    field: str = "text",
    resume: bool = False,
    overwrite: bool = False,
) -> int | None:
    """Every check that needs no model: the output path and flags, then the whole input file
    (UTF-8, binary, JSONL fields). Returns the number of sentences (None for stdin, read later)."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt= must be one of {', '.join(FORMATS)}; got {fmt!r}")
    _check_output(output, resume, overwrite)
    if source == "-":
        return None
    if not Path(source).exists():
        raise ValueError(f"source={source} does not exist")
    return count_sentences(source, fmt, field)


def _default_progress(total: int | None):
    return progress_bar(total=total, desc="embed", unit="sentences")


def embed_file(
    model,
    tokenizer,
    source: str,
    output: str,
    *,
    fmt: str = "lines",
    field: str = "text",
    batch_size: int = 32,
    dtype: str = "float32",
    chunk_size: int = CHUNK_SIZE,
    resume: bool = False,
    overwrite: bool = False,
    model_name: str = "",
    progress: Callable[[int | None], Any] | None = None,
    total: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Embed every sentence of ``source`` into ``output`` (see the module docstring).

    Returns a summary: ``sentences``, ``dim``, ``tokens``, ``truncated`` (sentences cut at the
    tokenizer's ``max_length``), ``unknown`` (sentences holding a token the vocabulary lacks) and
    ``unknown_words`` (the first 20 pieces of text it stood for), ``empty`` (empty or whitespace-only
    sentences), ``chunks``, ``resumed_chunks`` (found
    finished), ``redone_chunks`` (found damaged and embedded again), ``seconds``,
    ``sentences_per_s`` and ``output``. Raises ``ValueError`` (one line) for bad arguments and bad
    input, and :class:`Interrupted` (how much was kept) on Ctrl-C; never leaves a partial file under
    ``output``. ``total``: the sentence count of :func:`check_job` when the caller ran it already
    (it reads the whole file). ``progress(total)``: the bar (``update(n)`` per batch, ``write``,
    ``close``; default :func:`attnlab.progress.progress`). ``log``: where a repair is said
    (default: the bar's ``write``).
    """
    _check_args(fmt, batch_size, chunk_size, dtype)
    if total is None:
        total = check_job(source, output, fmt, field, resume, overwrite)
    out, parts = _check_output(output, resume, overwrite)
    d = model.config.d_model
    manifest = {
        "version": MANIFEST_VERSION,
        "model": model_name,
        "dim": d,
        "dtype": dtype,
        "format": fmt,
        "field": field if fmt == "jsonl" else None,
        "chunk_size": chunk_size,
        "batch_size": batch_size,
    }
    summary = {"sentences": 0, "dim": d, "tokens": 0, "truncated": 0, "empty": 0, "chunks": 0}
    summary.update(unknown=0, unknown_words=[])
    summary.update(resumed_chunks=0, redone_chunks=0)
    start = time.perf_counter()
    with embed_parts.locked(parts, output):
        bar = (progress or _default_progress)(total)
        say = log or bar.write
        try:
            embed_parts.start(parts, manifest, resume, say)
            files = _embed_chunks(model, tokenizer, source, parts, manifest, summary, bar.update, say)
            _refuse_stale(parts, files, source)
            assemble(files, out, d)
        except KeyboardInterrupt:
            raise Interrupted(*embed_parts.kept(parts), total, parts) from None
        finally:
            bar.close()
        shutil.rmtree(parts)
    seconds = time.perf_counter() - start
    summary.update(
        seconds=seconds, sentences_per_s=summary["sentences"] / max(seconds, 1e-9), output=str(out)
    )
    return summary


def _check_args(fmt: str, batch_size: int, chunk_size: int, dtype: str) -> None:
    """One-line ``ValueError`` for a bad ``fmt``, ``batch_size``, ``chunk_size`` or ``dtype``."""

    if fmt not in FORMATS:
        raise ValueError(f"fmt= must be one of {', '.join(FORMATS)}; got {fmt!r}")
    for name, v in (("batch_size", batch_size), ("chunk_size", chunk_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name}= must be a positive integer, got {v!r}")
    check_dtype(dtype)


def _embed_chunks(
    model, tokenizer, source: str, parts: Path, manifest: dict, summary: dict, advance, log
) -> list:
    """Embed ``source`` chunk by chunk into ``parts`` (:mod:`attnlab.embedding.parts`: each written
    atomically with its sha256; a part a resumed run finished is kept if it still hashes to it,
    embedded again with one line to ``log`` if not), counting into ``summary`` and calling
    ``advance(n)`` after every batch of ``n`` sentences; the part files in order."""

    done = embed_parts.finished(parts)
    files: list[Path] = []
    size = manifest["chunk_size"]
    sentences = read_sentences(source, manifest["format"], manifest["field"] or "text")
    for index, texts in enumerate(chunks(sentences, size)):
        texts_hash = chunk_hash(texts)
        path = done.get(index)
        if path is not None and embed_parts.text_hash(path.name) != texts_hash:
            raise ValueError(
                f"resume=True: chunk {index} of {_describe(source)} differs from the interrupted run's "
                "(the input changed); pass overwrite=True to start again"
            )
        if path is not None and not embed_parts.intact(path):
            first = index * size + 1
            log(
                f"{parts}: part {index} (sentences {first:,}-{first + len(texts) - 1:,}) failed its "
                "sha256 check (damaged); embedding it again"
            )
            path.unlink()
            path = None
            summary["redone_chunks"] += 1
        stats: dict = {}
        if path is not None:
            summary["resumed_chunks"] += 1
            encodings = tokenizer.encode_batch(texts)  # only to count tokens, truncation, [UNK]s
            stats = {"tokens": sum(len(e.ids) for e in encodings)}
            stats["truncated"] = sum(1 for e in encodings if e.overflowing)
            stats["unknown"], stats["unknown_words"] = unknown_words(tokenizer, texts, encodings)
            advance(len(texts))
        else:
            batch, dtype = manifest["batch_size"], manifest["dtype"]
            vectors = embed(
                model, tokenizer, texts, batch_size=batch, dtype=dtype, stats=stats, on_batch=advance
            )  # [n, d]
            array = vectors.cpu().numpy().astype("<f4", copy=False)  # [n, d]
            path = embed_parts.write(parts, index, texts_hash, array)
        summary["tokens"] += stats["tokens"]
        summary["truncated"] += stats["truncated"]
        summary["unknown"] += stats["unknown"]
        seen = summary["unknown_words"]
        seen += [w for w in stats["unknown_words"] if w not in seen][: max(0, 20 - len(seen))]
        summary["empty"] += sum(1 for t in texts if not t.strip())
        summary["sentences"] += len(texts)
        summary["chunks"] += 1
        files.append(path)
    return files


def _refuse_stale(parts: Path, files: list, source: str) -> None:
    """A resumed run's chunks past the input's end mean the input changed: refuse to assemble."""
    stale = [p for p in embed_parts.finished(parts).values() if p not in set(files)]
    if stale:
        raise ValueError(
            f"resume=True: {parts} holds {len(stale)} chunk(s) past the end of {_describe(source)} "
            "(the input changed); pass overwrite=True to start again"
        )
