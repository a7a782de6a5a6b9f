"""Running the server under uvicorn: in the foreground (the CLI) or in a thread (tests, embedding)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from context_compactor.server.app import create_app
from context_compactor.server.settings import ServerSettings

__all__ = ["BackgroundServer", "serve"]


def _config(settings: ServerSettings, **extra: Any) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        lifespan="on",
        # Header values never reach the logs (a provider key would); the access log shows paths only.
        access_log=False,
        server_header=False,
        date_header=False,
        log_config=None,
        timeout_keep_alive=30,
        **extra,
    )


def serve(settings: ServerSettings) -> None:
    """Serve until interrupted."""
    uvicorn.Server(_config(settings)).run()


class BackgroundServer:
    """A server on a free port of 127.0.0.1 in a daemon thread; ``url`` once started.

    Example:
        >>> with BackgroundServer(ServerSettings(token="t", port=0)) as server:
        ...     print(server.url)
        http://127.0.0.1:...
    """

    def __init__(self, settings: ServerSettings) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((settings.host, settings.port))
        port = int(self.sock.getsockname()[1])
        if settings.port != port:  # the Origin check compares with the bound port
            from dataclasses import replace

            settings = replace(settings, port=port)
        self.settings = settings
        self.url = f"http://{settings.host}:{port}"
        self.server = uvicorn.Server(_config(settings))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> BackgroundServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()
