// Seed 003's Electron main process, as a Node 20 script with built-ins only (node:test, fetch):
// it posts the messages to compress with its own message ids, marks the originals `compressed`
// from `summary_of`, stores the summary message with `summaryOf`, and sends the rest; then the
// same through the session routes. Run by tests/test_server_node.py with CC_URL and CC_TOKEN.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

const URL_ = process.env.CC_URL;
const TOKEN = process.env.CC_TOKEN;
const headers = { "content-type": "application/json", "x-compactor-token": TOKEN };

async function call(method, path, body) {
  const r = await fetch(URL_ + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

// The app's own table: rows with ids, `compressed` and `summaryOf` (seed 003 §5).
function conversation(turns) {
  const rows = [{ id: randomUUID(), role: "user", content: "Fix the failing test in /srv/app/billing/tax.py please." }];
  for (let i = 0; i < turns; i++) {
    rows.push({ id: randomUUID(), role: "assistant", content: `Step ${i}: ` + "I looked at the rounding rules again. ".repeat(30) });
    rows.push({ id: randomUUID(), role: "user", content: `Here is file ${i}:\n` + `line ${i}\n`.repeat(150) });
  }
  return rows;
}

test("/v1/compact: summary_of marks the host's rows compressed (seed 003's /api/chat/compress)", async () => {
  const rows = conversation(25);
  const active = rows.filter((m) => !m.compressed);
  const messages = active.map(({ role, content }) => ({ role, content }));
  const check = await call("POST", "/v1/check", { messages, config: { max_context_tokens: 12000 } });
  assert.equal(check.status, 200);
  assert.ok(check.body.usage_ratio >= 0.8, "over the seed's 0.8 trigger");

  const r = await call("POST", "/v1/compact", {
    messages,
    ids: active.map((m) => m.id),
    config: { max_context_tokens: 12000, keep_recent_messages: 6 },
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const { summary, summary_of: summaryOf } = r.body;
  assert.ok(summary && summary.length > 0);
  assert.ok(summaryOf.length > 0 && summaryOf.every((id) => rows.some((m) => m.id === id)));
  assert.ok(!summaryOf.includes(rows[0].id), "the task is kept");

  // First the summary row, then mark the originals (the seed's write order).
  const summaryRow = { id: randomUUID(), role: "user", content: summary, summaryOf };
  rows.push(summaryRow);
  for (const m of rows) if (summaryOf.includes(m.id)) m.compressed = true;
  assert.equal(rows.filter((m) => m.compressed).length, summaryOf.length);

  // What the app sends next: the response's messages, kept rows by their ids.
  assert.equal(r.body.ids.length, r.body.messages.length);
  for (const [i, id] of r.body.ids.entries()) {
    if (id !== null) assert.equal(r.body.messages[i].content, rows.find((m) => m.id === id).content);
  }
  const after = await call("POST", "/v1/check", { messages: r.body.messages, config: { max_context_tokens: 12000 } });
  assert.ok(after.body.usage_ratio < 0.8);
});

test("sessions: create, append, /compact, context, compactions, originals, delete", async () => {
  const id = "electron-" + randomUUID();
  const created = await call("POST", "/v1/sessions", { session_id: id, format: "openai", config: { max_context_tokens: 12000 } });
  assert.equal(created.status, 201);
  const rows = conversation(25).map(({ role, content }) => ({ role, content }));
  const appended = await call("POST", `/v1/sessions/${id}/messages`, { messages: rows });
  assert.equal(appended.body.ids.length, rows.length);

  const prepared = await call("POST", `/v1/sessions/${id}/prepare`, { force: true });
  assert.equal(prepared.status, 200);
  assert.ok(prepared.body.compacted);
  assert.ok(prepared.body.check.usage_ratio < 0.8);

  const context = await call("GET", `/v1/sessions/${id}/context`);
  assert.deepEqual(context.body.ids, prepared.body.result.ids);
  const compactions = await call("GET", `/v1/sessions/${id}/compactions`);
  assert.equal(compactions.body.compactions.length, 1);
  const card = compactions.body.compactions[0];
  const originals = await call("GET", `/v1/sessions/${id}/compactions/${card.id}/originals`);
  assert.ok(originals.body.messages.length >= card.summary_of.length);
  assert.deepEqual(originals.body.messages[0], rows[appended.body.ids.indexOf(Math.min(...card.summary_of, ...card.edited))]);

  assert.equal((await call("DELETE", `/v1/sessions/${id}`)).status, 204);
  assert.equal((await call("GET", `/v1/sessions/${id}/context`)).status, 404);
});

test("without the token: 401", async () => {
  const r = await fetch(URL_ + "/v1/compact", { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
  assert.equal(r.status, 401);
});
