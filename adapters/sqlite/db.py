"""SqliteDatabase: one sqlite3 connection owned by one worker thread, for asyncio callers.

sqlite3 calls block (disk I/O, and up to `busy_timeout_s` waiting for another process's write
lock), so every call runs on a single-thread executor and the event loop never waits on them.
One thread for the connection's whole life also satisfies sqlite3's same-thread check, and
calls run in the order they were submitted. Nothing made by the connection may leave that
thread: a cursor freed on the event loop's thread resets its (cached, shared) statement while
the database thread may be stepping it, and sqlite3 fails that step with "bad parameter or
other API misuse". `_transaction` therefore refuses to return one.

Sharing one file between processes: WAL mode lets readers run beside the single writer; every
write transaction starts with BEGIN IMMEDIATE, which takes the write lock up front (waiting up
to busy_timeout). A deferred transaction that upgrades from read to write can fail with
SQLITE_BUSY at once, without waiting, which is why writes never use one.

Group commit: writes queued while the thread was busy run together in one transaction, each
in a savepoint of its own, so they cost one commit (one fsync at synchronous=FULL) instead of
one each. With thousands of sessions renewing every heartbeat, one fsync per renewal was the
embedded backend's ceiling (bench/RESULTS.md). Each write still succeeds or fails alone — a
write that raises is rolled back to its savepoint — and none is answered before the commit
that makes it durable.
"""

import asyncio
import collections
import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from application.errors import ApplicationError, ConfigurationError

T = TypeVar("T")


class _Write:
    """One queued write: its function, and the future (on its caller's loop) it answers."""

    __slots__ = ("fn", "future")

    def __init__(
        self, fn: Callable[[sqlite3.Connection], object], future: "asyncio.Future[object]"
    ) -> None:
        self.fn = fn
        self.future = future

    def answer(self, result: object = None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if self.future.done():  # its caller was cancelled meanwhile
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)

        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            self.future.get_loop().call_soon_threadsafe(settle)


SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")

# Result codes that mean "not now" rather than "wrong": the lock stayed taken past
# busy_timeout, or the disk or file system failed. Callers see the port's Unavailable error.
_UNAVAILABLE_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_PROTOCOL,
    }
)
# Result codes that, when opening, mean the file itself cannot be used as configured.
_UNUSABLE_FILE_CODES = frozenset(
    {
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_AUTH,
    }
)


