"""A private PostgreSQL server for a test: Debian's ``postgresql`` binaries, a fresh data directory.

Airflow runs several triggerers (and schedulers) only on a real database: SQLite lets one writer
in at a time and Airflow refuses more than one scheduler on it. The server lives in a temporary
directory, listens on a free loopback port, trusts local connections, and is stopped (fast
shutdown) when the test is done. Durability is switched off (``fsync``, ``synchronous_commit``,
``full_page_writes``): a test database is thrown away, and a commit must not wait on the disk.

PostgreSQL refuses to run as root; as root the server runs as the ``postgres`` user Debian's
package creates, in a directory of its own under the system's temporary directory (which every
user can reach; pytest's own temporary directories are private to root) handed to that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.deployment import DeploymentError, free_port, wait_until

SERVER_USER = "postgres"


def binaries() -> Path | None:
    """The directory of ``initdb`` and ``postgres``: Debian keeps them off PATH, per major version."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if versions:
        return Path(versions[-1]).parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def missing() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    if binaries() is None:
        return "PostgreSQL is not installed (Debian: postgresql; scripts/setup-env installs it as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run PostgreSQL as"
    return None


class PostgresServer:
    """``with PostgresServer() as server: server.url("airflow")``."""

    def __init__(self, *, max_connections: int = 200):
        self.directory = Path(tempfile.mkdtemp(prefix="pathways-airflow-postgres-"))
        self.data = self.directory / "data"
        self.log = self.directory / "postgres.log"
        self.port = free_port()
        self.max_connections = max_connections
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def _as_server_user() -> dict[str, object]:
        """``subprocess`` arguments that drop root for the server user (none when not root)."""
        if os.geteuid() != 0:
            return {}
        return {"user": SERVER_USER, "group": pwd.getpwnam(SERVER_USER).pw_gid, "extra_groups": []}

    def _run(self, *argv: str) -> None:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=120, cwd=self.directory, **self._as_server_user())  # type: ignore[call-overload]
        if result.returncode != 0:
            raise DeploymentError(f"{' '.join(argv)} failed:\n{(result.stdout + result.stderr)[-3000:]}")

    def start(self) -> "PostgresServer":
        bindir = binaries()
        if bindir is None:
            raise DeploymentError(missing() or "PostgreSQL is not installed")
        try:
            self._start(bindir)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, bindir: Path) -> None:
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        self._run(str(bindir / "initdb"), "-D", str(self.data), "--auth=trust", "--username=postgres", "--encoding=UTF8", "--no-sync")
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.directory),
            "max_connections": str(self.max_connections),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        argv = [str(bindir / "postgres"), "-D", str(self.data)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        with open(self.log, "ab") as out:  # opened by this process: the server user need not own it
            self.process = subprocess.Popen(  # type: ignore[call-overload]
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.directory,
                start_new_session=True, **self._as_server_user(),
            )
        wait_until("PostgreSQL accepting connections", self._accepting, timeout=60)
        self._run(str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-c", "CREATE DATABASE airflow")

    def _accepting(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise DeploymentError(f"PostgreSQL exited ({self.process.returncode}):\n{self.log.read_text(errors='replace')[-3000:]}")
        bindir = binaries()
        probe = subprocess.run(
            [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True, timeout=10,
        )
        return probe.returncode == 0

    def url(self, database: str = "airflow") -> str:
        """The SQLAlchemy URL Airflow's ``[database] sql_alchemy_conn`` takes."""
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Fast shutdown (SIGINT: roll back open transactions, then exit), SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        self.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
