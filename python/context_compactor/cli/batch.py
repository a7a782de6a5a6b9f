"""``context-compactor batch INPUT_DIR --out OUT_DIR [--workers N]``: compact every transcript of
a folder.

Every ``*.json`` / ``*.jsonl`` file under ``INPUT_DIR`` (recursively, hidden files and folders
skipped, in sorted order) is read with :func:`context_compactor.io.load`, compacted, and written
to ``OUT_DIR`` at the same relative path with the suffix ``.json`` (:func:`context_compactor.io.save`).
One JSONL report line per file goes to stdout (or ``--report FILE``), in input order; a progress
bar goes to stderr. A file that cannot be read, compacted or written is reported with its error
(``"ok": false``, ``"error": {"type", "message"}``) and skipped; the batch never stops for it, and
the exit status is 1 at the end if any file failed.

Design note (where the time goes; figures in ``benches/bench_batch.py``): ``--workers 1`` runs
in this process, with no pool: the honest baseline (so does a folder of one file; no more
workers start than there are files). With ``--workers N`` the worker processes do all of a
file's work: read, compact, validate, write, and the report line's JSON text; the parent only
walks the folder, hands out paths and writes the lines it gets back, so it never competes with
the workers for a core. Paths go out in chunks of up to 16 (one hand-off per chunk instead of
per file, and one write of the report per chunk). At most ``8 x workers`` chunks are in flight
or finished and waiting for a slower one before them (lines are written in input order; with
only 2 per worker, one slow chunk at the head left the other worker idle). The folder is
streamed (walked once to count the files for the progress bar, once to hand them out; a file's
contents only ever live in the worker compacting it), so memory stays bounded whatever the
folder's size. Workers start from a ``forkserver`` that imported the library once (on Linux;
``spawn`` where there is no forkserver): no fork of a process holding threads, and no second
import per worker. A worker that dies (killed, out of memory) breaks the pool and every chunk in
flight with it: a new pool is started and those files are run again one at a time, so the file
that kills a worker again is reported (``WorkerDied``) and the others are compacted; the batch
goes on.

On a machine shared with other sessions, Linux's autogroup scheduling gives the batch's session
one share of the CPU however many workers it runs: ``--workers 2`` then gets little more CPU
time than ``--workers 1`` (docs/batch.md, "Many conversations at once").
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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


def iter_jobs(root: str, out_dir: str) -> Iterator[tuple[str, str | None]]:
    """``(input, output)`` for every input (streamed), ``output`` ``None`` when an earlier input of
    the same folder writes it (``a.json`` and ``a.jsonl``); inputs inside ``out_dir`` skipped.
    Outputs are remembered per folder only (a collision is always inside one folder), so memory
    does not grow with the number of files."""
    inside = os.path.abspath(out_dir) + os.sep
    folder: str | None = None
    outputs: set[str] = set()
    for p in iter_inputs(root):
        if os.path.abspath(p).startswith(inside):
            continue
        if os.path.dirname(p) != folder:
            folder, outputs = os.path.dirname(p), set()
        out = output_path(root, p, out_dir)
        if out in outputs:
            yield p, None
        else:
            outputs.add(out)
            yield p, out


# -- the worker ------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}
#: What a worker process imports before its first file: preloaded once by the forkserver.
_PRELOAD = ["context_compactor.compactor", "context_compactor.io", "context_compactor.cli.batch"]


def _init_worker(config: Any, summarizer: str | None, force: bool) -> None:
    from context_compactor.compactor import ContextCompactor

    fn: Callable[..., Any] | None = None
    if summarizer:
        from context_compactor.cli.common import import_summarizer

        fn = import_summarizer(summarizer)
    _WORKER["compactor"] = ContextCompactor(config, summarizer=fn)
    _WORKER["force"] = force


def _line(report: dict[str, Any]) -> tuple[bool, str]:
    return bool(report["ok"]), json.dumps(report, ensure_ascii=False) + "\n"


def _failed(path: str, kind: str, message: str) -> dict[str, Any]:
    return {"file": path, "ok": False, "error": {"type": kind, "message": message}, "seconds": 0.0}


def _compact_file(path: str, out: str | None) -> tuple[bool, str]:
    """Read, compact and write one file: ``(ok, its JSONL report line)``; never raises for the
    file's own errors. ``out`` ``None``: the output is already written by another input."""
    from context_compactor import _core
    from context_compactor.io import load, save

    if out is None:
        msg = "another input of this folder has the same name up to its suffix and already writes the same output"
        return _line(_failed(path, "OutputCollision", msg))
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
    return _line(line)


def _compact_chunk(jobs: list[tuple[str, str | None]]) -> list[tuple[bool, str]]:
    """A worker's task: a few files, their report lines in order."""
    return [_compact_file(p, out) for p, out in jobs]


