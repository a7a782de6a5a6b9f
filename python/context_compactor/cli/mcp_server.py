"""``context-compactor mcp``: the recall MCP server over one session's originals (the ``[mcp]``
extra; see ``docs/recall.md``). The ``mcp`` SDK is imported only when it runs."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``mcp`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "mcp", help="serve the recall and search tools over one session's compacted originals (MCP)"
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="the sessions' store: a SQLite path or postgresql://… (with --session)")
    where.add_argument("--offload-dir", help="an offload_dir the compactor wrote recall-<id>.txt files to")
    p.add_argument("--session", help="the session id (with --store)")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 (default: stdio)")
    p.add_argument("--port", type=int, default=8788, help="HTTP port (default 8788)")
    p.add_argument(
        "--token", default=None, help="HTTP bearer token (default: $CONTEXT_COMPACTOR_MCP_TOKEN, else generated)"
    )
    p.add_argument("--max-context-tokens", type=int, default=None, help="the window: pages are at most 10%% of it")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from context_compactor.config import CompactionConfig
    from context_compactor.mcp_server import build_server, serve_http
    from context_compactor.recall import Recall

    config = CompactionConfig(max_context_tokens=args.max_context_tokens) if args.max_context_tokens else None
    if args.store is not None:
        if not args.session:
            raise ValueError("--store needs --session (the server reads one session)")
        from context_compactor.stores import SessionStore

        # SessionStore(url) picks the backend (SQLite path or postgresql://) in __new__.
        opener: Any = SessionStore
        store = opener(args.store)
        if args.session not in store.session_ids():
            raise ValueError(f"no session {args.session!r} in {args.store}")
        recall = Recall.from_store(store, args.session, config=config)
    else:
        recall = Recall(args.offload_dir, config=config)
    server = build_server(recall)
    if not args.http:
        server.run()  # stdio
        return 0
    token = args.token or os.environ.get("CONTEXT_COMPACTOR_MCP_TOKEN") or secrets.token_urlsafe(24)
    if not (args.token or os.environ.get("CONTEXT_COMPACTOR_MCP_TOKEN")):
        print(f"context-compactor mcp: token {token}", file=sys.stderr, flush=True)
    print(f"context-compactor mcp: http://127.0.0.1:{args.port}/mcp", file=sys.stderr, flush=True)
    serve_http(server, token, port=args.port)
    return 0
