"""Compaction over a Ray Data dataset, for fleets past one machine (extra ``[ray]``).

``CompactBatch`` is a callable class for :meth:`ray.data.Dataset.map_batches`: each Ray worker
builds it once (with the :class:`~context_compactor.ContextCompactor` you give, pickled to it) and
compacts every batch with :meth:`ContextCompactor.compact_many` (the rayon pool, the GIL released,
a failing row reported in its ``error`` column, never failing the job)::

    import ray
    from context_compactor import ContextCompactor
    from context_compactor.ray_data import CompactBatch

    compactor = ContextCompactor(max_context_tokens=128_000)        # pickled to each worker
    ds = ray.data.from_items([{"path": p} for p in paths])          # or a "conversation" column
    out = ds.map_batches(
        CompactBatch,
        fn_constructor_kwargs={"compactor": compactor},
        batch_size=64,
        concurrency=8,                                              # worker actors
    )
    out.write_json("s3://bucket/compacted/")                        # one row per conversation

Input rows carry either ``path`` (a file :func:`context_compactor.io.load` reads, on the worker's
file system) or ``conversation``: a JSON string or a mapping ``{"messages", "system", "tools",
"format"}`` (or a bare message list). Every other column is passed through (keep an id there).
Output columns: ``messages`` and ``system`` (JSON strings: Arrow stores them whatever the
messages' shapes), ``format``, ``strategy``, ``tokens_before``, ``tokens_after``, ``over_budget``,
``summary``, ``error`` (``"Type: message"`` or ``None``), and with ``include_result=True`` the
:class:`~context_compactor.CompactResult` itself in ``result`` (Ray pickles it).

Nothing here imports ``ray``: the class only needs what ``map_batches`` hands it (a mapping of
column name to a sequence), so ``import context_compactor.ray_data`` works without the extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from context_compactor.compactor import ContextCompactor
from context_compactor.config import CompactionConfig
from context_compactor.errors import MessageTypeError

__all__ = ["CompactBatch"]

COLUMNS = ("path", "conversation")


def _dumps(value: Any) -> str:
    from context_compactor.io import _jsonable

    return json.dumps(value, ensure_ascii=False, default=_jsonable)


class CompactBatch:
    """Compacts the rows of a Ray Data batch (see the module's docstring).

    Args:
        compactor: The compactor (its summarizer must pickle: a module-level function does).
        config: Or a :class:`CompactionConfig` (the built-in rule summary).
        force: Compact even below the thresholds.
        max_concurrency: Summarizer calls at once within a batch.
        include_result: Also return the :class:`CompactResult` objects (column ``result``).
    """

    def __init__(
        self,
        compactor: ContextCompactor | None = None,
        *,
        config: CompactionConfig | None = None,
        force: bool = False,
        max_concurrency: int = 8,
        include_result: bool = False,
    ) -> None:
        if compactor is None:
            compactor = ContextCompactor(config)
        self.compactor = compactor
        self.force = force
        self.max_concurrency = max_concurrency
        self.include_result = include_result

    def _conversation(self, row: dict[str, Any]) -> Any:
        from context_compactor.io import load

        if row.get("path") is not None:
            return load(str(row["path"]))
        c: Any = row.get("conversation")
        if isinstance(c, (str, bytes)):
            c = json.loads(c)
        if hasattr(c, "tolist"):  # a numpy array of messages (Ray's "numpy" batches)
            c = c.tolist()
        if c is None:
            raise MessageTypeError("the row has neither a 'path' nor a 'conversation' column", field="conversation")
        return c

    def __call__(self, batch: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
        names = list(batch.keys())
        n = len(batch[names[0]]) if names else 0
        rows = [{k: batch[k][i] for k in names} for i in range(n)]
        conversations: list[Any] = []
        loaded: list[BaseException | None] = []
        for row in rows:
            try:
                conversations.append(self._conversation(row))
                loaded.append(None)
            except Exception as e:
                conversations.append([])
                loaded.append(e)
        results = self.compactor.compact_many(
            conversations, force=self.force, max_concurrency=self.max_concurrency, return_exceptions=True
        )
        out: dict[str, list[Any]] = {k: [batch[k][i] for i in range(n)] for k in names if k not in COLUMNS}
        for k in ("messages", "system", "format", "strategy", "tokens_before", "tokens_after", "over_budget"):
            out[k] = []
        out["summary"], out["error"] = [], []
        if self.include_result:
            out["result"] = []
        for conv, early, r in zip(conversations, loaded, results, strict=True):
            err = early or (r if isinstance(r, BaseException) else None)
            ok = err is None
            fmt = getattr(conv, "format", None) or (conv.get("format") if isinstance(conv, Mapping) else None)
            out["messages"].append(_dumps(r.messages) if ok else None)
            out["system"].append(_dumps(r.system) if ok and r.system is not None else None)
            out["format"].append(fmt)
            out["strategy"].append(r.strategy if ok else None)
            out["tokens_before"].append(r.tokens_before if ok else None)
            out["tokens_after"].append(r.tokens_after if ok else None)
            out["over_budget"].append(r.over_budget if ok else None)
            out["summary"].append(r.summary if ok else None)
            out["error"].append(None if ok else f"{type(err).__name__}: {err}")
            if self.include_result:
                out["result"].append(r if ok else None)
        return out