def _chunks(jobs: Iterable[tuple[str, str | None]], size: int) -> Iterator[list[tuple[str, str | None]]]:
    chunk: list[tuple[str, str | None]] = []
    for job in jobs:
        chunk.append(job)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


#: Chunks in flight or finished but not yet written, per worker (see ``_run_pool``).
WINDOW = 8


def chunk_size(total: int, workers: int) -> int:
    """Files per task: 1 for small folders (every worker busy, the bar moving), up to 16 for large
    ones (fewer hand-offs), always leaving ~32 tasks a worker so the last ones end together."""
    return max(1, min(16, total // (32 * workers)))


def _context() -> Any:
    """``forkserver`` (preloading the library once) where there is one, else ``spawn``."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


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

    def update(self, done: int, failed: int) -> None:
        self.done += done
        self.failed += failed
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
    # The folder is walked once to count its files (the bar's total), once to hand them out:
    # no list of every file is kept.
    total = sum(1 for _ in iter_jobs(root, out_dir))
    report: TextIO = open(args.report, "w", encoding="utf-8") if args.report else sys.stdout  # noqa: SIM115
    progress = Progress(total, sys.stderr, enabled=not args.no_progress)

    def emit(lines: list[tuple[bool, str]]) -> None:
        report.write("".join(text for _, text in lines))
        report.flush()
        progress.update(len(lines), sum(not ok for ok, _ in lines))

    try:
        init = (config, args.summarizer, args.force)
        workers = min(args.workers, total)  # no idle workers to start for a small folder
        if workers <= 1:
            _init_worker(*init)
            for p, out in iter_jobs(root, out_dir):
                emit([_compact_file(p, out)])
        else:
            _run_pool(iter_jobs(root, out_dir), workers, chunk_size(total, workers), init, emit)
    finally:
        progress.close()
        if report is not sys.stdout:
            report.close()
    print(
        f"context-compactor batch: {progress.done} files, {progress.done - progress.failed} compacted, "
        f"{progress.failed} failed ({time.perf_counter() - progress.start:.1f} s)",
        file=sys.stderr,
    )
    return 1 if progress.failed else 0


_Job = tuple[str, "str | None"]
_Lines = list[tuple[bool, str]]


def _run_pool(
    jobs: Iterable[_Job],
    workers: int,
    size: int,
    init: tuple[Any, ...],
    emit: Callable[[_Lines], None],
) -> None:
    """Hand the jobs to ``workers`` processes in chunks, at most ``WINDOW x workers`` chunks in
    flight or waiting to be written, and emit their lines in input order.

    A worker that dies breaks the whole pool, and every chunk in flight fails with it. Then a new
    pool is started and the files of the failed chunks are run again one at a time, so that a
    file that kills its worker again is the one reported (``WorkerDied``), and the others are
    compacted as usual."""
    ctx = _context()

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=init)

    pool = new_pool()
    window: collections.deque[tuple[list[_Job], Future[_Lines] | None]] = collections.deque()

    def drain_one() -> None:
        nonlocal pool
        chunk, fut = window[0]
        done = _lines_of(fut, chunk) if fut is not None else None
        if done is not None:
            window.popleft()
            emit(done)
            return
        # The pool is broken: wait for it to settle every future, then recover in order.
        pool.shutdown(wait=True)
        pool = new_pool()
        while window:
            chunk, fut = window.popleft()
            done = _lines_of(fut, chunk) if fut is not None else None
            if done is not None:
                emit(done)
                continue
            for job in chunk:
                try:
                    lines = pool.submit(_compact_chunk, [job]).result()
                except BrokenProcessPool:
                    lines = [_line(_failed(job[0], "WorkerDied", "the worker process died compacting this file"))]
                    pool.shutdown(wait=True)
                    pool = new_pool()
                emit(lines)

    try:
        for chunk in _chunks(jobs, size):
            try:
                window.append((chunk, pool.submit(_compact_chunk, chunk)))
            except BrokenProcessPool:  # noticed at submission: recovered when drained
                window.append((chunk, None))
            # Lines are written in input order, but a slow chunk at the head must not starve the
            # workers: finished chunks wait behind it (their lines are small) while new ones go out,
            # up to WINDOW x workers chunks; only then does the parent wait for the head.
            while window and window[0][1] is not None and window[0][1].done():
                drain_one()
            if len(window) >= WINDOW * workers:
                drain_one()
        while window:
            drain_one()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _lines_of(fut: Future[_Lines], chunk: list[_Job]) -> _Lines | None:
    """The chunk's lines (waiting for them), ``None`` when its pool broke. Any other failure of
    the task (the files' own errors are caught inside it) is reported for each of its files."""
    try:
        return fut.result()
    except BrokenProcessPool:
        return None
    except Exception as e:
        return [_line(_failed(p, type(e).__name__, str(e))) for p, _ in chunk]


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
