"""The names the documentation's examples take as given: a reader's own LLM call, messages, a client.

Shared by the Markdown examples (tests/test_docs_examples.py) and the docstring and stub
examples (tests/test_doctests.py). Everything is offline: ``client`` and the SDK clients the
examples build themselves (``OpenAI()``, ``anthropic.Anthropic()``) talk to a local stub of the
OpenAI and Anthropic APIs on 127.0.0.1 (tests/_stub_server.py), through the SDKs' own
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` variables, which :func:`stub_environment` sets.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _native_stub
import _responses_stub
from _stub_server import Reply, StubServer

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "agent_session.json"

SUMMARY = (
    "The user asked to fix the rounding error of the invoice service in /srv/app/billing/tax.py; "
    "the agent read the billing code, changed the rounding to Decimal and ran the tests."
)


def my_llm(messages: Any, max_tokens: int | None = None, **_: Any) -> str:
    """Stands for the reader's model call: returns a short summary, whatever it is asked."""
    return SUMMARY


async def my_async_llm(messages: Any, max_tokens: int | None = None, **_: Any) -> str:
    return SUMMARY


def summarize(request: Any) -> str:
    """A summarizer as the docs write one: ``SummaryRequest -> str``."""
    return my_llm(request.messages, max_tokens=request.max_tokens)


def run_tool(call: Any) -> str:
    """Stands for the reader's tool runner."""
    return "ok"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]


def tool_calling_fake_model() -> Any:
    """An offline LangChain chat model that answers "Done." (LangChain's fakes lack bind_tools)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class FakeToolModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return FakeToolModel(messages=iter([AIMessage("Done.")] * 10))


def namespace() -> dict[str, Any]:
    """A fresh namespace for one page (or one docstring)."""
    from _responses import to_responses
    from context_compactor import ContextCompactor
    from context_compactor.io import load

    transcript = load(EXAMPLE)
    messages = transcript.messages
    corpus = Path(os.environ.get("CORPUS_DIR") or REPO.parent / "shared" / "corpus")
    ns: dict[str, Any] = {
        "__name__": "__docs__",
        "my_llm": my_llm,
        "my_async_llm": my_async_llm,
        "summarize": summarize,
        "run_tool": run_tool,
        "TOOLS": TOOLS,
        "tools": TOOLS,
        "system": None,
        "messages": messages,
        "task": messages[1]["content"],
        "paths": [str(EXAMPLE)],
        "conversations": [messages, messages[:20]],
        "compactor": ContextCompactor(max_context_tokens=3_000, summarizer=summarize),
        "items": to_responses(messages),  # the example as OpenAI Responses items
        # A real Claude Code session of the shared corpus (its agent run has interleaved thinking).
        "claude_code_session": str(corpus / "claude-code" / "cc_f5_98a8c28cfd_2.jsonl"),
        "codex_rollout": str(corpus / "responses" / "codex-session-viewer_example.jsonl"),
    }
    with contextlib.suppress(ImportError):
        import openai

        ns["client"] = openai.OpenAI()
    return ns


class DocsStub(StubServer):
    """The Chat Completions and Messages stub, plus ``POST /v1/responses`` (which rejects what the
    Responses API rejects: tests/_responses_stub.py) and ``/v1/responses/compact``."""

    def _next(self, path: str) -> Reply:
        body = self.requests[-1].body if self.requests else {}
        if path == "/v1/responses/compact":
            return Reply(*_native_stub.openai_compact(body))
        if path == "/v1/responses":
            err = _responses_stub.problem(body)
            if err is not None:
                return Reply(400, {"error": {"message": err, "type": "invalid_request_error", "param": "input"}})
            return Reply(200, RESPONSE)
        return super()._next(path)


RESPONSE = {
    "id": "resp_stub",
    "object": "response",
    "created_at": 0,
    "model": "gpt-stub",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_stub",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done: the test passes.", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


@contextlib.contextmanager
def stub_environment(workdir: Path) -> Iterator[StubServer]:
    """Run the examples in ``workdir`` (holding a copy of examples/) with the SDKs pointed at a stub."""
    shutil.copytree(REPO / "examples", workdir / "examples", dirs_exist_ok=True)
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    with DocsStub() as server:
        os.environ.update(
            {
                "OPENAI_BASE_URL": server.url("/v1"),
                "OPENAI_API_KEY": "sk-docs-stub",
                "ANTHROPIC_BASE_URL": server.url(""),
                "ANTHROPIC_API_KEY": "sk-ant-docs-stub",
                # The Agents SDK would upload traces to the provider: nothing leaves the machine.
                "OPENAI_AGENTS_DISABLE_TRACING": "1",
                # docs/server.md: the token `context-compactor serve` printed.
                "CC_TOKEN": "docs-token",
            }
        )
        with contextlib.suppress(ImportError):
            import agents

            agents.set_tracing_disabled(True)
        os.chdir(workdir)
        try:
            yield server
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
