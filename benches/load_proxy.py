"""`make load-proxy`: the compacting proxy under N concurrent conversations for S seconds, on loopback.

Three processes: an upstream stub (asyncio, answers like Chat Completions, checks each request
against its model's window with the library's counter), the proxy (``context-compactor serve``)
and this client (asyncio + httpx2): N conversations, each an agent loop that resends its whole
history plus a tool result of ~650 tokens per call; each starts between the target and the soft
threshold, so it is compacted within its first calls and every few calls after, reusing its
compacted prefix in between. Reports:

- errors (non-200 answers or failed calls) and requests over the window (the stub's count);
- the proxy's RSS at 10 s and at the end (``--check`` fails when it grew by more than 50 MB);
- after the load, on a quiet machine: the latency a pass-through request adds against calling the
  stub directly (p50, p99 of 300 alternating pairs), and that of a compacted one (100 pairs).

``--check`` exits 1 on any error or request over the window. ``make load-proxy-smoke`` (CI) is a
5-second run with 50 conversations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WINDOW = 16_000
MAX_TOKENS = 500
TOKEN = "load-test-token"


# -- the upstream stub (its own process) ---------------------------------------------------------------


async def _stub(port_file: str) -> None:
    from context_compactor import TokenCounter

    counter = TokenCounter("approx")
    stats = {"requests": 0, "over_window": 0}
    reply = json.dumps(
        {
            "id": "chatcmpl-load",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-test",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "Next step."}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                if path == "/stats":
                    out = json.dumps(stats).encode()
                else:
                    stats["requests"] += 1
                    req = json.loads(body)
                    tokens = counter.count_messages(req["messages"], format="openai")
                    if tokens > WINDOW - req.get("max_tokens", 0):
                        stats["over_window"] += 1
                    out = reply
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(out)).encode()
                    + b"\r\n\r\n"
                    + out
                )
                await writer.drain()
                del method
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()


# -- the client ------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _tool_output(conv: int, i: int) -> str:
    return "".join(f"conv {conv} step {i} line {j}: total = {conv * i + j}\n" for j in range(60))


async def _conversation(client: Any, conv: int, deadline: float, out: dict[str, Any]) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Task {conv}: fix the failing test in /srv/app/mod{conv}.py."},
    ]
    # Each starts part-way between the compaction's target and the soft threshold (12-18 tool
    # results of ~650 tokens), so the proxy's working set is steady from the first seconds and the
    # RSS at 10 s and at the end compare like with like.
    for i in range(12 + conv % 7):
        messages.append({"role": "assistant", "content": f"Reading part {i}."})
        messages.append({"role": "user", "content": _tool_output(conv, i)})
    headers = {"Authorization": f"Bearer sk-load-{conv}", "X-Compactor-Token": TOKEN}
    i = 100
    while time.monotonic() < deadline:
        body = {"model": "gpt-test", "messages": messages, "max_tokens": MAX_TOKENS}
        t0 = time.perf_counter()
        try:
            r = await client.post("/v1/chat/completions", json=body, headers=headers)
            ok = r.status_code == 200
            what = r.headers.get("x-compactor", "")
        except Exception as e:  # counted, reported
            ok, what = False, f"exception {type(e).__name__}"
        out["latency"].setdefault(what.split(";")[0], []).append(time.perf_counter() - t0)
        out["calls"] += 1
        if not ok:
            out["errors"] += 1
            out["error_kinds"][what] = out["error_kinds"].get(what, 0) + 1
            await asyncio.sleep(0.1)
            continue
        messages.append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})
        messages.append({"role": "user", "content": _tool_output(conv, i)})
        i += 1


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


async def _pairs(proxy: str, stub: str, n: int, compacted: bool) -> tuple[list[float], list[float]]:
    import httpx2

    small = [{"role": "user", "content": "hello " * 50}]
    big = [{"role": "user", "content": "Fix /srv/app/x.py."}]
    for i in range(40):
        big += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": _tool_output(0, i)}]
    direct, proxied = [], []
    async with httpx2.AsyncClient(trust_env=False, timeout=60) as client:
        for k in range(n):
            body = {"model": "gpt-test", "messages": big if compacted else small, "max_tokens": MAX_TOKENS}
            # A new credential each time: a compacted request is computed afresh, never reused.
            headers = {"Authorization": f"Bearer sk-latency-{k}", "X-Compactor-Token": TOKEN}
            for url, into in ((stub, direct), (proxy, proxied)):
                t0 = time.perf_counter()
                r = await client.post(url + "/v1/chat/completions", json=body, headers=headers)
                into.append(time.perf_counter() - t0)
                r.raise_for_status()
            if compacted:
                assert r.headers["x-compactor"] == "compacted: rule", r.headers["x-compactor"]
    return direct, proxied


async def _load(args: argparse.Namespace, proxy: str, stub: str, pid: int) -> dict[str, Any]:
    import httpx2

    out: dict[str, Any] = {"calls": 0, "errors": 0, "error_kinds": {}, "latency": {}}
    limits = httpx2.Limits(max_connections=args.conversations + 10, max_keepalive_connections=args.conversations + 10)
    start = time.monotonic()
    deadline = start + args.seconds
    early = min(10.0, args.seconds / 2)
    async with httpx2.AsyncClient(base_url=proxy, trust_env=False, timeout=120, limits=limits) as client:
        tasks = [asyncio.create_task(_conversation(client, c, deadline, out)) for c in range(args.conversations)]
        await asyncio.sleep(early)
        out["rss_early"] = (early, _rss_mb(pid))
        await asyncio.gather(*tasks)
        out["rss_end"] = (time.monotonic() - start, _rss_mb(pid))
        out["proxy_stats"] = (await client.get("/v1/compactor/stats", headers={"X-Compactor-Token": TOKEN})).json()
        out["stub_stats"] = (await client.get(stub + "/stats")).json()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conversations", type=int, default=200)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--pairs", type=int, default=300)
    p.add_argument("--check", action="store_true")
    p.add_argument("--stub", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stub:
        asyncio.run(_stub(args.stub))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        stub_proc = subprocess.Popen([sys.executable, __file__, "--stub", str(port_file)])
        while not port_file.exists() or not port_file.read_text():
            time.sleep(0.05)
        stub = f"http://127.0.0.1:{port_file.read_text()}"
        models = Path(tmp) / "models.json"
        models.write_text(json.dumps({"gpt-test": WINDOW}))
        port = _free_port()
        proxy = f"http://127.0.0.1:{port}"
        env = {**os.environ, "CONTEXT_COMPACTOR_TOKEN": TOKEN}
        cmd = [sys.executable, "-m", "context_compactor.cli", "serve", "--port", str(port)]
        cmd += ["--upstream-openai", stub, "--models", str(models)]
        proxy_proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        try:
            for _ in range(400):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            out = asyncio.run(_load(args, proxy, stub, proxy_proc.pid))
            pairs = max(20, args.pairs if args.seconds >= 30 else args.pairs // 10)
            direct, proxied = asyncio.run(_pairs(proxy, stub, pairs, compacted=False))
            cdirect, cproxied = asyncio.run(_pairs(proxy, stub, max(10, pairs // 3), compacted=True))
        finally:
            proxy_proc.send_signal(signal.SIGINT)
            stub_proc.terminate()
            proxy_proc.wait(10)
            stub_proc.wait(10)
    lat = {k: (round(_pct(v, 0.5), 1), round(_pct(v, 0.99), 1), len(v)) for k, v in out["latency"].items()}
    (t1, rss1), (t2, rss2) = out["rss_early"], out["rss_end"]
    print(
        f"{args.conversations} conversations for {args.seconds:g} s: {out['calls']} calls, {out['errors']} errors "
        f"{out['error_kinds'] or ''}, {out['stub_stats']['over_window']} over the window"
    )
    print(f"proxy: {out['proxy_stats']}")
    print(f"latency under load (p50 ms, p99 ms, n) by X-Compactor: {lat}")
    print(f"RSS: {rss1:.1f} MB at {t1:.0f} s, {rss2:.1f} MB at {t2:.0f} s ({rss2 - rss1:+.1f} MB)")
    added = (_pct(proxied, 0.5) - _pct(direct, 0.5), _pct(proxied, 0.99) - _pct(direct, 0.99))
    print(
        f"added latency, pass-through ({len(direct)} pairs, after the load): p50 {added[0]:.2f} ms, "
        f"p99 {added[1]:.2f} ms (direct p50 {_pct(direct, 0.5):.2f} ms)"
    )
    cadded = (_pct(cproxied, 0.5) - _pct(cdirect, 0.5), _pct(cproxied, 0.99) - _pct(cdirect, 0.99))
    size = len(json.dumps(_tool_output(0, 0))) * 40 // 1024
    print(
        f"added latency, compacted ({len(cdirect)} pairs, ~{size} KB requests): "
        f"p50 {cadded[0]:.2f} ms, p99 {cadded[1]:.2f} ms"
    )
    failed = out["errors"] or out["stub_stats"]["over_window"]
    if args.seconds >= 60 and rss2 - rss1 > 50:
        print("RSS grew by more than 50 MB")
        failed = True
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
