"""A throwaway PostgreSQL server on 127.0.0.1 (or an address of a network namespace, netns.py),
for the tests, the demo and the benchmarks.

`initdb` makes a cluster in a temporary directory of its own, then `postgres` serves it on a
free port, as a child process that ends with the caller (service.py); the directory is removed
when it stops. Never a server that happens to be running on the machine: the binaries are the
ones the project installs itself, the PyPI wheel `pgserver` of the test extra (PostgreSQL 16,
its binaries only: its own start-up code is not used), or a directory named by
DEVSTACK_POSTGRES_BIN (Debian's `/usr/lib/postgresql/<major>/bin`, for instance).

PostgreSQL refuses to run as root. As root the cluster belongs to DEVSTACK_POSTGRES_USER
(`nobody` by default), whose identity the server takes before it starts; nobody is created.

The server is tuned for a throwaway: no fsync, no synchronous commit, no full-page writes. A
crash of the machine may lose or corrupt it, which a test's database may afford; a clean stop
or a `restart` (fast shutdown, then the same data on the same address and port) loses
nothing. Only password (SCRAM) logins over TCP: no Unix socket is made.
"""

import asyncio
import contextlib
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from importlib import util as importlib_util
from pathlib import Path

import asyncpg
import attrs

from entrypoints.devstack.service import Service, ServiceError, free_port

BIN_VARIABLE = "DEVSTACK_POSTGRES_BIN"
USER_VARIABLE = "DEVSTACK_POSTGRES_USER"
DEFAULT_USER = "nobody"
SUPERUSER = "postgres"
START_TIMEOUT_S = 60.0
READY_LINE = r"database system is ready to accept connections"
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # Each test's pool holds a few connections; two test sessions (xdist) each run a server.
    "max_connections": "200",
    "shared_buffers": "32MB",
}


@attrs.define(eq=False)
class ServerProcess:
    """The `postgres` process serving one cluster, which a restart replaces."""

    argv: list[str]
    log_dir: Path
    user: str | None
    launcher: Sequence[str]
    service: Service | None = None
    starts: int = 0

    def start(self) -> None:
        """Raises ServiceError (with its log) if it exits or is not ready in time."""
        self.starts += 1
        name = "postgres" if self.starts == 1 else f"postgres-{self.starts}"
        self.service = Service.start(
            name,
            self.argv,
            self.log_dir,
            user=self.user,
            stop_signal=signal.SIGINT,  # fast shutdown: open sessions are ended, not waited for
            launcher=self.launcher,
        )
        try:
            self.service.wait_for_line(READY_LINE, START_TIMEOUT_S)
        except ServiceError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop(grace_s=10.0)


@attrs.frozen
class LocalPostgres:
    host: str
    port: int
    password: str = attrs.field(repr=False)
    data_dir: Path
    bin_dir: Path
    version: str
    user: str = SUPERUSER
    process: ServerProcess | None = attrs.field(default=None, repr=False, eq=False)

    def restart(self) -> None:
        """Stops the server (fast shutdown: every session is ended) and starts it again on
        the same data, address and port; returns once it accepts connections. Blocks."""
        assert self.process is not None, "only a server local_postgres started restarts"
        self.process.stop()
        self.process.start()

    def url(self, database: str = "postgres") -> str:
        """A libpq URI for `database` with the superuser's password in it (a secret: pass it
        to a client, never to a log)."""
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def describe(self) -> str:
        return f"PostgreSQL {self.version} at {self.host}:{self.port} ({self.bin_dir})"


def locate(bin_dir: Path | None = None) -> Path | str:
    """The directory holding `initdb` and `postgres`, or why there is none."""
    if bin_dir is None and os.environ.get(BIN_VARIABLE):
        bin_dir = Path(os.environ[BIN_VARIABLE])
    if bin_dir is None:
        spec = importlib_util.find_spec("pgserver")  # found, not imported: no start-up code
        if spec is None or spec.origin is None:
            return (
                "the PostgreSQL binaries are missing: install the test extra "
                f"(`make install` installs pgserver) or set {BIN_VARIABLE}"
            )
        bin_dir = Path(spec.origin).parent / "pginstall" / "bin"
    missing = [name for name in ("initdb", "postgres") if not (bin_dir / name).is_file()]
    if missing:
        return f"{' and '.join(missing)} not found in {bin_dir}"
    return bin_dir


def _server_user() -> str | None:
    """Whom the server runs as: None (this process's user) unless this process is root."""
    if os.geteuid() != 0:
        return None
    return os.environ.get(USER_VARIABLE) or DEFAULT_USER