class SqliteDatabase:
    """Create with `await SqliteDatabase.open(...)`; `close()` when done."""

    def __init__(
        self, path: Path, executor: ThreadPoolExecutor, unavailable: type[ApplicationError]
    ) -> None:
        self.path = path
        self._executor = executor
        self._unavailable = unavailable
        self._conn: sqlite3.Connection | None = None  # touched only by the executor's thread
        self._closed = False
        self._writes: collections.deque[_Write] = collections.deque()
        self._writes_lock = threading.Lock()  # the loop appends, the database thread takes
        self._group_scheduled = False
        self.commits = 0  # write transactions committed (fewer than writes: group commit)

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        schema: str,
        unavailable: type[ApplicationError],
        busy_timeout_s: float = 5.0,
        synchronous: str = "FULL",
        name: str = "sqlite",
    ) -> "SqliteDatabase":
        """Open (creating if needed) the database file in WAL mode and ensure `schema`.

        Raises ConfigurationError naming the path when the directory is missing or not
        writable, the file is not a database, or a setting is invalid; `unavailable` when the
        file stays locked past `busy_timeout_s` or the disk fails."""
        if synchronous.upper() not in SYNCHRONOUS_LEVELS:
            raise ConfigurationError(
                f"SQLite synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, "
                f"got {synchronous!r}"
            )
        if busy_timeout_s <= 0:
            raise ConfigurationError(f"SQLite busy timeout must be positive, got {busy_timeout_s}")
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"wsfleet-{name}")
        db = cls(Path(path), executor, unavailable)
        with db.closed_on_error():
            await db._call(lambda: db._connect(schema, busy_timeout_s, synchronous.upper()))
        return db

    @contextlib.contextmanager
    def closed_on_error(self) -> Iterator[None]:
        """Close this database if the block raises or is cancelled, then re-raise: around
        opening it and making an adapter of it, so that a failed open leaves no file open and
        no thread behind. The close is queued behind the calls already on the database's
        thread (after a cancellation the connect may still be running there) and not waited
        for, so that it never holds up the cancellation."""
        try:
            yield
        except BaseException:
            if not self._closed:
                self._closed = True
                self._executor.submit(self._close_in_thread)
                self._executor.shutdown(wait=False)
            raise

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in one read transaction: its statements see one consistent snapshot."""
        return await self._call(lambda: self._transaction("BEGIN", fn))

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in a BEGIN IMMEDIATE transaction, committed if `fn` returns and rolled
        back if it raises; other writes may share the transaction (group commit), each in
        its own savepoint. The write lock is held from the first statement, so nothing `fn`
        reads can change before it commits. Answered once committed."""
        if self._closed:
            raise RuntimeError(f"SQLite database {self.path} is closed")
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        with self._writes_lock:
            self._writes.append(_Write(fn, future))
            schedule = not self._group_scheduled
            self._group_scheduled = True
        if schedule:
            # Queued behind the calls submitted before this write, ahead of those after it.
            self._executor.submit(self._write_group)
        try:
            return await future  # type: ignore[return-value]
        except sqlite3.OperationalError as exc:
            raise self._translate(exc) from exc

    async def close(self) -> None:
        """Close the connection after the calls already queued; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close_in_thread)
        finally:
            # The close job has run (or is queued and will run first); the idle thread then ends.
            self._executor.shutdown(wait=False)

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise RuntimeError(f"SQLite database {self.path} is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn)
        except sqlite3.OperationalError as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.OperationalError) -> Exception:
        if exc.sqlite_errorcode & 0xFF in _UNAVAILABLE_CODES:
            return self._unavailable(f"SQLite database {self.path}: {exc}")
        return exc

    # Everything below runs on the executor's thread.

    def _write_group(self) -> None:
        """Run every write queued so far in one transaction, each in its own savepoint."""
        with self._writes_lock:
            group = list(self._writes)
            self._writes.clear()
            self._group_scheduled = False
        answers: list[tuple[_Write, object, BaseException | None]] = []
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for write in group:
                    answers.append((write, *self._in_savepoint(conn, write.fn)))
                conn.execute("COMMIT")
                self.commits += 1
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as exc:
            # The transaction is gone (lock not granted, disk failure, commit failed): what
            # succeeded in it was rolled back too, so every write of the group gets the error.
            for write in group:
                write.answer(error=exc)
            if not isinstance(exc, Exception):
                raise
            return
        for write, result, error in answers:
            write.answer(result, error)

    @staticmethod
    def _in_savepoint(
        conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], object]
    ) -> tuple[object, Exception | None]:
        """(result, None), or (None, the error) with fn's changes undone. An error that ends
        the whole transaction is raised (the group fails)."""
        conn.execute("SAVEPOINT write")
        try:
            result = fn(conn)
            _refuse_cursor(result)
        except Exception as exc:
            if not conn.in_transaction:
                raise  # SQLite rolled the transaction back itself (e.g. disk full)
            conn.execute("ROLLBACK TO write")
            conn.execute("RELEASE write")
            return None, exc
        conn.execute("RELEASE write")
        return result, None

    def _transaction(self, begin: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._connection()
        conn.execute(begin)
        try:
            result = fn(conn)
            _refuse_cursor(result)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"SQLite database {self.path} is not open")
        return self._conn

    def _connect(self, schema: str, busy_timeout_s: float, synchronous: str) -> None:
        _check_location(self.path)
        try:
            # isolation_level=None: no implicit transactions; every BEGIN here is explicit.
            conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open SQLite database {self.path}: {exc}") from exc
        try:
            conn.row_factory = sqlite3.Row
            mode = _enable_wal(conn, busy_timeout_s)
            if mode != "wal":
                raise ConfigurationError(
                    f"SQLite database {self.path} cannot use WAL mode (got {mode!r}); "
                    "put it on a local file system"
                )
            conn.execute(f"PRAGMA synchronous={synchronous}")
            self._conn = conn
            self._transaction("BEGIN IMMEDIATE", lambda c: _execute_script(c, schema))
        except sqlite3.DatabaseError as exc:
            self._conn = None
            conn.close()
            if exc.sqlite_errorcode & 0xFF in _UNUSABLE_FILE_CODES:
                raise ConfigurationError(f"cannot use SQLite database {self.path}: {exc}") from exc
            raise
        except BaseException:
            self._conn = None
            conn.close()
            raise

    def _close_in_thread(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _refuse_cursor(result: object) -> None:
    """Runs on the database thread: a cursor must not leave it (see the module's docstring)."""
    if isinstance(result, sqlite3.Cursor):
        result.close()  # here, on this thread, before anyone else could free it
        raise TypeError("a database call returned a cursor: return its rows instead")


def _enable_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
    """Switch to WAL (persistent in the file, so usually already done) and return the mode.

    Processes opening a fresh file at once race to switch it, and the switch can fail with
    SQLITE_BUSY at once, without the busy handler: retry it until busy_timeout has passed."""
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    deadline = time.monotonic() + busy_timeout_s
    while mode != "wal":
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))  # on the database thread, not the loop
    return mode


def _execute_script(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it would COMMIT the open transaction first.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _check_location(path: Path) -> None:
    """Fail with the path in the message, before sqlite3's terse 'unable to open'."""
    directory = path.absolute().parent
    if not directory.is_dir():
        raise ConfigurationError(
            f"SQLite data directory {directory} does not exist (database {path}); "
            "create it or choose another data directory"
        )
    # WAL mode creates the -wal and -shm files beside the database, so even an existing
    # database needs a writable directory.
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigurationError(f"SQLite data directory {directory} is not writable")
    if path.is_dir():
        raise ConfigurationError(f"SQLite database path {path} is a directory, not a file")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise ConfigurationError(f"SQLite database {path} is not readable and writable")
