//! Superseded reads: the output of a call that read a file is stale once a later call reads the
//! whole file again or changes it; micro-compaction may then replace it with a placeholder that
//! names the later message (`supersede_reads`).
//!
//! Design note: only reads and writes the call's arguments name without doubt count — a JSON
//! `path`/`file_path`/… argument of a read tool (`Read`, `read_file`, `view`, the `view` command
//! of `str_replace_editor`) or of an edit tool, or a plain `cat FILE` shell command. A read of a
//! range (`offset`, `limit`, `view_range`, …) is superseded only by a later change of the file,
//! never by another read (the two may show different parts). Frozen slots (head, recent tail,
//! pending loop) and protected tools are left to the caller, which skips them.

use super::draft::Slot;
use crate::message::BlockKind;
use crate::summary::tools::{is_edit_tool, is_shell_tool, is_view_only, shell_command, PATH_KEYS};
use rustc_hash::FxHashMap;

const RANGE_KEYS: &[&str] = &[
    "offset",
    "limit",
    "view_range",
    "start_line",
    "end_line",
    "line_start",
    "line_end",
    "lines",
    "range",
    "start",
    "end",
    "pages",
];

/// What one call did to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read the file; `whole` when no range was asked for.
    Read { path: String, whole: bool },
    /// Created, edited or rewrote it.
    Write { path: String },
}

fn clean(p: &str) -> Option<String> {
    let p = p.trim();
    let p = p.strip_prefix("./").unwrap_or(p);
    (!p.is_empty() && p.len() < 1024 && !p.contains('\n')).then(|| p.to_owned())
}

fn is_read_tool(lower: &str) -> bool {
    ["read", "view", "open", "cat", "show_file", "get_file"]
        .iter()
        .any(|k| lower.contains(k))
}

/// The file access of one call (its tool name and raw arguments), when it is certain.
pub fn access(name: &str, args: &str) -> Option<Access> {
    let lower = name.to_ascii_lowercase();
    if is_shell_tool(&lower) {
        let cmd = shell_command(args)?;
        let words: Vec<&str> = cmd.split_whitespace().collect();
        return match words.as_slice() {
            ["cat", f]
                if !f.starts_with('-') && !f.contains(|c: char| "|&;<>*?$`(){}".contains(c)) =>
            {
                Some(Access::Read {
                    path: clean(f.trim_matches(|c| c == '\'' || c == '"'))?,
                    whole: true,
                })
            }
            _ => None,
        };
    }
    let serde_json::Value::Object(o) = serde_json::from_str::<serde_json::Value>(args).ok()? else {
        return None;
    };
    let path = clean(PATH_KEYS.iter().find_map(|k| o.get(*k)?.as_str())?)?;
    if is_view_only(args) || (is_read_tool(&lower) && !is_edit_tool(&lower)) {
        let whole = !RANGE_KEYS
            .iter()
            .any(|k| o.get(*k).is_some_and(|v| !v.is_null()));
        Some(Access::Read { path, whole })
    } else if is_edit_tool(&lower) {
        Some(Access::Write { path })
    } else {
        None
    }
}

/// A result whose read is superseded: the later message and the words for the placeholder.
pub struct Superseded {
    pub path: String,
    /// Index (in the input) of the message holding the later call.
    pub later: usize,
    pub rewritten: bool,
}

impl Superseded {
    /// The placeholder of the cleared output.
    pub fn placeholder(&self, name: &str) -> String {
        let how = if self.rewritten {
            "changed"
        } else {
            "read again"
        };
        format!(
            "{} output of {name} superseded: {} was {how} in message {}]",
            crate::cut::PLACEHOLDER_PREFIX,
            self.path,
            self.later
        )
    }
}

/// Results (slot, block) of reads that a later call supersedes.
pub fn superseded(slots: &[Slot<'_>]) -> FxHashMap<(usize, usize), Superseded> {
    // Every call in order: its id, the slot and its access.
    let mut calls: Vec<(&str, usize, Access)> = Vec::new();
    for (si, s) in slots.iter().enumerate() {
        for b in s.view.calls() {
            let (Some(id), Some(name)) = (&b.id, &b.name) else {
                continue;
            };
            let args: String = b.texts.iter().map(|p| p.text().to_utf8()).collect();
            if let Some(a) = access(name, &args) {
                calls.push((id.as_str(), si, a));
            }
        }
    }
    // For each read, the first later call of the same file that supersedes it.
    let mut by_id: FxHashMap<&str, (String, usize, bool)> = FxHashMap::default();
    for (i, (id, _, a)) in calls.iter().enumerate() {
        let Access::Read { path, .. } = a else {
            continue;
        };
        let later = calls[i + 1..].iter().find_map(|(_, sj, b)| match b {
            Access::Write { path: p } if p == path => Some((*sj, true)),
            Access::Read {
                path: p,
                whole: true,
            } if p == path => Some((*sj, false)),
            _ => None,
        });
        if let Some((sj, rewritten)) = later {
            if let Some(src) = slots[sj].source() {
                by_id.insert(id, (path.clone(), src, rewritten));
            }
        }
    }
    let mut out = FxHashMap::default();
    if by_id.is_empty() {
        return out;
    }
    for (si, s) in slots.iter().enumerate() {
        for (k, b) in s.view.blocks.iter().enumerate() {
            if b.kind != BlockKind::ToolResult {
                continue;
            }
            if let Some((path, later, rewritten)) = b.id.as_deref().and_then(|id| by_id.get(id)) {
                out.insert(
                    (si, k),
                    Superseded {
                        path: path.clone(),
                        later: *later,
                        rewritten: *rewritten,
                    },
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_accesses() {
        let r = |p: &str, whole| {
            Some(Access::Read {
                path: p.into(),
                whole,
            })
        };
        assert_eq!(
            access("Read", r#"{"file_path": "/a/b.py"}"#),
            r("/a/b.py", true)
        );
        assert_eq!(
            access(
                "Read",
                r#"{"file_path": "/a/b.py", "offset": 10, "limit": 5}"#
            ),
            r("/a/b.py", false)
        );
        assert_eq!(
            access(
                "str_replace_editor",
                r#"{"command": "view", "path": "./x.rs"}"#
            ),
            r("x.rs", true)
        );
        assert_eq!(
            access(
                "str_replace_editor",
                r#"{"command": "str_replace", "path": "x.rs"}"#
            ),
            Some(Access::Write {
                path: "x.rs".into()
            })
        );
        assert_eq!(
            access("Write", r#"{"file_path": "说明.md", "content": "x"}"#),
            Some(Access::Write {
                path: "说明.md".into()
            })
        );
        assert_eq!(
            access("bash", r#"{"command": "cat src/lib.rs"}"#),
            r("src/lib.rs", true)
        );
        assert_eq!(access("bash", r#"{"command": "cat a | grep x"}"#), None);
        assert_eq!(access("bash", r#"{"command": "cat *.rs"}"#), None);
        assert_eq!(access("Grep", r#"{"pattern": "x", "path": "src"}"#), None);
        assert_eq!(access("Read", "not json"), None);
    }
}
