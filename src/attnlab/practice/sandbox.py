"""Run the learner's functions in a separate, limited process (:mod:`attnlab.practice.worker`).

:class:`Sandbox` keeps one worker alive across calls (a call costs a round trip, not an import of
NumPy). Each call has its own time limit; when the worker does not answer in time it is killed and
the next call starts a fresh one, so an infinite loop fails one check and the others still run.
A worker that ends (``os._exit``, a segmentation fault, the memory limit) fails the call it was
running the same way.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from attnlab.practice import wire

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 1024
IMPORT_TIMEOUT_S = 20.0  # starting Python and NumPy under load, then the file's own imports


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
        self.starts = 0
        self.import_error: str | None = None  # once the file fails to import, every call fails with it

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill the worker (if any) and reap it."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self.proc = None

    def start(self) -> str | None:
        """Start a worker and import the file; ``None`` when ready, else why the import failed."""
        self.close()
        self.starts += 1
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attnlab.practice.worker", self.path, str(self.memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        reply = self._read(max(self.import_timeout_s, self.timeout_s))
        if isinstance(reply, str):
            return reply
        if str(reply["__status__"]) == "import-error":
            self.close()
            return str(reply["__error__"])
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
                self.import_error = f"importing your file failed: {why}"
                return Outcome(error=self.import_error)
        try:
            wire.send(self.proc.stdin, wire.pack_call(name, args, kwargs))
        except (BrokenPipeError, OSError):
            return Outcome(error=self._ended())
        reply = self._read(self.timeout_s)
        if isinstance(reply, str):
            return Outcome(error=reply)
        if str(reply["__status__"]) != "ok":
            return Outcome(error=str(reply["__error__"]))
        return Outcome(value=wire.unpack_result(reply))

    def _read(self, timeout_s: float) -> dict | str:
        """The next message, or a one-line reason there is none (time limit, process ended)."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        buf = b""
        need = 8
        while len(buf) < need:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self.close()
                return f"did not finish within {timeout_s:g} s (an infinite loop?); stopped"
            chunk = os.read(fd, need - len(buf))
            if not chunk:
                return self._ended()
            buf += chunk
            if need == 8 and len(buf) >= 8:
                need = 8 + wire.HEADER.unpack(buf[:8])[0]
        try:
            return wire.decode(buf[8:need])
        except ValueError as exc:  # e.g. an object array smuggled in
            return f"sent something that is not an array of numbers ({exc})"

    def _ended(self) -> str:
        """Why the worker ended: the signal (a crash) or the exit status (``os._exit``)."""
        code = self.proc.wait()
        self.close()
        if code < 0:
            name = signal.Signals(-code).name
            what = {"SIGSEGV": "crashed (segmentation fault)", "SIGKILL": "was killed (out of memory?)"}
            return f"the process {what.get(name, f'was ended by {name}')}"
        return f"the process exited with status {code} (os._exit?) before answering"
