"""``context-compactor serve``: compaction over HTTP, a compacting proxy and seed 003's summary cards.

Install the extra (``pip install "context-compactor[server]"``) and run ``context-compactor
serve``; see ``docs/server.md``. One module per responsibility:

- :mod:`.settings`: what a server is started with (safe defaults; no framework import).
- :mod:`.security`: the gate in front of every route (Host/Origin, token, CORS, body limit).
- :mod:`.api`: ``/v1/count``, ``/v1/check``, ``/v1/compact``; :mod:`.schemas`: their bodies.
- :mod:`.sessions`: ``/v1/sessions…`` over the stores.
- :mod:`.proxy`: forwarding; :mod:`.rewrite`: the per-request decision; :mod:`.prefixes`: the
  same compacted prefix from call to call; :mod:`.windows`: the window per model.
- :mod:`.page`: the page (``static/``); :mod:`.app`: the ASGI app; :mod:`.run`: uvicorn.

Only this package imports the web framework: ``import context_compactor`` never does.
"""

from __future__ import annotations

from context_compactor.server.settings import TOKEN_HEADER, ServerSettings

__all__ = ["TOKEN_HEADER", "ServerSettings", "create_app"]


def create_app(settings: ServerSettings | None = None) -> object:
    """The ASGI application (see :func:`context_compactor.server.app.create_app`)."""
    from context_compactor.server.app import create_app as _create

    return _create(settings)
