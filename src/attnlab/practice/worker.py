"""The child process that runs the learner's code:
``python -m attnlab.practice.worker FILE LIMIT_MB GRADER_PID``.

Started by :class:`attnlab.practice.sandbox.Sandbox` in a session of its own and in an empty
working folder. It first asks the kernel to kill it when the grader ends
(:func:`attnlab.practice.confine.die_with_parent`: a grader ended from outside, by SIGTERM or
SIGKILL, leaves no worker behind), imports NumPy, confines itself
(:mod:`attnlab.practice.confine`: hard limits, no new process, no signal to another process,
nothing writable but its folder, no change of a file's attributes, attnlab and PyTorch
unreadable), says so (``importing``: the grader's clock for the file's import starts),
imports the learner's file, says ``ready``, then answers calls until its input ends. Messages
both ways are :mod:`attnlab.practice.wire` messages on duplicates of the original stdin/stdout; file
descriptors 0 and 1 are pointed at ``/dev/null`` so a ``print`` in the learner's code cannot
corrupt the protocol. The learner's code can still reach those duplicates (a frame local), so the
grader treats every reply as untrusted. Every exception of the learner's code, ``SystemExit`` and
``KeyboardInterrupt`` included, is returned as an error message; ``os._exit``, a crash or a hang
is seen by the parent as the process ending or not answering.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback


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
    from attnlab.practice.confine import confine, die_with_parent

    path, limit_mb = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    die_with_parent(int(sys.argv[3]))
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    import numpy  # noqa: F401 - imported before the limits, as the learner's file would

    from attnlab.practice import wire

    confined = confine(limit_mb, os.getcwd(), path)
    wire.send(out, {"status": "importing", "confined": ",".join(confined)})
    sys.path[0:0] = [os.path.dirname(path)]
    try:
        spec = importlib.util.spec_from_file_location("learner_solution", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - whatever their file raises is reported, not raised
        wire.send(out, {"status": "import-error", "error": _error_text(exc, path)})
        return
    wire.send(out, {"status": "ready"})
    while True:
        request = wire.receive(inp)
        if request is None:
            return
        name, args, kwargs = wire.unpack_call(request)
        try:
            result = getattr(module, name)(*args, **kwargs)
            reply = wire.pack_result(result)
        except BaseException as exc:  # noqa: BLE001
            reply = {"status": "error", "error": _error_text(exc, path)}
        try:
            wire.send(out, reply)
        except MemoryError:
            wire.send(out, {"status": "error", "error": "MemoryError"})


if __name__ == "__main__":
    main()
