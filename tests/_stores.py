"""The store backends every store test runs on: one parameter per backend.

``store_target`` is what ``SessionStore(...)``/``Session(...)`` open for a backend: a SQLite file
path, or the URL of a fresh database on the session's throwaway PostgreSQL server
(:mod:`_pg_server`). A new backend is one entry in :data:`BACKENDS` (and its own server helper, if
it needs one): every test that takes ``store_target`` then runs on it too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    from _pg_server import PostgresServer

    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.new_database()


#: Backend name -> how a test gets a fresh, empty store of it.
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    "sqlite": _sqlite,
    "postgresql": _postgresql,
}


@pytest.fixture(params=list(BACKENDS))
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of each backend in turn (a path or a URL)."""
    return BACKENDS[request.param](request, tmp_path)
