"""The child process that runs the learner's code: ``python -m attnlab.practice.worker FILE LIMIT_MB``.

It limits its own address space (``RLIMIT_AS``) and CPU time, imports the learner's file, then
answers calls until its input ends. Messages both ways are length-prefixed ``.npz`` archives read
with ``allow_pickle=False`` (see :mod:`attnlab.practice.wire`), on duplicates of the original
stdin/stdout; file descriptors 0 and 1 are pointed at ``/dev/null`` so a ``print`` in the learner's
code cannot corrupt the protocol. Every exception of the learner's code, ``SystemExit`` and
``KeyboardInterrupt`` included, is returned as an error message; ``os._exit``, a crash or a hang
is seen by the parent as the process ending or not answering.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import sys
import traceback


def _limit_memory(limit_mb: int) -> None:
    """Address space at most ``limit_mb`` MiB (a huge allocation raises MemoryError); no core files."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = limit_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _error_text(exc: BaseException, path: str) -> str:
    """``NameError: name 'x' is not defined (line 12 of your file)`` — where in their file it failed."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    line = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.abspath(frame.filename) == path:
            line = f" (line {frame.lineno} of your file)"
            break
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300] + line


def main() -> None:
    path, limit_mb = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    import numpy as np

    from attnlab.practice import wire

    _limit_memory(limit_mb)
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec = importlib.util.spec_from_file_location("learner_solution", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - whatever their file raises is reported, not raised
        wire.send(
            out, {"__status__": np.array("import-error"), "__error__": np.array(_error_text(exc, path))}
        )
        return
    wire.send(out, {"__status__": np.array("ready")})
    while True:
        request = wire.receive(inp)
        if request is None:
            return
        name, args, kwargs = wire.unpack_call(request)
        try:
            result = getattr(module, name)(*args, **kwargs)
            reply = wire.pack_result(result)
        except BaseException as exc:  # noqa: BLE001
            reply = {"__status__": np.array("error"), "__error__": np.array(_error_text(exc, path))}
        try:
            wire.send(out, reply)
        except MemoryError:
            wire.send(out, {"__status__": np.array("error"), "__error__": np.array("MemoryError")})


if __name__ == "__main__":
    main()
