"""A real ``google-genai`` client loop against a local stub of the Gemini API's ``generateContent``.

The stub (127.0.0.1, a daemon thread) plays a Gemini model: each turn it answers with a thought
summary part and one or two ``functionCall`` parts (no ids, as the Gemini Developer API sends them)
whose first part carries a ``thoughtSignature`` it remembers; requests without tools are summary
requests and get a ``<summary>`` reply. Before answering it checks the history it is handed as the
real API does and answers 400 ``INVALID_ARGUMENT`` otherwise: roles, function responses that answer
exactly the calls of the content right before, function-call turns right after a user turn, and
every signed part byte-identical to what it sent (Gemini 3 rejects a current-turn call whose
signature is missing). :class:`GeminiChat` drives the loop with a small window, so it compacts
several times; the test fails on any 400.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

genai = pytest.importorskip("google.genai", reason="google-genai is not installed (the [gemini] extra)")
from google.genai import errors, types  # noqa: E402

import _gemini  # noqa: E402
from context_compactor import ContextCompactor, validate_messages  # noqa: E402
from context_compactor.integrations.gemini import GeminiChat, compact_contents  # noqa: E402

TASK = (
    "修复 src/billing/tax.py 里失败的测试 (fix the failing test in src/billing/tax.py); see https://example.com/issue/7"
)


class GeminiStub:
    """The stub server; ``requests`` counts calls, ``rejected`` holds every 400 it answered."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.lock = threading.Lock()
        self.issued: dict[bytes, dict[str, Any]] = {}  # signature -> the part it came with
        self.turn = 0
        self.requests = 0
        self.summaries = 0
        self.rejected: list[str] = []
        self.max_contents = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                status, reply = stub.answer(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> GeminiStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the model ----------------------------------------------------------------------------

    def problems(self, contents: list[Any]) -> list[str]:
        found = _gemini.problems(contents)
        for i, c in enumerate(contents):
            for k, p in enumerate(c.get("parts") or ()):
                sig = p.get("thoughtSignature")
                if sig is None:
                    continue
                plain = {key: v for key, v in p.items() if key != "thoughtSignature"}
                raw = base64.b64decode(sig.replace("-", "+").replace("_", "/") + "==")
                if self.issued.get(raw) != plain:
                    found.append(f"contents[{i}].parts[{k}]: thought signature not as issued")
        # The current turn's calls must carry their signatures (Gemini 3).
        last_user_text = max((i for i, c in enumerate(contents) if _gemini.is_user_text(c)), default=-1)
        for i in range(last_user_text + 1, len(contents)):
            ps = contents[i].get("parts") or ()
            calls = [p for p in ps if "functionCall" in p]
            if contents[i].get("role") == "model" and calls and "thoughtSignature" not in calls[0]:
                found.append(f"contents[{i}]: function call of the current turn without its thought signature")
        return found

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests += 1
            if not path.endswith(":generateContent"):
                return 404, {"error": {"code": 404, "message": f"no route {path}", "status": "NOT_FOUND"}}
            contents = body.get("contents") or []
            self.max_contents = max(self.max_contents, len(contents))
            found = self.problems(contents)
            if found:
                self.rejected.append(found[0])
                return 400, {"error": {"code": 400, "message": "; ".join(found[:3]), "status": "INVALID_ARGUMENT"}}
            prompt = len(json.dumps(body)) // 4
            if not body.get("tools"):
                self.summaries += 1
                parts = [{"text": "<summary>The agent read many files of src/billing while fixing the test.</summary>"}]
            elif self.turn >= self.steps:
                parts = [{"text": "The test passes now: the rounding in src/billing/tax.py was fixed."}]
            else:
                self.turn += 1
                n = self.turn
                paths = [f"src/billing/mod_{n}.py"] + ([f"src/billing/extra_{n}.py"] if n % 5 == 0 else [])
                parts = [{"text": f"I should read {paths[0]} next.", "thought": True}]
                for k, p in enumerate(paths):
                    call = {"functionCall": {"name": "read_file", "args": {"path": p}}}
                    if k == 0:
                        raw = hashlib.sha256(f"sig{n}".encode()).digest() * 4
                        self.issued[raw] = dict(call)
                        call["thoughtSignature"] = base64.b64encode(raw).decode()
                    parts.append(call)
            return 200, {
                "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {
                    "promptTokenCount": prompt,
                    "candidatesTokenCount": 20,
                    "totalTokenCount": prompt + 20,
                },
                "modelVersion": "gemini-stub",
            }


@pytest.fixture
def stub() -> Iterator[GeminiStub]:
    with GeminiStub(steps=34) as s:
        yield s


def client_for(stub: GeminiStub) -> Any:
    return genai.Client(api_key="dummy-key", http_options=types.HttpOptions(base_url=stub.url))


def gemini_summarizer(client: Any) -> Any:
    """A summarizer that asks the (stub) model, as a user would with google-genai."""

    def summarize(request: Any) -> str:
        reply = client.models.generate_content(
            model="gemini-stub",
            contents=request.user_prompt,
            config=types.GenerateContentConfig(system_instruction=request.system_prompt),
        )
        return reply.text or ""

    return summarize


CONFIG = types.GenerateContentConfig(
    system_instruction="You are a coding agent. 你是一个编程助手。",
    tools=[
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="read_file",
                    description="Read a file of the repository.",
                    parameters_json_schema={"type": "object", "properties": {"path": {"type": "string"}}},
                )
            ]
        )
    ],
)


