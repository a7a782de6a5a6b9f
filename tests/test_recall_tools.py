"""The recall tool in each wire format and framework: the definition is accepted by the real SDK
or framework, and an agent loop through it (a local stub provider or the framework's own
scripted model) calls the tool and gets the original text back."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from _stub_server import ANTHROPIC_PATH, OPENAI_PATH, Reply, StubServer, anthropic_ok, openai_ok
from context_compactor import ContextCompactor
from context_compactor.recall import Recall, definition, recall_ids

MCP_NAME = "mcp__context-compactor__recall"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recall, str, str]:
    """A compaction that cleared tool output into ``offload_dir``: the handler, an id, its text."""
    d = tmp_path_factory.mktemp("offload")
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Find the error in the build log."}]
    for i in range(12):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "make"}'}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        log = "".join(f"[{i}:{k}] compiling unit_{k}.c 编译\n" for k in range(200))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": log + f"error: E{i} in unit_{i}.c\n"})
    cc = ContextCompactor(max_context_tokens=30_000, recall=True, offload_dir=str(d))
    result = cc.micro_compact(msgs)
    id = recall_ids(json.dumps(result.messages, ensure_ascii=False).replace('\\"', '"'))[0]
    recall = Recall(d, config=cc.config)
    text = recall.lookup(id)
    assert text is not None
    return recall, id, text


def first_page(recall: Recall, id: str, text: str) -> str:
    page = recall(id)
    assert text.startswith(recall.page_text(page)) and len(recall.page_text(page)) > 100
    return page


# -- wire formats: the SDKs' own types and clients against a local stub --------------------------------------


def test_openai_chat_completions(stored: tuple[Recall, str, str]) -> None:
    openai = pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionToolParam

    recall, id, text = stored
    tool = definition("openai")
    TypeAdapter(ChatCompletionToolParam).validate_python(tool)
    call = {"id": "call_1", "type": "function", "function": {"name": "recall", "arguments": json.dumps({"id": id})}}
    with StubServer() as server:
        first = openai_ok(content=None, finish_reason="tool_calls")
        first.body["choices"][0]["message"]["tool_calls"] = [call]
        server.enqueue(OPENAI_PATH, first)
        server.enqueue(OPENAI_PATH, openai_ok("E3 is in unit_3.c"))
        client = openai.OpenAI(base_url=server.url("/v1"), api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "What was the error?"}]
        while True:
            reply = client.chat.completions.create(model="gpt-test", messages=messages, tools=[tool])
            msg = reply.choices[0].message
            if not msg.tool_calls:
                break
            messages.append(msg.model_dump(exclude_none=True))
            for c in msg.tool_calls:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": c.id,
                        "content": recall.call(c.function.name, c.function.arguments),
                    }
                )
        sent = server.requests[-1].body
    assert sent["tools"] == [tool]
    assert sent["messages"][-1]["content"] == first_page(recall, id, text)


def test_anthropic_messages_with_an_mcp_prefixed_name(stored: tuple[Recall, str, str]) -> None:
    anthropic = pytest.importorskip("anthropic")
    from anthropic.types import ToolParam

    recall, id, text = stored
    tool = definition("anthropic", name=MCP_NAME)
    TypeAdapter(ToolParam).validate_python(tool)
    use = {"type": "tool_use", "id": "toolu_1", "name": MCP_NAME, "input": {"id": id, "pattern": "error:"}}
    with StubServer() as server:
        server.enqueue(ANTHROPIC_PATH, anthropic_ok(blocks=[use], stop_reason="tool_use"))
        server.enqueue(ANTHROPIC_PATH, anthropic_ok("Found it."))
        client = anthropic.Anthropic(base_url=server.url(), api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "What was the error?"}]
        while True:
            reply = client.messages.create(model="claude-test", max_tokens=100, messages=messages, tools=[tool])
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                break
            messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": recall.call(b.name, b.input)} for b in uses
            ]
            messages.append({"role": "user", "content": results})
        sent = server.requests[-1].body
    assert sent["tools"] == [tool]
    got = sent["messages"][-1]["content"][0]["content"]
    error_line = next(line for line in text.splitlines() if line.startswith("error:"))
    assert "1 lines match" in got and error_line in got


def test_openai_responses(stored: tuple[Recall, str, str]) -> None:
    openai = pytest.importorskip("openai")
    from openai.types.responses import FunctionToolParam

    recall, id, text = stored
    tool = definition("responses")
    TypeAdapter(FunctionToolParam).validate_python(tool)

    def response(output: list[Any]) -> Reply:
        body = {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-test",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
        }
        return Reply(200, body)

    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "recall",
        "arguments": json.dumps({"id": id}),
    }
    msg = {
        "type": "message",
        "id": "m1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "done", "annotations": []}],
    }
    with StubServer() as server:
        server.enqueue("/v1/responses", response([fc]))
        server.enqueue("/v1/responses", response([msg]))
        client = openai.OpenAI(base_url=server.url("/v1"), api_key="test", max_retries=0)
        items: list[Any] = [{"role": "user", "content": "What was the error?"}]
        while True:
            reply = client.responses.create(model="gpt-test", input=items, tools=[tool])
            calls = [o for o in reply.output if o.type == "function_call"]
            if not calls:
                break
            items += [o.model_dump(exclude_none=True) for o in reply.output]
            items += [
                {"type": "function_call_output", "call_id": c.call_id, "output": recall.call(c.name, c.arguments)}
                for c in calls
            ]
        sent = server.requests[-1].body
    assert sent["tools"] == [tool]
    assert sent["input"][-1]["output"] == first_page(recall, id, text)


def test_gemini_function_declaration(stored: tuple[Recall, str, str]) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    recall, id, text = stored
    decl = types.FunctionDeclaration.model_validate(definition("gemini"))
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[decl])])

    def reply(part: dict[str, Any]) -> Reply:
        return Reply(200, {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]})

    path = "/v1beta/models/gemini-stub:generateContent"
    alt = "/v1/models/gemini-stub:generateContent"
    with StubServer() as server:
        for p in (path, alt):  # the path's API version differs between google-genai releases
            server.enqueue(p, reply({"functionCall": {"name": "recall", "args": {"id": id}}}))
            server.enqueue(p, reply({"text": "done"}))
        client = genai.Client(api_key="dummy-key", http_options=types.HttpOptions(base_url=server.url()))
        contents: list[Any] = [types.Content(role="user", parts=[types.Part(text="What was the error?")])]
        while True:
            r = client.models.generate_content(model="gemini-stub", contents=contents, config=config)
            calls = r.function_calls or []
            if not calls:
                break
            contents.append(r.candidates[0].content)
            parts = [
                types.Part.from_function_response(name=c.name, response={"result": recall.call(c.name, c.args)})
                for c in calls
            ]
            contents.append(types.Content(role="user", parts=parts))
        sent = server.requests[-1].body
    assert sent["tools"][0]["functionDeclarations"][0]["name"] == "recall"
    got = sent["contents"][-1]["parts"][0]["functionResponse"]["response"]["result"]
    assert got == first_page(recall, id, text)


# -- frameworks: their own agent loops with scripted models ----------------------------------------------------


def test_langchain_agent(stored: tuple[Recall, str, str]) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from context_compactor.integrations.langchain import recall_tool

    recall, id, text = stored

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            if any(isinstance(m, ToolMessage) for m in messages):
                return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
            call = {"name": "recall", "args": {"id": id}, "id": "call_1"}
            return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])

    agent = create_agent(Scripted(), [recall_tool(recall)])
    out = agent.invoke({"messages": [{"role": "user", "content": "What was the error?"}]})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert results[0].content == first_page(recall, id, text)


def test_pydantic_ai_agent(stored: tuple[Recall, str, str]) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from context_compactor.integrations.pydantic_ai import recall_tool

    recall, id, text = stored

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        assert [t.name for t in info.function_tools] == ["recall"]
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("recall", {"id": id}, tool_call_id="c1")])

    agent = Agent(FunctionModel(model), tools=[recall_tool(recall)])
    run = agent.run_sync("What was the error?")
    returns = [p for m in run.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[0].content == first_page(recall, id, text)


def test_agents_sdk_agent(stored: tuple[Recall, str, str]) -> None:
    agents = pytest.importorskip("agents")
    from agents import Agent, Runner
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from context_compactor.integrations.agents import recall_tool

    agents.set_tracing_disabled(True)
    recall, id, text = stored
    model = ScriptedModel(
        [
            ModelStep.respond(lambda call: [function_call("recall", {"id": id}, call_id="call_1")]),
            ModelStep.respond(lambda call: [assistant_message("done")]),
        ]
    )
    agent = Agent(name="a", model=model, tools=[recall_tool(recall)])
    result = asyncio.run(Runner.run(agent, "What was the error?"))
    outputs = [i for i in result.to_input_list() if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert outputs[0]["output"] == first_page(recall, id, text)


def test_definition_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    assert json.dumps(definition("openai")) == json.dumps(Recall(tmp_path).definition("openai"))
