"""The ``context-compactor`` command line: one module per subcommand.

``stats`` (:mod:`.stats`) prints where a transcript's tokens go; ``compact`` (:mod:`.compact`)
compacts one and reports before/after; ``replay`` (:mod:`.replay`) feeds one into a Session as an
agent would; ``eval`` (:mod:`.eval`) scores what the agent keeps and what it pays. Files are read
with :func:`context_compactor.io.load` (OpenAI JSON, Anthropic JSON, Claude Code session JSONL).

Adding a subcommand is one module with ``add_parser(sub)`` (which calls ``sub.add_parser(...)``
and ``set_defaults(func=run)``) and one line in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from context_compactor import _core
from context_compactor.errors import CompactorError

__all__ = ["COMMANDS", "build_parser", "main"]

#: The subcommands' modules (under ``context_compactor.cli``), in the order ``--help`` lists them.
#: Each has ``add_parser(subparsers)``.
COMMANDS: tuple[str, ...] = (
    "stats",
    "compact",
    "replay",
    "eval",
    "batch",
    "serve",
    "mcp_server",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="context-compactor", description="Inspect and compact LLM-agent transcripts.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_core.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"context_compactor.cli.{name}").add_parser(sub)
    return parser


#: The exit status of a process ended by SIGPIPE (128 + 13), as ``head`` pipelines expect.
EXIT_BROKEN_PIPE = 141


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader went away, and Python flushes stdout again at exit
    (which would print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        # `context-compactor stats FILE | head -1`: the reader has what it wanted. Quiet, like a
        # process ended by SIGPIPE.
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (OSError, CompactorError, ValueError) as e:
        text = str(e)
        path = getattr(e, "path", None)  # a TranscriptError from io.load: say which file
        if isinstance(path, str) and path not in text:
            text = f"{path}: {text}"
        print(f"context-compactor: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
