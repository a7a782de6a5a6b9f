"""The Ray Data path (context_compactor.ray_data) on a real single-node local Ray cluster.

One cluster for this module (``ray.init(num_cpus=2, include_dashboard=False)``, its files in a
pytest temporary folder), shut down after its tests: a cluster kept for the whole session printed
its memory monitor's message into a later test's captured stdout (a CLI test parsing `--json`).
Results must be identical to ``compact_many``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_compactor import ContextCompactor
from context_compactor.io import load
from context_compactor.ray_data import CompactBatch

if sys.version_info >= (3, 14):  # ray 2.60.0 (the pinned version) ships no wheel past CPython 3.13
    pytest.skip("ray 2.60.0 has no wheel for this CPython", allow_module_level=True)
ray = pytest.importorskip("ray", reason="the [ray] extra (ray[data]) is not installed")
pytest.importorskip("ray.data", reason="the [ray] extra (ray[data]) is not installed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    temp = tmp_path_factory.mktemp("ray")
    env = {
        "RAY_USAGE_STATS_ENABLED": "0",  # no call to Ray's usage server
        "RAY_AUTH_MODE": "disabled",  # no token written to ~/.ray: a throwaway cluster on 127.0.0.1
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(temp),
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    try:
        yield ray
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _summarize(request: Any) -> str:
    return "摘要: " + "; ".join(request.must_keep[:5])


# The workers cannot import this test module: ship its functions by value (as for a notebook).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_ray_data_map_batches_equals_compact_many(cluster: Any, corpus_dir: Path) -> None:
    files = []
    for p in sorted(corpus_dir.rglob("*.json*")):
        try:
            load(p)
            files.append(str(p))
        except Exception:
            continue
    c = ContextCompactor(max_context_tokens=8_000, summarizer=_summarize)
    rows = [{"id": i, "path": p} for i, p in enumerate(files)]
    ds = cluster.data.from_items(rows).map_batches(
        CompactBatch,
        fn_constructor_kwargs={"compactor": c, "include_result": True},
        batch_size=8,
        concurrency=2,
    )
    out = sorted(ds.take_all(), key=lambda r: r["id"])
    expected = c.compact_many([load(p) for p in files])
    assert [r["id"] for r in out] == list(range(len(files)))
    for row, want in zip(out, expected, strict=True):
        assert row["error"] is None
        assert row["result"] == want  # the CompactResult, pickled back from the worker
        assert json.loads(row["messages"]) == json.loads(json.dumps(want.messages, ensure_ascii=False))
        assert (row["strategy"], row["tokens_after"], row["summary"]) == (
            want.strategy,
            want.tokens_after,
            want.summary,
        )
    assert any(r["summary"] and "摘要" in r["summary"] for r in out)


def test_ray_rows_with_bad_conversations_are_reported_not_fatal(cluster: Any, corpus_dir: Path) -> None:
    good = json.loads(next((corpus_dir / "openai").glob("*.json")).read_text("utf-8"))
    rows = [
        {"id": 0, "conversation": json.dumps({"messages": good, "format": "openai"})},
        {"id": 1, "conversation": "{not json"},
        {"id": 2, "conversation": json.dumps([{"role": 5, "content": "x"}])},
    ]
    c = ContextCompactor(max_context_tokens=8_000)
    out = sorted(
        cluster.data.from_items(rows).map_batches(CompactBatch, fn_constructor_kwargs={"compactor": c}).take_all(),
        key=lambda r: r["id"],
    )
    assert out[0]["error"] is None
    assert json.loads(out[0]["messages"]) == c.compact(good).messages
    assert out[1]["error"].startswith("JSONDecodeError")
    assert out[2]["error"].startswith("MessageTypeError") and out[2]["messages"] is None
