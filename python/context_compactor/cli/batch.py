"""``context-compactor batch INPUT_DIR --out OUT_DIR [--workers N]``: compact every transcript of
a folder.

Every ``*.json`` / ``*.jsonl`` file under ``INPUT_DIR`` (recursively, hidden files and folders
skipped, in sorted order) is read with :func:`context_compactor.io.load`, compacted, and written
to ``OUT_DIR`` at the same relative path with the suffix ``.json`` (:func:`context_compactor.io.save`).
One JSONL report line per file goes to stdout (or ``--report FILE``), in input order; a progress
bar goes to stderr. A file that cannot be read, compacted or written is reported with its error
(``"ok": false``, ``"error": {"type", "message"}``) and skipped; the batch never stops for it, and
the exit status is 1 at the end if any file failed.

Design note: the work runs in ``--workers`` worker processes (``spawn``: no fork of a process
holding threads), each building its compactor once. Files are streamed: only their paths are
listed up front, and at most ``4 x workers`` files are in flight at a time (read, compacted and
written inside the worker; only the small report comes back), so memory stays bounded whatever
the folder's size. ``--workers 1`` runs in this process.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TextIO

__all__ = ["add_batch_parser", "add_parser", "cmd_batch", "iter_inputs"]

SUFFIXES = (".json", ".jsonl")


def iter_inputs(root: str) -> Iterator[str]:
    """The transcript files under ``root`` (``*.json``/``*.jsonl``, hidden ones skipped), sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and name.lower().endswith(SUFFIXES):
                yield os.path.join(dirpath, name)


def output_path(root: str, path: str, out_dir: str) -> str:
    """Where the compacted ``path`` goes: the same relative path under ``out_dir``, suffix ``.json``."""
    rel = os.path.relpath(path, root)
    return os.path.join(out_dir, os.path.splitext(rel)[0] + ".json")


# -- the worker ------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(config: Any, summarizer: str | None, force: bool) -> None:
    from context_compactor.compactor import ContextCompactor

    fn: Callable[..., Any] | None = None
    if summarizer:
        from context_compactor.cli.common import import_summarizer

        fn = import_summarizer(summarizer)
    _WORKER["compactor"] = ContextCompactor(config, summarizer=fn)
    _WORKER["force"] = force


def _compact_file(path: str, out: str) -> dict[str, Any]:
    """Read, compact and write one file; the report line (never raises for the file's own errors)."""
    from context_compactor import _core
    from context_compactor.io import load, save

    t0 = time.perf_counter()
    line: dict[str, Any] = {"file": path}
    try:
        transcript = load(path)
        result = _WORKER["compactor"].compact(
            transcript.messages,
            system=transcript.system,
            tools=transcript.tools,
            format=transcript.format,
            force=_WORKER["force"],
        )
        problems = _core.validate_messages(result.messages, format=transcript.format, system=result.system)
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        save(out, result.messages, system=result.system, tools=transcript.tools, format=transcript.format)
        line.update(
            ok=not problems,
            out=out,
            format=transcript.format,
            strategy=result.strategy,
            messages_before=result.original_count,
            messages_after=len(result.messages),
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            over_budget=result.over_budget,
            repairs=len(result.repairs),
            fallback_reason=result.fallback_reason,
            valid=not problems,
        )
        if problems:
            line["error"] = {"type": "InvalidResult", "message": str(problems[0])}
    except Exception as e:  # the file's error, reported; the batch goes on
        line.update(ok=False, error={"type": type(e).__name__, "message": str(e)})
    line["seconds"] = round(time.perf_counter() - t0, 4)
    return line


# -- progress --------------------------------------------------------------------------------------


class Progress:
    """A progress bar on ``stream``: redrawn in place on a terminal (at most 10 times a second),
    else a line at every 10%."""

    def __init__(self, total: int, stream: TextIO, enabled: bool = True) -> None:
        self.total, self.stream, self.enabled = total, stream, enabled
        self.done = self.failed = 0
        self.start = self._last = time.perf_counter()
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        self._step = 0

    def update(self, ok: bool) -> None:
        self.done += 1
        self.failed += not ok
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._tty:
            if now - self._last >= 0.1 or self.done == self.total:
                self._last = now
                self.stream.write("\r" + self.line(now))
                self.stream.flush()
        else:
            step = 10 * self.done // max(self.total, 1)
            if step > self._step or self.done == self.total:
                self._step = step
                self.stream.write(self.line(now) + "\n")
                self.stream.flush()

    def line(self, now: float) -> str:
        width = 30
        filled = width * self.done // max(self.total, 1)
        rate = self.done / max(now - self.start, 1e-9)
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files, "
            f"{self.failed} failed, {rate:.1f} files/s"
        )

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()


