"""The learner's progress: a small SQLite database (stdlib ``sqlite3``), written in transactions.

Where it lives: ``$ATTNLAB_DATA_DIR/study.sqlite3`` when that variable is set (or a ``--data-dir``
option passes a folder), else ``$XDG_DATA_HOME/attnlab/study.sqlite3``, else
``~/.local/share/attnlab/study.sqlite3`` (the XDG default).

Tables (schema version :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version``): ``ticks`` (lessons
the learner could explain), ``quiz`` (quiz scores), ``practice`` (graded practice results with their
per-check JSON) and ``events`` (one row per change, written in the same transaction as the change).
Every change is one ``BEGIN IMMEDIATE .. COMMIT``, so a command killed mid-write leaves the database
as it was before that change. A file that is not a database, or one from a newer schema, raises
:class:`StudyError` with one line; it is never reset without the learner asking. A database that
lacks some of the tables (a partial copy, an older attnlab) gets them created empty, the others
kept, and says so with one :class:`StudyRepairedWarning`; a table without its columns is named.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import warnings
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

SCHEMA_VERSION = 1
DB_NAME = "study.sqlite3"
ENV_VAR = "ATTNLAB_DATA_DIR"

_SCHEMA = """
CREATE TABLE ticks (lesson INTEGER PRIMARY KEY, at TEXT NOT NULL);
CREATE TABLE quiz (id INTEGER PRIMARY KEY, topic TEXT, seed INTEGER, right INTEGER NOT NULL,
                   asked INTEGER NOT NULL, total INTEGER NOT NULL, at TEXT NOT NULL);
CREATE TABLE practice (id INTEGER PRIMARY KEY, exercise TEXT NOT NULL, file TEXT NOT NULL,
                       score INTEGER NOT NULL, total INTEGER NOT NULL, passed INTEGER NOT NULL,
                       detail TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, ref INTEGER, at TEXT NOT NULL);
