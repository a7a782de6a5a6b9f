"""``context-compactor serve``: the HTTP API, the compacting proxy and the summary cards page
(the ``[server]`` extra; see ``docs/server.md``). The web framework is imported only when it runs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="serve the compaction API, the compacting proxy and the summary cards page"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8787, help="port (default 8787)")
    p.add_argument(
        "--store", default=":memory:", help="sessions' store: a SQLite path or postgresql://… (default in memory)"
    )
    p.add_argument("--upstream-openai", default="https://api.openai.com", help="where OpenAI-format requests go")
    p.add_argument("--upstream-anthropic", default="https://api.anthropic.com", help="where /v1/messages goes")
    p.add_argument(
        "--summarizer-endpoint",
        action="append",
        default=[],
        metavar="NAME=URL[#MODEL]",
        help="allow-list an OpenAI-compatible summarizer; requests name it (key: env CONTEXT_COMPACTOR_KEY_<NAME>)",
    )
    p.add_argument("--proxy-summarizer", default=None, metavar="NAME", help="the proxy's LLM summary (opt-in)")
    p.add_argument(
        "--models", default=None, metavar="FILE", help='JSON {"model": window_tokens} over the built-in table'
    )
    p.add_argument(
        "--token", default=None, help="the X-Compactor-Token (default: $CONTEXT_COMPACTOR_TOKEN, else generated)"
    )
    p.add_argument("--no-auth", action="store_true", help="no token (loopback only)")
    p.add_argument("--allow-host", action="append", default=[], help="accept this Host name too (DNS rebinding guard)")
    p.add_argument("--allow-origin", action="append", default=[], help="accept this Origin too (e.g. app://host)")
    p.add_argument("--cors-origin", action="append", default=[], help="send CORS headers to this origin")
    p.add_argument("--max-body", type=int, default=None, metavar="BYTES", help="request body limit (default 32 MiB)")
    p.add_argument("--retention", type=float, default=None, metavar="HOURS", help="delete sessions idle this long")
    p.add_argument("--log-content", action="store_true", help="allow message text in logs (never by default)")
    p.set_defaults(func=run)
    return p


def settings_from_args(args: argparse.Namespace) -> Any:
    from context_compactor.server.settings import DEFAULT_MAX_BODY, ServerSettings, is_loopback

    hosts: tuple[str, ...] = ()
    if args.allow_host:
        base = ("127.0.0.1", "localhost", "[::1]", "::1") if is_loopback(args.host) else (args.host,)
        hosts = (*base, *args.allow_host)
    return ServerSettings(
        host=args.host,
        port=args.port,
        token=args.token,
        no_auth=args.no_auth,
        allowed_hosts=hosts,
        allowed_origins=tuple(args.allow_origin),
        cors_origins=tuple(args.cors_origin),
        max_body_bytes=args.max_body or DEFAULT_MAX_BODY,
        store=args.store,
        upstream_openai=args.upstream_openai,
        upstream_anthropic=args.upstream_anthropic,
        summarizers=ServerSettings.endpoints(args.summarizer_endpoint),
        proxy_summarizer=args.proxy_summarizer,
        models=ServerSettings.load_models(args.models) if args.models else {},
        log_content=args.log_content,
        retention_s=args.retention * 3600 if args.retention is not None else None,
        config={"log_content": True} if args.log_content else {},
    )


def run(args: argparse.Namespace) -> int:
    try:
        from context_compactor.server.run import serve
    except ImportError as e:
        print(
            f"context-compactor serve needs the [server] extra ({e.name} is missing): "
            'pip install "context-compactor[server]"',
            file=sys.stderr,
        )
        return 2
    settings = settings_from_args(args)
    where = f"http://{settings.host}:{settings.port}"
    print(f"context-compactor serving on {where} (page: {where}/, proxy: {where}/v1)", file=sys.stderr)
    if settings.no_auth:
        print("no token (--no-auth): any process on this machine may call it", file=sys.stderr)
    elif not args.token and not os.environ.get("CONTEXT_COMPACTOR_TOKEN"):
        print(f"X-Compactor-Token: {settings.token}", file=sys.stderr)
    sys.stderr.flush()
    serve(settings)
    return 0
