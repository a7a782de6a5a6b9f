"""What several subcommands share: the window and config options, reading a TOML config, and
importing a ``--summarizer module:function`` or building a ``--summarizer-url`` client."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from context_compactor import _core
from context_compactor.config import CompactionConfig
from context_compactor.errors import ConfigError

__all__ = [
    "add_config_args",
    "add_format_arg",
    "add_summarizer_args",
    "import_summarizer",
    "load_config",
    "read_toml",
    "summarizer_from_args",
]

FILE_HELP = (
    "OpenAI JSON, Anthropic JSON, a Claude Code session JSONL, a Codex rollout JSONL, "
    "or a Responses or Gemini request JSON"
)


def add_config_args(p: argparse.ArgumentParser) -> None:
    """``--max-tokens``, ``--config``, ``--format``, ``--keep-recent``, ``--tokenizer``."""
    p.add_argument("--max-tokens", type=int, default=None, help="the model's window (max_context_tokens)")
    p.add_argument("--config", default=None, help="a TOML file of CompactionConfig fields (or a preset = ...)")
    add_format_arg(p)
    p.add_argument("--keep-recent", type=int, default=None, help="keep_recent_messages")
    p.add_argument("--tokenizer", default=None, help="approx (default), o200k_base or cl100k_base")


def add_format_arg(p: argparse.ArgumentParser) -> None:
    """``--format``: the formats a file loads as (see :func:`context_compactor.io.load`)."""
    p.add_argument(
        "--format",
        choices=_core.FORMATS,
        default=None,
        help="force the message format",
    )


def add_summarizer_args(p: argparse.ArgumentParser, *, url: bool = True) -> None:
    """``--summarizer module:function`` and, with ``url``, ``--summarizer-url``/``--model``/``--api-key-env``."""
    p.add_argument(
        "--summarizer", default=None, help="module:function taking a SummaryRequest (default: the rule summary)"
    )
    if url:
        p.add_argument("--summarizer-url", default=None, help="an OpenAI-compatible server's base URL (…/v1)")
        p.add_argument("--model", default=None, help="the model to summarise with (with --summarizer-url)")
        p.add_argument(
            "--api-key-env", default=None, metavar="VAR", help="environment variable holding the server's API key"
        )


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file's table (its ``[context_compactor]`` table when it has one)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ConfigError("config: reading TOML needs Python 3.11+ or the tomli package", "config") from None
    name = os.fspath(path)
    with open(name, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:  # its message names a line and column, not the file
            raise ConfigError(f"config: {name} is not valid TOML: {e}", "config") from e
    table = data.get("context_compactor", data)
    if not isinstance(table, dict):
        raise ConfigError(f"config: {name}: [context_compactor] must be a table", "config")
    return dict(table)


def load_config(args: argparse.Namespace, *, max_tokens: int | None = None) -> CompactionConfig:
    """The :class:`CompactionConfig` of ``--config`` with the command-line options over it
    (``max_tokens`` wins over ``--max-tokens`` when given)."""
    data: dict[str, Any] = read_toml(args.config) if getattr(args, "config", None) else {}
    window = max_tokens if max_tokens is not None else getattr(args, "max_tokens", None)
    if window is not None:
        # No reserve given: the library's own rule (min(8000, window // 4)) or the preset's.
        data["max_context_tokens"] = window
    if getattr(args, "keep_recent", None) is not None:
        data["keep_recent_messages"] = args.keep_recent
    if getattr(args, "tokenizer", None) is not None:
        data["tokenizer"] = args.tokenizer
    return CompactionConfig.from_dict(data)


def import_summarizer(spec: str) -> Callable[..., Any]:
    """The callable named by ``module:function`` (the current directory is importable)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ConfigError(f"summarizer: expected module:function, got {spec!r}", "summarizer")
    sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        # One line like every other CLI error: the module itself, or one it imports, is missing.
        raise ConfigError(f"summarizer: cannot import {module!r}: {e}", "summarizer") from e
    finally:
        sys.path.pop(0)
    if not hasattr(mod, name):
        raise ConfigError(f"summarizer: module {module!r} has no {name!r}", "summarizer")
    fn = getattr(mod, name)
    if not callable(fn):
        raise ConfigError(f"summarizer: {spec} is not callable", "summarizer")
    return fn  # type: ignore[no-any-return]


def summarizer_from_args(args: argparse.Namespace) -> Callable[..., Any] | None:
    """The summarizer the options name (``None``: the built-in rule summary)."""
    url = getattr(args, "summarizer_url", None)
    if url and args.summarizer:
        raise ValueError("give either --summarizer or --summarizer-url, not both")
    if url:
        if not args.model:
            raise ValueError("--summarizer-url needs --model")
        from context_compactor.summarizers import openai_compatible

        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        if args.api_key_env and not key:
            raise ValueError(f"--api-key-env: the environment variable {args.api_key_env} is not set")
        return openai_compatible(url, args.model, api_key=key)
    if args.summarizer:
        return import_summarizer(args.summarizer)
    return None


def summarizer_label(args: argparse.Namespace) -> str:
    """How the report names the summarizer."""
    url = getattr(args, "summarizer_url", None)
    return f"{args.model} at {url}" if url else args.summarizer or "rule summary"