"""


_TABLES = {  # table name -> its CREATE statement
    statement.split()[2]: statement.strip() for statement in _SCHEMA.split(";") if statement.strip()
}


class StudyError(ValueError):
    """The database cannot be used as it is (corrupt, newer, unwritable): one line, exit 2. It names
    the arguments a caller can change: ``directory=`` (another folder) and ``reset=True`` (delete the
    file, :func:`reset`); the commands name their ``--data-dir`` and ``attnlab study --reset``."""


class StudyRepairedWarning(UserWarning):
    """The database lacked tables (an older or partly copied file): they were created empty, the
    rest kept. Commands print it as one ``Warning:`` line."""


def data_dir(override: str | os.PathLike | None = None) -> Path:
    """The folder of the database: ``override``, ``$ATTNLAB_DATA_DIR``, ``$XDG_DATA_HOME/attnlab``,
    ``~/.local/share/attnlab``."""
    if override:
        return Path(override)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "attnlab"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


class Study:
    """The open database. Use as a context manager; every ``record``/``tick`` is one transaction."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.path = data_dir(directory) / DB_NAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        except (OSError, sqlite3.Error) as exc:
            raise StudyError(f"cannot open the study database {self.path}: {exc}") from None
        try:
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StudyError(
                f"the study database {self.path} is corrupt ({exc}); nothing was changed: move it away "
                f"or delete it with reset=True"
            ) from None
        except StudyError:
            self.conn.close()
            raise

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StudyError(
                f"the study database {self.path} was written by a newer attnlab (schema {version}; this "
                f"one reads {SCHEMA_VERSION}); nothing was changed: upgrade attnlab or use another directory="
            )
        present = self._tables()  # reads the file: corrupt -> error
        if version != SCHEMA_VERSION and not present <= set(_TABLES):
            raise StudyError(f"{self.path} is an SQLite file but not an attnlab study database")
        self._check_columns(present)
        if version == SCHEMA_VERSION and present >= set(_TABLES):
            return
        with self.transaction() as c:  # (again under the lock: another process may have just made it)
            present = self._tables()
            missing = [name for name in _TABLES if name not in present]
            for name in missing:
                c.execute(_TABLES[name])
            c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if missing and present:  # a partial copy, or a file of an older attnlab: say what was done
            kept = ", ".join(name for name in _TABLES if name in present)
            warnings.warn(
                f"the study database {self.path} had no table {', '.join(missing)}: created it empty, "
                f"kept {kept}",
                StudyRepairedWarning,
                stacklevel=3,
            )

    def _tables(self) -> set[str]:
        return {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _check_columns(self, present: set[str]) -> None:
        """A table of ours whose columns are not all there is named (nothing is changed)."""
        for name in sorted(present & set(_TABLES)):
            have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({name})")}
            want = set(re.findall(r"(?:\(|,)\s*(\w+) ", _TABLES[name]))
            if not want <= have:
                raise StudyError(
                    f"the study database {self.path} has a table {name} without the column(s) "
                    f"{', '.join(sorted(want - have))}; nothing was changed: move it away or "
                    f"delete it with reset=True"
                )

    @contextmanager
    def transaction(self):
        """``BEGIN IMMEDIATE`` .. ``COMMIT``; any exception (or the process dying) rolls back."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ---------------------------------------------------------------- writes

    def tick(self, lesson: int, ticked: bool = True) -> bool:
        """Mark lesson ``lesson`` as explained (or not); returns whether anything changed."""
        with self.transaction() as c:
            if ticked:
                changed = c.execute("INSERT OR IGNORE INTO ticks VALUES (?, ?)", (lesson, _now())).rowcount
            else:
                changed = c.execute("DELETE FROM ticks WHERE lesson = ?", (lesson,)).rowcount
            if changed:
                c.execute(
                    "INSERT INTO events (kind, ref, at) VALUES (?, ?, ?)",
                    ("tick" if ticked else "untick", lesson, _now()),
                )
        return bool(changed)

    def record_quiz(self, topic: str | None, seed: int | None, right: int, asked: int, total: int) -> None:
        """One finished (or stopped) quiz: ``right`` of ``asked`` answered, ``total`` planned."""
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO quiz (topic, seed, right, asked, total, at) VALUES (?, ?, ?, ?, ?, ?)",
                (topic, seed, right, asked, total, _now()),
            )
            c.execute("INSERT INTO events (kind, ref, at) VALUES ('quiz', ?, ?)", (cur.lastrowid, _now()))

    def record_practice(self, exercise: str, file: str, score: int, total: int, detail: list) -> None:
        """One graded practice run; ``detail`` is the per-check list (stored as JSON)."""
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO practice (exercise, file, score, total, passed, detail, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (exercise, str(file), score, total, int(score == total), json.dumps(detail), _now()),
            )
            c.execute("INSERT INTO events (kind, ref, at) VALUES ('practice', ?, ?)", (cur.lastrowid, _now()))

    # ---------------------------------------------------------------- reads

    def ticked(self) -> dict[int, str]:
        """``{lesson: when ticked}``."""
        return dict(self.conn.execute("SELECT lesson, at FROM ticks ORDER BY lesson"))

    def best_quiz(self) -> dict[str | None, tuple[int, int, int]]:
        """``{topic: (right, asked, planned)}`` of the best quiz per topic (``None`` = mixed), as
        ``attnlab quiz`` printed it (``0/1 (3 not asked)``). Quizzes are ranked by right answers over
        the questions planned, so one stopped early cannot outrank a finished one (1 right of 3
        planned, then stopped, ranks as 1/3, not as a perfect 1/1); a tie goes to the one answered
        further."""
        best: dict[str | None, tuple[int, int, int]] = {}
        rows = self.conn.execute("SELECT topic, right, asked, max(asked, total) FROM quiz WHERE asked > 0")
        for topic, right, asked, planned in rows:
            old = best.get(topic)
            if old is None or (right / planned, asked) > (old[0] / old[2], old[1]):
                best[topic] = (right, asked, planned)
        return best

    def latest_practice(self) -> dict[str, dict]:
        """``{exercise: the latest result}`` (file, score, total, passed, detail list, at)."""
        rows = self.conn.execute(
            "SELECT exercise, file, score, total, passed, detail, at FROM practice ORDER BY id"
        )
        latest = {}
        for exercise, file, score, total, passed, detail, at in rows:
            latest[exercise] = {
                "file": file,
                "score": score,
                "total": total,
                "passed": bool(passed),
                "detail": json.loads(detail),
                "at": at,
            }
        return latest

    def ever_passed(self) -> set[str]:
        """The exercises that passed every check at least once."""
        return {
            row[0] for row in self.conn.execute("SELECT DISTINCT exercise FROM practice WHERE passed = 1")
        }


def reset(directory: str | os.PathLike | None = None) -> Path | None:
    """Delete the database file (and SQLite's journal beside it); returns the path, or None if absent."""
    path = data_dir(directory) / DB_NAME
    existed = path.exists()
    for p in (path, path.with_name(DB_NAME + "-journal"), path.with_name(DB_NAME + "-wal")):
        p.unlink(missing_ok=True)
    return path if existed else None