def tool_output(path: str, n: int) -> str:
    return f"# {path}\n" + "".join(
        f"def f_{n}_{i}(x):  # 税率 rounding step {i}\n    return round(x, 2)\n" for i in range(40)
    )


def run_loop(chat: GeminiChat, client: Any, stub: GeminiStub) -> int:
    response = chat.send(client, TASK)
    steps = 0
    while response.function_calls:
        parts = [
            types.Part(
                function_response=types.FunctionResponse(
                    name=fc.name, response={"output": tool_output(fc.args["path"], steps)}
                )
            )
            for fc in response.function_calls
        ]
        response = chat.send(client, parts)
        steps += 1
        assert not stub.rejected, stub.rejected
    return steps


def test_the_stub_rejects_what_the_api_rejects(stub: GeminiStub) -> None:
    client = client_for(stub)
    orphan = [
        types.Content(role="user", parts=[types.Part.from_text(text="hi")]),
        types.Content(
            role="user", parts=[types.Part.from_function_response(name="read_file", response={"output": "x"})]
        ),
    ]
    with pytest.raises(errors.ClientError) as e:
        client.models.generate_content(model="gemini-stub", contents=orphan, config=CONFIG)
    assert e.value.code == 400 and "without its call" in str(e.value)
    assert validate_messages(orphan)[0].rule == "orphan_tool_result"
    # What the library makes of it is accepted.
    compactor = ContextCompactor(max_context_tokens=4000)
    fixed = compact_contents(compactor, orphan, config=CONFIG).messages
    stub.rejected.clear()
    client.models.generate_content(model="gemini-stub", contents=fixed, config=CONFIG)
    assert not stub.rejected


def test_an_agent_loop_of_30_steps_compacts_and_stays_valid(stub: GeminiStub) -> None:
    client = client_for(stub)
    compactor = ContextCompactor(
        max_context_tokens=6000, keep_recent_messages=4, summarizer=gemini_summarizer(client), tokenizer="o200k_base"
    )
    chat = GeminiChat(compactor, model="gemini-stub", config=CONFIG)
    steps = run_loop(chat, client, stub)
    assert steps >= 30
    assert stub.rejected == []
    compactions = [r for r in chat.results if r.strategy not in ("none", "micro")]
    assert len(compactions) >= 3, [r.strategy for r in chat.results]
    assert stub.summaries >= 1
    # The contents stay the SDK's own types; the task is still the first user content.
    assert all(isinstance(c, types.Content) for c in chat.contents)
    assert chat.contents[0].parts[0].text == TASK
    assert len(chat.history) > len(chat.contents)
    assert validate_messages(chat.contents, system=CONFIG.system_instruction) == []
    assert chat.state.observations > 0


def test_the_async_loop_with_dict_contents(stub: GeminiStub) -> None:
    stub.steps = 12
    client = client_for(stub)
    compactor = ContextCompactor(max_context_tokens=4000, keep_recent_messages=2)
    chat = GeminiChat(compactor, model="gemini-stub", config=CONFIG)

    async def loop() -> int:
        response = await chat.asend(client, {"role": "user", "parts": [{"text": TASK}]})
        steps = 0
        while response.function_calls:
            parts = [
                {"function_response": {"name": fc.name, "response": {"output": tool_output(fc.args["path"], steps)}}}
                for fc in response.function_calls
            ]
            response = await chat.asend(client, {"role": "user", "parts": parts})
            steps += 1
        return steps

    assert asyncio.run(loop()) == 12
    assert stub.rejected == []
    assert any(r.strategy != "none" for r in chat.results)
    assert isinstance(chat.contents[0], dict) and chat.contents[0]["parts"][0]["text"] == TASK


def test_a_gemini_session_persists_like_the_others(stub: GeminiStub, tmp_path: Any) -> None:
    """GeminiChat(store=...) keeps the conversation in a Session (format "gemini"): the loop runs
    against the stub as in memory (every signed part back byte-identical), compactions are saved,
    and a new chat on the same store and id resumes with the same contents."""
    stub.steps = 12
    client = client_for(stub)
    compactor = ContextCompactor(max_context_tokens=4000, keep_recent_messages=2, summarizer=gemini_summarizer(client))
    chat = GeminiChat(compactor, model="gemini-stub", config=CONFIG, store=tmp_path / "g.db", session_id="g")
    assert run_loop(chat, client, stub) == 12
    assert stub.rejected == []
    assert chat.session is not None and chat.session.format == "gemini"
    saved = chat.session.compactions()
    assert saved and any(r.strategy not in ("none", "micro") for r in chat.results)
    contents, history = chat.contents, chat.history
    assert len(history) > len(contents) and history[0]["parts"][0]["text"] == TASK
    chat.close()
    again = GeminiChat(compactor, model="gemini-stub", config=CONFIG, store=tmp_path / "g.db", session_id="g")
    assert again.contents == contents and again.history == history
    assert [c.id for c in again.session.compactions()] == [c.id for c in saved]  # type: ignore[union-attr]
    assert validate_messages(again.contents, format="gemini", system=CONFIG.system_instruction) == []
    # The resumed chat goes on against the stub (it checks the signatures it issued).
    stub.steps += 2
    again.send(client, "Now run the whole test suite.")
    assert stub.rejected == [] and len(again.history) == len(history) + 2
    again.close()