# -- the command -----------------------------------------------------------------------------------


def cmd_batch(args: argparse.Namespace) -> int:
    from context_compactor.cli.common import load_config

    root, out_dir = args.input_dir, args.out
    if not os.path.isdir(root):
        raise ValueError(f"batch: {root} is not a folder")
    if args.workers < 1:
        raise ValueError("batch: --workers must be at least 1")
    if os.path.abspath(out_dir) == os.path.abspath(root):
        raise ValueError("batch: --out must not be the input folder (the inputs would be overwritten)")
    config = load_config(args)
    # Only the paths are listed up front (for the progress bar's total); the files are read
    # one at a time by the workers.
    paths = [p for p in iter_inputs(root) if not os.path.abspath(p).startswith(os.path.abspath(out_dir) + os.sep)]
    report: TextIO = open(args.report, "w", encoding="utf-8") if args.report else sys.stdout  # noqa: SIM115
    progress = Progress(len(paths), sys.stderr, enabled=not args.no_progress)
    outputs: set[str] = set()
    failed = 0

    def emit(line: dict[str, Any]) -> None:
        nonlocal failed
        failed += not line["ok"]
        progress.update(line["ok"])
        report.write(json.dumps(line, ensure_ascii=False) + "\n")
        report.flush()

    def jobs() -> Iterator[tuple[str, str | None]]:
        for p in paths:
            out = output_path(root, p, out_dir)
            if out in outputs:  # a.json and a.jsonl: the second would overwrite the first
                yield p, None
            else:
                outputs.add(out)
                yield p, out

    def collided(p: str) -> dict[str, Any]:
        msg = f"its output {output_path(root, p, out_dir)} is already written by another input"
        return {"file": p, "ok": False, "error": {"type": "OutputCollision", "message": msg}, "seconds": 0.0}

    try:
        init = (config, args.summarizer, args.force)
        if args.workers == 1:
            _init_worker(*init)
            for p, out in jobs():
                emit(_compact_file(p, out) if out else collided(p))
        else:
            ctx = multiprocessing.get_context("spawn")
            window: collections.deque[tuple[str, Future[dict[str, Any]] | None]] = collections.deque()
            with ProcessPoolExecutor(args.workers, mp_context=ctx, initializer=_init_worker, initargs=init) as pool:
                for p, out in jobs():
                    window.append((p, pool.submit(_compact_file, p, out) if out else None))
                    if len(window) >= 4 * args.workers:
                        _drain_one(window, emit, collided)
                while window:
                    _drain_one(window, emit, collided)
    finally:
        progress.close()
        if report is not sys.stdout:
            report.close()
    print(
        f"context-compactor batch: {len(paths)} files, {len(paths) - failed} compacted, {failed} failed "
        f"({time.perf_counter() - progress.start:.1f} s)",
        file=sys.stderr,
    )
    return 1 if failed else 0


def _drain_one(
    window: collections.deque[tuple[str, Future[dict[str, Any]] | None]],
    emit: Callable[[dict[str, Any]], None],
    collided: Callable[[str], dict[str, Any]],
) -> None:
    p, fut = window.popleft()
    if fut is None:
        emit(collided(p))
        return
    try:
        emit(fut.result())
    except Exception as e:  # the worker process died (killed, out of memory): report the file
        emit({"file": p, "ok": False, "error": {"type": type(e).__name__, "message": str(e)}, "seconds": 0.0})


def add_batch_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``batch`` subcommand to the CLI's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "batch", help="compact every transcript in a folder (worker processes, JSONL report, progress bar)"
    )
    p.add_argument("input_dir", metavar="INPUT_DIR", help="folder of *.json / *.jsonl transcripts (recursive)")
    p.add_argument("--out", required=True, metavar="OUT_DIR", help="where the compacted files go (same layout)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1: this process)")
    p.add_argument("--max-tokens", type=int, default=None, help="the model's window (max_context_tokens)")
    p.add_argument("--config", default=None, help="a TOML file of CompactionConfig fields (or a preset = ...)")
    p.add_argument("--keep-recent", type=int, default=None, help="keep_recent_messages")
    p.add_argument("--tokenizer", default=None, help="approx (default), o200k_base or cl100k_base")
    p.add_argument(
        "--summarizer", default=None, help="module:function taking a SummaryRequest (default: the rule summary)"
    )
    p.add_argument("--force", action="store_true", help="compact even below the thresholds")
    p.add_argument("--report", default=None, metavar="FILE", help="write the JSONL report here instead of stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=cmd_batch)
    return p


#: The CLI registry's entry point (``context_compactor.cli.COMMANDS``).
add_parser = add_batch_parser
