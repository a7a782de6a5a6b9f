"""A throwaway PostgreSQL cluster for the store tests: a real server, no mock.

``initdb`` and ``postgres`` refuse to run as root, so under root the cluster belongs to the
unprivileged ``nobody`` user (``runuser -u nobody``) and lives in a fresh directory of /tmp that
it owns (pytest's own temporary folders are private to root). The server listens on a free port
of 127.0.0.1 only, with its Unix socket in that directory, and is stopped (``-m immediate``) and
deleted after the session. ``fsync=off``: the tests kill clients, never the server, so skipping
disk flushes loses nothing they check and saves seconds.

The binaries come from Debian's packages (``make install`` installs ``postgresql`` when absent,
as root). Without them, or if the server does not start, the tests that need it are skipped
with the reason, except under ``CI=true``, where that fails the run.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "nobody"


def find_bindir() -> str | None:
    """The directory of ``initdb``/``pg_ctl`` (Debian keeps them out of PATH), newest version."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running cluster: ``url`` is a ``postgresql://`` connection string for its database."""

    bindir: str
    root: Path
    port: int
    databases: int = 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def new_database(self) -> str:
        """A fresh, empty database on this server (one per test): its connection string."""
        import psycopg

        self.databases += 1
        name = f"t{os.getpid()}_{self.databases}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [os.path.join(self.bindir, args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", USER, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> None:
        data = self.root / "data"
        r = self._run("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "-N")
        if r.returncode:
            raise RuntimeError(f"initdb failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=100"
        )
        r = self._run("pg_ctl", "-D", str(data), "-o", options, "-l", str(self.root / "server.log"), "-w", "start")
        if r.returncode:
            log = (self.root / "server.log").read_text(errors="replace") if (self.root / "server.log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed ({r.returncode}): {r.stderr.strip()}\n{log[-2000:]}")

    def restart(self) -> None:
        """Restart the server (``-m fast``: every connection is dropped), on the same port."""
        r = self._run(
            "pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "server.log"), "-m", "fast", "-w", "restart"
        )
        if r.returncode:
            raise RuntimeError(f"pg_ctl restart failed ({r.returncode}): {r.stderr.strip()}")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PostgresServer:
    """Start a throwaway cluster (raises ``RuntimeError`` with the reason when it cannot)."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb): `make install` installs it as root")
    root = Path(tempfile.mkdtemp(prefix="cc-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, USER)
    last: Exception | None = None
    for _ in range(3):  # the free port may be taken between finding it and binding it
        server = PostgresServer(bindir, root, _free_port())
        try:
            server.start()
            return server
        except RuntimeError as e:
            last = e
            server._run("pg_ctl", "-D", str(root / "data"), "-m", "immediate", "stop")
            for p in root.iterdir():
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
            time.sleep(0.2)
    shutil.rmtree(root, ignore_errors=True)
    raise RuntimeError(str(last))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (skipped with the reason when unavailable; failing under CI=true)."""
    try:
        server = start_server()
    except RuntimeError as e:
        msg = f"no PostgreSQL server for the store tests: {e}"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    return postgres_server.url
