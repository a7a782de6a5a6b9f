//! Recall ids: what a placeholder names so the agent can read the original text back through
//! the `recall` tool (`context_compactor.recall`).
//!
//! Design note. An id is a hash of the original text (FNV-1a 64 mixed with the length, the
//! first 12 hex digits), not a counter or a row id: the planner stays pure (same input, same
//! bytes, so a provider's cached prefix stays valid across calls and processes) and the same
//! text cleared twice names one id, stored once. 48 bits keep a placeholder short (about six
//! tokens for the id) and leave a collision chance of about 2e-7 for 10,000 originals in one
//! store. FNV is written out here because `std`'s `DefaultHasher` may change between Rust
//! releases, which would change every placeholder (and break every cached prefix) on upgrade.

/// Characters of an id (hex digits).
pub const ID_LEN: usize = 12;

/// The tool's name as the model calls it (an MCP client may prefix it: see [`is_recall_tool`]).
pub const TOOL_NAME: &str = "recall";

/// An original text a placeholder names, to be stored under its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recall {
    pub id: String,
    pub text: String,
}

impl Recall {
    /// The entry for `text` (its id computed).
    pub fn of(text: String) -> Self {
        Recall {
            id: recall_id(&text),
            text,
        }
    }
}

/// The id of an original text.
pub fn recall_id(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let h = crate::fingerprint::mix(h, text.len() as u64);
    format!("{h:016x}")[..ID_LEN].to_owned()
}

/// Where an original is written in an `offload_dir`: `<dir>/recall-<id>.txt`.
pub fn recall_path(dir: &str, id: &str) -> String {
    format!("{}/recall-{id}.txt", dir.trim_end_matches('/'))
}

/// How a placeholder names an id: `recall("3f9a0c1d2e4b")`.
pub fn recall_ref(id: &str) -> String {
    format!("{TOOL_NAME}(\"{id}\")")
}

/// Whether `name` is the recall tool: `recall`, or with an MCP-style prefix
/// (`mcp__context-compactor__recall`, `context-compactor.recall`, `server/recall`).
pub fn is_recall_tool(name: &str) -> bool {
    let base = name.rsplit(['.', '/', ':']).next().unwrap_or(name);
    let base = base.rsplit("__").next().unwrap_or(base);
    base == TOOL_NAME
}

/// `placeholder` (ending with `]`) with `; recall("id")` before its closing bracket.
pub fn with_ref(placeholder: &str, id: &str) -> String {
    let body = placeholder.strip_suffix(']').unwrap_or(placeholder);
    format!("{body}; {}]", recall_ref(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_short() {
        // Pinned: a change here changes every placeholder (and every cached prefix).
        assert_eq!(recall_id("hello"), recall_id("hello"));
        assert_eq!(recall_id("hello").len(), ID_LEN);
        assert_ne!(recall_id("hello"), recall_id("hello "));
        assert_eq!(recall_id(""), recall_id(""));
        assert!(recall_id("中文").chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn tool_names_with_prefixes() {
        for n in [
            "recall",
            "mcp__context-compactor__recall",
            "mcp__cc__recall",
            "context-compactor.recall",
            "cc/recall",
        ] {
            assert!(is_recall_tool(n), "{n}");
        }
        for n in ["recall_file", "bash", "mcp__recall__search", "Recall", ""] {
            assert!(!is_recall_tool(n), "{n}");
        }
    }

    #[test]
    fn refs_go_inside_the_bracket() {
        assert_eq!(
            with_ref("[context-compactor: output of bash cleared]", "abc"),
            "[context-compactor: output of bash cleared; recall(\"abc\")]"
        );
    }
}
