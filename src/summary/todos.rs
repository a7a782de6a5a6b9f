//! The latest plan: the to-do list a to-do tool's calls keep (`TodoWrite`, `update_plan`,
//! `TaskCreate`/`TaskUpdate`) and the checklists the agent writes (`- [ ] item`), for
//! [`super::continuation`] and the rule summary; and the strings a block shows (what a kept
//! tail shows of the plan).

use crate::message::{BlockKind, Message};

/// The texts of a block, one per line.
pub(crate) fn text_of<'b>(b: &'b crate::message::Block<'_>) -> std::borrow::Cow<'b, str> {
    b.joined("\n")
}

/// Every string of `blocks`' text and of their calls' arguments (parsed: a JSON string's escapes
/// undone), white space collapsed, one per line.
pub(crate) fn tail_strings(messages: &[&Message<'_>]) -> String {
    let mut out = String::new();
    for m in messages {
        for b in m.blocks.iter() {
            for s in block_strings(b) {
                out.push_str(&s.split_whitespace().collect::<Vec<_>>().join(" "));
                out.push('\n');
            }
        }
    }
    out
}

/// The strings of a block: a call's argument values (its raw arguments too), else its texts.
fn block_strings(b: &crate::message::Block<'_>) -> Vec<String> {
    let raw = text_of(b);
    let mut out = Vec::new();
    if b.kind == BlockKind::ToolCall {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&raw) {
            fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
                match v {
                    serde_json::Value::String(s) => out.push(s.clone()),
                    serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                    serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
                    _ => {}
                }
            }
            walk(&v, &mut out);
        }
    }
    out.push(raw.into_owned());
    out
}

/// The open items of the checklists in an assistant message (`- [ ] item` or `* [ ] item`
/// lines), white space collapsed: those of its text, and those of the strings of its calls'
/// arguments.
pub(crate) fn checklist(m: &Message<'_>) -> (Vec<String>, Vec<String>) {
    let (mut prose, mut calls) = (Vec::new(), Vec::new());
    for b in m.blocks.iter() {
        let items = if b.kind == BlockKind::Text {
            &mut prose
        } else {
            &mut calls
        };
        if !matches!(b.kind, BlockKind::Text | BlockKind::ToolCall) {
            continue;
        }
        // An item's line holds "[ ]": so does the raw text, unless a JSON escape (`\u005b`)
        // wrote it in a call's arguments. Without either, no item (and no parse).
        let raw = text_of(b);
        let may_hold =
            raw.contains("[ ]") || (b.kind == BlockKind::ToolCall && raw.contains("\\u"));
        if !may_hold {
            continue;
        }
        let strings = block_strings(b);
        // A call's raw arguments come last: their lines are the parsed ones, escaped.
        let n = if b.kind == BlockKind::ToolCall && strings.len() > 1 {
            strings.len() - 1
        } else {
            strings.len()
        };
        for s in &strings[..n] {
            checklist_items(s, items);
        }
    }
    (prose, calls)
}

/// The open items of the checklist lines (`- [ ] item` or `* [ ] item`) of `s`, white space
/// collapsed, added to `items` when new.
pub(crate) fn checklist_items(s: &str, items: &mut Vec<String>) {
    for line in s.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix(['-', '*']) else {
            continue;
        };
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let Some(item) = rest.trim_start().strip_prefix("[ ]") else {
            continue;
        };
        if !item.starts_with(char::is_whitespace) {
            continue;
        }
        let item = item.split_whitespace().collect::<Vec<_>>().join(" ");
        if !item.is_empty() && !items.contains(&item) {
            items.push(item);
        }
    }
}

/// The latest to-do list: a `TodoWrite`/`update_plan` call replaces it, `TaskCreate` adds an
/// item, `TaskUpdate` sets one's status. Items are (text, done).
#[derive(Clone, Debug, Default)]
pub(crate) struct Todos {
    pub(crate) items: Vec<(String, bool)>,
}

impl Todos {
    /// A tool call: a to-do tool's call updates the list (`true`), others are ignored.
    pub(crate) fn call(&mut self, name: &str, args: &str) -> bool {
        if !Self::is_todo_tool(name) {
            return false;
        }
        let n = name.to_ascii_lowercase();
        let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(args)
        else {
            return false;
        };
        let text_of = |v: &serde_json::Map<String, serde_json::Value>| {
            ["content", "step", "subject", "title", "text", "description"]
                .iter()
                .find_map(|k| v.get(*k).and_then(|x| x.as_str()))
                .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|s| !s.is_empty())
        };
        let done = |v: &serde_json::Map<String, serde_json::Value>| {
            v.get("status").and_then(|x| x.as_str()).is_some_and(|s| {
                matches!(
                    s.to_ascii_lowercase().as_str(),
                    "completed" | "complete" | "done" | "cancelled" | "canceled" | "deleted"
                )
            })
        };
        match n.as_str() {
            "taskcreate" => {
                if let Some(t) = text_of(&o) {
                    self.items.push((t, false));
                }
            }
            "taskupdate" => {
                let id = o.get("taskId").or_else(|| o.get("id")).and_then(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .or_else(|| x.as_u64().map(|n| n.to_string()))
                });
                if let Some(k) = id.and_then(|s| s.parse::<usize>().ok()).filter(|&k| k >= 1) {
                    if o.contains_key("status") {
                        if let Some(item) = self.items.get_mut(k - 1) {
                            item.1 = done(&o);
                        }
                    }
                }
            }
            _ => {
                let list = ["todos", "plan", "items"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(|x| x.as_array()));
                if let Some(list) = list {
                    self.items = list
                        .iter()
                        .filter_map(|v| v.as_object())
                        .filter_map(|v| text_of(v).map(|t| (t, done(v))))
                        .collect();
                }
            }
        }
        true
    }

    /// Whether a call of `name` updates the list ([`Todos::call`] reads only these).
    pub(crate) fn is_todo_tool(name: &str) -> bool {
        [
            "todowrite",
            "todo_write",
            "update_plan",
            "write_todos",
            "taskcreate",
            "taskupdate",
        ]
        .iter()
        .any(|t| name.eq_ignore_ascii_case(t))
    }

    /// An earlier summary's open items (done ones were never written).
    pub(crate) fn seed(&mut self, lines: Vec<String>) {
        self.items = lines.into_iter().map(|l| (l, false)).collect();
    }

    pub(crate) fn open(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|(_, d)| !d)
            .map(|(t, _)| t.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Role};

    /// The prefilter skips blocks without "[ ]" but not an item a JSON escape wrote.
    #[test]
    fn checklist_reads_escaped_items_and_skips_the_rest() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Block::text("No list here: [x] done, [] empty."),
                Block::tool_call(
                    Some("a"),
                    "gh",
                    r#"{"body": "- \u005b ] Run the nightly build"}"#,
                ),
                Block::tool_call(Some("b"), "gh", r#"{"body": "- [\u0020] Check by hand"}"#),
                Block::tool_call(Some("c"), "bash", r#"{"command": "ls -la"}"#),
            ],
        );
        let (prose, calls) = checklist(&m);
        assert!(prose.is_empty());
        assert_eq!(calls, ["Run the nightly build", "Check by hand"]);
    }
}