def _reachable_by(bin_dir: Path, user: str | None) -> Path:
    """`bin_dir`, or a copy of its installation that the server's user can reach: binaries in
    a virtualenv under a private directory (a clone in a 0700 temporary directory, as CI
    makes) cannot be executed by `nobody`. The copy (about 35 MB for pgserver's) is made once
    per installation under the system's temporary directory, and reused. It keeps the layout
    the binaries' run path names: pgserver's find their libraries at
    `$ORIGIN/../../../pgserver.libs`."""
    if user is None or all(p.stat().st_mode & stat.S_IXOTH for p in (bin_dir, *bin_dir.parents)):
        return bin_dir
    install = bin_dir.parent  # .../pgserver/pginstall
    package = install.parent  # .../pgserver
    key = hashlib.sha256(str(install.resolve()).encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"wsfleet-postgres-{key}"
    copied = target / package.name / install.name / bin_dir.name
    if not (copied / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
        try:
            made = staging / "copy"
            shutil.copytree(install, made / package.name / install.name, symlinks=True)
            libs = package.parent / f"{package.name}.libs"
            if libs.is_dir():
                shutil.copytree(libs, made / libs.name, symlinks=True)
            for path in (made, *made.rglob("*")):
                if path.is_dir():
                    path.chmod(0o755)
            with contextlib.suppress(OSError):  # another process made it meanwhile
                made.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return copied


def _version(bin_dir: Path) -> str:
    out = subprocess.run(
        [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return out.strip().rsplit(" ", 1)[-1]


def _initdb(bin_dir: Path, root: Path, user: str | None) -> tuple[Path, str]:
    password = secrets.token_urlsafe(18)  # URL-safe: it goes into the URI unquoted
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    data_dir = root / "data"
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (root, pwfile):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    try:
        result = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data_dir),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            user=user,
            group=None if user is None else pwd.getpwnam(user).pw_gid,
            extra_groups=None if user is None else [],
        )
    finally:
        pwfile.unlink()
    if result.returncode != 0:
        raise ServiceError(f"initdb failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return data_dir, password


def server_command(
    bin_dir: Path,
    data_dir: Path,
    port: int,
    host: str = "127.0.0.1",
    extra: Mapping[str, str] | None = None,
) -> list[str]:
    settings = {**SETTINGS, **(extra or {}), "listen_addresses": host}
    options = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
    return [str(bin_dir / "postgres"), "-D", str(data_dir), "-p", str(port), *options]


@contextmanager
def local_postgres(
    log_dir: Path,
    bin_dir: Path | None = None,
    attempts: int = 3,
    *,
    host: str = "127.0.0.1",
    launcher: Sequence[str] = (),
    settings: Mapping[str, str] | None = None,
) -> Iterator[LocalPostgres]:
    """Makes a cluster, serves it until the block ends, then stops it and removes it.
    `host`: the address it listens on; `launcher`: where it runs (`Network.launcher(host)`
    of netns.py; the cluster is made here, its files are the same); `settings`: server
    settings over SETTINGS (a benchmark's `log_statement`). Raises ServiceError if the
    binaries are missing or the server does not start."""
    found = locate(bin_dir)
    if isinstance(found, str):
        raise ServiceError(found)
    user = _server_user()
    found = _reachable_by(found, user)
    root = Path(tempfile.mkdtemp(prefix="wsfleet-postgres-"))
    try:
        data_dir, password = _initdb(found, root, user)
        if host != "127.0.0.1":
            # initdb lets in loopback clients only; on a LAN of its own (netns.py) its hosts.
            with (data_dir / "pg_hba.conf").open("a") as hba:
                hba.write("host all all samenet scram-sha-256\n")
        process, port = _serve(found, data_dir, log_dir, user, attempts, host, launcher, settings)
        try:
            yield LocalPostgres(
                host, port, password, data_dir, found, _version(found), process=process
            )
        finally:
            process.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _serve(
    bin_dir: Path,
    data_dir: Path,
    log_dir: Path,
    user: str | None,
    attempts: int,
    host: str,
    launcher: Sequence[str],
    settings: Mapping[str, str] | None = None,
) -> tuple[ServerProcess, int]:
    for attempt in range(attempts):
        port = free_port()
        argv = server_command(bin_dir, data_dir, port, host, settings)
        process = ServerProcess(argv, log_dir, user, launcher)
        try:
            process.start()
        except ServiceError:
            tail = process.service.tail() if process.service else ""
            if attempt + 1 == attempts or "could not bind" not in tail:
                raise
            continue
        return process, port
    raise AssertionError("unreachable")


@asynccontextmanager
async def open_local_postgres(
    log_dir: Path,
    *,
    host: str = "127.0.0.1",
    launcher: Sequence[str] = (),
    settings: Mapping[str, str] | None = None,
) -> AsyncIterator[LocalPostgres]:
    """`local_postgres` for an event loop: starting and stopping block, so they run on a thread."""
    manager = local_postgres(log_dir, host=host, launcher=launcher, settings=settings)
    server = await asyncio.to_thread(manager.__enter__)
    try:
        yield server
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


@asynccontextmanager
async def fresh_database(
    server: LocalPostgres, prefix: str = "wsfleet", *, drop: bool = True
) -> AsyncIterator[str]:
    """A new, empty database on `server` for one test or run; yields its URI and drops it
    afterwards (ending whatever sessions are still connected to it). `drop=False` leaves it to
    the server's removal: a drop forces a checkpoint, most of a test database's cost."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    admin = await asyncpg.connect(server.url())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield server.url(name)
    finally:
        if drop:
            await _drop(server, name)


async def _drop(server: LocalPostgres, name: str) -> None:
    admin = await asyncpg.connect(server.url())
    try:
        with contextlib.suppress(asyncpg.PostgresError):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
