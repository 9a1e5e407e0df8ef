"""Run the learner's functions in a separate, confined process (:mod:`attnlab.practice.worker`).

:class:`Sandbox` keeps one worker alive across calls (a call costs a round trip, not an import of
NumPy). Each call has its own time limit; when the worker does not answer in time it is killed and
the next call starts a fresh one, so an infinite loop fails one check and the others still run.
Starting Python and NumPy has :data:`STARTUP_TIMEOUT_S`; the learner's file then has
``import_timeout_s`` (:data:`IMPORT_TIMEOUT_S`, or the call limit when that is longer) to import,
so a file that loops or sleeps at its top level gets its verdict within seconds, naming the limit.
A worker that ends (``os._exit``, a segmentation fault, the memory limit) fails the call it was
running the same way.

The worker runs in a session and process group of its own, in a fresh temporary folder (deleted
with it), and confines itself before it imports the learner's file (:mod:`attnlab.practice.confine`).
:meth:`Sandbox.close` kills its whole process group; a grader that is ended from outside takes its
worker with it (the worker's parent-death signal, which the worker cannot change; it follows the
thread that started the worker, so use a sandbox from one thread). Every reply is untrusted: its
size is checked before anything is read, then each field
(:func:`attnlab.practice.wire.unpack_reply`); a malformed reply fails the call with one line and the
worker is replaced. Writing a call never blocks past the time limit either, so a verdict always
comes within the limits.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import attnlab
from attnlab.practice import wire

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 1024
STARTUP_TIMEOUT_S = 20.0  # starting Python and NumPy under load, before the learner's file
IMPORT_TIMEOUT_S = 5.0  # the learner's file's own import (NumPy is imported already)


@dataclass
class Outcome:
    """What one call did: ``value`` (an array or a tuple of arrays) or ``error`` (one line)."""

    value: object = None
    error: str | None = None


class Sandbox:
    """A worker process for one learner file; use as a context manager (``close`` kills it)."""

    def __init__(
        self,
        path: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_mb: int = DEFAULT_MEMORY_MB,
        import_timeout_s: float = IMPORT_TIMEOUT_S,
    ):
        self.path = os.path.abspath(path)
        self.import_timeout_s = float(import_timeout_s)
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.proc: subprocess.Popen | None = None
        self.workdir: str | None = None
        self.confined: list[str] = []  # what the last worker reported applied (see confine.confine)
        self.starts = 0
        self.import_error: str | None = None  # once the file fails to import, every call fails with it

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill the worker's process group (if any), reap the worker, delete its folder."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own group: start_new_session
            except (ProcessLookupError, PermissionError):
                pass  # the group is gone already
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self.proc = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def start(self) -> str | None:
        """Start a worker and import the file; ``None`` when ready, else why not (one line)."""
        self.close()
        self.starts += 1
        self.workdir = tempfile.mkdtemp(prefix="attnlab-practice-")
        package_root = str(Path(attnlab.__file__).resolve().parents[1])  # the cwd changes: absolute
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([package_root, *filter(None, [os.environ.get("PYTHONPATH")])]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "attnlab.practice.worker",
                self.path,
                str(self.memory_mb),
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.workdir,
            env=env,
            start_new_session=True,
        )
        os.set_blocking(self.proc.stdin.fileno(), False)
        failed = "importing your file failed: "
        reply = self._read(
            STARTUP_TIMEOUT_S, late=f"Python and NumPy did not start in {STARTUP_TIMEOUT_S:g} s"
        )
        if isinstance(reply, str):
            return failed + reply
        if reply[0] != "importing":
            self.close()
            return f"{failed}the worker sent {reply[0]!r} before it was confined"
        self.confined = reply[1].split(",")
        limit = max(self.import_timeout_s, self.timeout_s)
        late = (
            f"your file did not finish importing in {limit:g} s (the limit; a loop or a sleep at top level?)"
        )
        reply = self._read(limit, late=late)
        if isinstance(reply, str):
            return reply if reply.startswith(late) else failed + reply
        status, value = reply
        if status != "ready":
            self.close()
            return failed + (value if status == "import-error" else f"sent {status!r} before it was ready")
        return None

    @property
    def restarts(self) -> int:
        """How many times a worker was started again (after a time-out or a crash)."""
        return max(self.starts - 1, 0)

    def call(self, name: str, *args, **kwargs) -> Outcome:
        """Run ``name(*args, **kwargs)`` in the worker within the time limit."""
        if self.import_error is not None:
            return Outcome(error=self.import_error)
        if self.proc is None or self.proc.poll() is not None:
            why = self.start()
            if why is not None:
                self.import_error = why
                return Outcome(error=why)
        deadline = time.monotonic() + self.timeout_s
        why = self._write(wire.encode(wire.pack_call(name, args, kwargs)), deadline)
        if why is not None:
            return Outcome(error=why)
        reply = self._read(self.timeout_s, deadline)
        if isinstance(reply, str):
            return Outcome(error=reply)
        status, value = reply
        if status == "ok":
            return Outcome(value=value)
        if status == "error":
            return Outcome(error=value)
        self.close()
        return Outcome(error=f"sent a malformed reply (status {status!r} to a call); stopped")

    def _timed_out(self, timeout_s: float, late: str | None = None) -> str:
        """Kill the worker; ``late`` (or the call limit's message) and "stopped"."""
        self.close()
        return f"{late or f'did not finish within {timeout_s:g} s (an infinite loop?)'}; stopped"

    def _write(self, data: bytes, deadline: float) -> str | None:
        """Send ``data`` before ``deadline``; ``None``, or why not (the worker ended or stopped reading)."""
        fd, view = self.proc.stdin.fileno(), memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                return self._timed_out(self.timeout_s)
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
            except OSError:  # BrokenPipeError: it ended
                return self._ended(deadline)
        return None

    def _read_exact(self, n: int, deadline: float, timeout_s: float, late: str | None) -> bytes | str:
        fd, chunks, got = self.proc.stdout.fileno(), [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return self._timed_out(timeout_s, late)
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                return self._ended(deadline)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _read(
        self, timeout_s: float, deadline: float | None = None, late: str | None = None
    ) -> tuple[str, object] | str:
        """The next reply as ``(status, value)`` (:func:`wire.unpack_reply`), or a one-line reason
        there is none: the time limit (``late`` names it), the process ended, a malformed reply (the
        worker is killed)."""
        deadline = time.monotonic() + timeout_s if deadline is None else deadline
        header = self._read_exact(wire.HEADER.size, deadline, timeout_s, late)
        if isinstance(header, str):
            return header
        try:
            body = self._read_exact(wire.message_size(header), deadline, timeout_s, late)
            if isinstance(body, str):
                return body
            return wire.unpack_reply(wire.decode(body))
        except wire.WireError as exc:
            self.close()
            return f"sent a malformed reply ({exc}); stopped"

    def _ended(self, deadline: float) -> str:
        """Why the worker ended: the signal (a crash) or the exit status (``os._exit``)."""
        try:
            code = self.proc.wait(max(deadline - time.monotonic(), 0.05))
        except subprocess.TimeoutExpired:  # it closed its end of the pipe but runs on
            self.close()
            return "closed its channel to the grader without ending; stopped"
        self.close()
        if code < 0:
            name = signal.Signals(-code).name
            what = {"SIGSEGV": "crashed (segmentation fault)", "SIGKILL": "was killed (out of memory?)"}
            return f"the process {what.get(name, f'was ended by {name}')}"
        return f"the process exited with status {code} (os._exit?) before answering"
