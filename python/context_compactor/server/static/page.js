// The summary cards page (seed 003's UI), plain JS: no build step, no CDN, text only via
// textContent (message content is never parsed as HTML). The token is asked for once, kept in
// sessionStorage, and sent in X-Compactor-Token with every call.
"use strict";

const TOKEN_KEY = "context-compactor-token";
const $ = (id) => document.getElementById(id);
let current = null;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function api(method, path, body) {
  const headers = { "x-compactor-token": sessionStorage.getItem(TOKEN_KEY) || "" };
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) {
    const had = sessionStorage.getItem(TOKEN_KEY);
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(had ? "The token was not accepted." : "");
    throw new Error("unauthorized");
  }
  const data = r.status === 204 ? null : await r.json();
  if (!r.ok) throw new Error((data && data.error && data.error.message) || r.statusText);
  return data;
}

// Seed 003's thresholds: orange from 70% of the budget, red from 90%.
function level(ratio) {
  return ratio >= 0.9 ? "critical" : ratio >= 0.7 ? "warning" : "ok";
}

function paint(indicator, check) {
  const ratio = check ? check.usage_ratio : 0;
  indicator.dataset.level = level(ratio);
  indicator.dataset.ratio = String(ratio);
  indicator.querySelector(".bar").style.width = Math.min(100, Math.round(ratio * 100)) + "%";
  indicator.querySelector(".label").textContent = check
    ? `${Math.round(ratio * 100)}% · ${check.current_tokens.toLocaleString()} / ${check.budget.toLocaleString()} tokens`
    : "";
}

function miniIndicator(check) {
  const d = el("div", "indicator");
  d.append(el("div", "bar"), el("span", "label"));
  paint(d, check);
  return d;
}

function text(message) {
  const c = message.content;
  const parts = [];
  if (typeof c === "string") parts.push(c);
  else if (Array.isArray(c)) {
    for (const p of c) {
      if (p.text) parts.push(p.text);
      else if (p.type === "tool_use") parts.push(`→ ${p.name}(${JSON.stringify(p.input)})`);
      else if (p.type === "tool_result") parts.push(typeof p.content === "string" ? p.content : JSON.stringify(p.content));
      else parts.push(`[${p.type}]`);
    }
  }
  for (const call of message.tool_calls || []) parts.push(`→ ${call.function.name}(${call.function.arguments})`);
  if (message.type === "function_call") parts.push(`→ ${message.name}(${message.arguments})`);
  if (message.type === "function_call_output") parts.push(String(message.output));
  return parts.join("\n");
}

function messageItem(message) {
  const role = message.role || message.type || "item";
  const li = el("li", `message ${role}`);
  li.append(el("span", "role", role), document.createTextNode(text(message)));
  return li;
}

function cardItem(item) {
  const li = el("li", "card");
  li.dataset.compactionId = String(item.compaction_id);
  const toggle = el("button", "toggle", `${item.count} earlier messages compressed`);
  toggle.type = "button";
  toggle.setAttribute("aria-expanded", "false");
  const body = el("div", "body");
  body.hidden = true;
  body.append(el("div", "summary", item.summary || ""));
  const originals = el("ol", "originals");
  body.append(originals);
  toggle.addEventListener("click", async () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    body.hidden = !open;
    if (open && !originals.childElementCount) {
      const r = await api("GET", `/v1/sessions/${encodeURIComponent(current)}/compactions/${item.compaction_id}/originals`);
      for (const m of r.messages) originals.append(messageItem(m));
    }
  });
  li.append(toggle, body);
  return li;
}

async function showSession(id) {
  current = id;
  const view = await api("GET", `/v1/sessions/${encodeURIComponent(id)}/view`);
  $("title").textContent = id;
  paint($("indicator"), view.check);
  $("compact").disabled = false;
  const list = $("messages");
  list.replaceChildren(...view.items.map((it) => (it.kind === "card" ? cardItem(it) : messageItem(it.message))));
  for (const li of $("sessions").children) li.classList.toggle("selected", li.dataset.id === id);
}

async function loadSessions() {
  const r = await api("GET", "/v1/sessions");
  const ul = $("sessions");
  ul.replaceChildren(
    ...r.sessions.map((s) => {
      const li = el("li");
      li.dataset.id = s.session_id;
      li.append(el("span", "name", `${s.session_id} (${s.message_count})`), miniIndicator(s.check));
      li.addEventListener("click", () => showSession(s.session_id).catch(report));
      return li;
    }),
  );
  if (current && r.sessions.some((s) => s.session_id === current)) await showSession(current);
}

function report(e) {
  $("status").textContent = e.message;
}

async function compact() {
  if (!current) return;
  $("compact").disabled = true;
  $("status").textContent = "Compacting…";
  try {
    const r = await api("POST", `/v1/sessions/${encodeURIComponent(current)}/prepare`, { force: true });
    $("status").textContent = r.compacted
      ? `Compacted: ${r.result.tokens_before.toLocaleString()} → ${r.result.tokens_after.toLocaleString()} tokens`
      : "Nothing to compact";
    await loadSessions();
  } catch (e) {
    report(e);
  } finally {
    $("compact").disabled = false;
  }
}

function showLogin(message) {
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
}

async function start() {
  $("login").hidden = true;
  $("app").hidden = false;
  await loadSessions();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    start().catch(report);
  });
  $("refresh").addEventListener("click", () => loadSessions().catch(report));
  $("compact").addEventListener("click", compact);
  // The server marks the page data-auth="none" when it runs with --no-auth.
  if (sessionStorage.getItem(TOKEN_KEY) || document.body.dataset.auth === "none") start().catch(report);
  else showLogin("");
});
