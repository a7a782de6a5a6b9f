"""The LLM summary, opt-in: an OpenAI-compatible endpoint allow-listed at start by name, used by
``/v1/compact`` when a request names it and by the proxy in the background from the soft
threshold (``--proxy-summarizer``); the rule summary at the hard threshold if none is ready."""

from __future__ import annotations

from typing import Any

import pytest

from _messages import conversation
from _server import client, running
from _stub_server import StubServer
from _upstream import WINDOWS, Upstream
from test_server_proxy import Traffic, _close_clients, _openai, openai_loop  # noqa: F401 (the fixture)

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def summarizer() -> Any:
    server = StubServer().start()
    yield server
    server.stop()


def _endpoint(summarizer: Any) -> dict[str, Any]:
    from context_compactor.server.settings import SummarizerEndpoint

    return {"sum": SummarizerEndpoint("sum", summarizer.url("/v1"), "summary-model")}


def test_compact_with_a_named_summarizer(summarizer: Any) -> None:
    with running(summarizers=_endpoint(summarizer)) as server, client(server) as http:
        body = {"messages": conversation(30), "config": {"max_context_tokens": 12_000}, "summarizer": "sum"}
        out = http.post("/v1/compact", json=body).json()
    assert out["summary_source"] == "llm" and "failing test" in out["summary"]
    assert summarizer.requests[-1].body["model"] == "summary-model"


def test_the_proxy_summarises_in_the_background_from_the_soft_threshold(summarizer: Any) -> None:
    with (
        Upstream() as up,
        running(
            upstream_openai=up.url, models=WINDOWS, summarizers=_endpoint(summarizer), proxy_summarizer="sum"
        ) as proxy,
    ):
        traffic = Traffic()
        c = _openai(proxy, traffic)
        # A pause between calls (a model's own time), so the background summary lands between them.
        openai_loop(c, 36, "EPSILON", pause=0.2)
        assert up.problems == []
    assert any(s.startswith("compacted: llm") for s in traffic.status), traffic.status
    assert any("failing test" in seen.raw.decode() for seen in up.requests)
