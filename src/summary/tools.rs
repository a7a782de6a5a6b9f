//! Reading tool calls and tool output for the rule summary: which tools run shell commands or
//! edit files, the command of a shell call, and the lines of tool output that report a failure.

use super::facts::is_error_name;
use crate::cut::shorten;

/// Whether a tool runs shell commands (`bash`, `execute_bash`, `run_terminal_cmd`, …).
pub(crate) fn is_shell_tool(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "sh" | "zsh" | "cmd" | "run" | "exec" | "execute" | "powershell" | "pwsh"
    ) || ["bash", "shell", "terminal", "command", "_cmd", "exec_"]
        .iter()
        .any(|k| n.contains(k))
        || n.starts_with("run_")
        || n.starts_with("execute_")
}

/// The argument keys that name the file a tool call reads or edits (the artifact trail and the
/// superseded-read pass look for the path under these); defined with the cuts of arguments,
/// which leave the path under them whole.
pub(crate) use crate::cut::PATH_KEYS;

/// Whether a tool may change files (`str_replace_editor`, `Write`, `apply_patch`, …).
pub(crate) fn is_edit_tool(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "edit", "write", "create", "replace", "patch", "insert", "apply", "save", "append",
        "modify", "rename", "delete", "move",
    ]
    .iter()
    .any(|k| n.contains(k))
}

/// The shell command of a call's arguments (`command`, `cmd`, `script`; a string or an argv
/// array, `bash -lc` dropped), or the raw arguments when they are not JSON.
pub(crate) fn shell_command(args: &str) -> Option<String> {
    let v: serde_json::Value = match serde_json::from_str(args) {
        Ok(v) => v,
        Err(_) => return (!args.trim().is_empty()).then(|| args.trim().to_owned()),
    };
    let field = match &v {
        serde_json::Value::Object(o) => ["command", "cmd", "script", "commands", "code"]
            .iter()
            .find_map(|k| o.get(*k))?,
        other => other,
    };
    match field {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(a) => {
            let parts: Vec<&str> = a.iter().filter_map(|x| x.as_str()).collect();
            let parts = match parts.as_slice() {
                [sh, flag, rest @ ..]
                    if matches!(*sh, "bash" | "sh" | "zsh" | "/bin/bash" | "/bin/sh")
                        && flag.starts_with('-') =>
                {
                    rest
                }
                p => p,
            };
            (!parts.is_empty()).then(|| parts.join(" "))
        }
        _ => None,
    }
}

/// Whether a call's arguments say it only reads (`"command": "view"`).
pub(crate) fn is_view_only(args: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(o)) => o
            .get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| matches!(c, "view" | "read" | "list" | "search" | "find")),
        _ => false,
    }
}

/// One line of a command for the summary: its lines joined with ` ⏎ `, shortened to
/// `max_chars`.
pub(super) fn command_line(cmd: &str, max_chars: usize) -> Option<String> {
    let mut s = String::new();
    for l in cmd.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !s.is_empty() {
            s.push_str(" ⏎ ");
        }
        s.push_str(l);
        if s.len() > max_chars * 4 {
            break;
        }
    }
    (!s.is_empty()).then(|| shorten(&s, max_chars).into_owned())
}

/// A line of tool output that reports a failure, cleaned.
pub(super) fn failing_line(line: &str) -> Option<&str> {
    const STARTS: &[&str] = &[
        "error:",
        "error[",
        "error ",
        "fatal:",
        "fatal error",
        "panic:",
        "failed",
        "fail:",
        "npm err!",
        "exception:",
        "exception in",
        "caused by:",
        "segmentation fault",
        "assertion failed",
        "uncaught",
    ];
    let mut t = line.trim();
    if let Some(r) = t.strip_prefix("E ") {
        t = r.trim_start();
    }
    let b = t.as_bytes();
    // Runs on every line of every tool output: no allocation, early exits.
    if b.len() < 5 || !b[0].is_ascii_alphabetic() {
        return None;
    }
    let starts = |p: &str| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    if STARTS.iter().any(|p| starts(p)) || (t.starts_with("thread ") && t.contains("panicked at")) {
        return Some(t);
    }
    // `ZeroDivisionError: division by zero`, `java.lang.IllegalStateException: …`.
    let name_end = b
        .iter()
        .take(121)
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.'))?;
    if b[name_end] != b':' {
        return None;
    }
    let name = &t[..name_end];
    let last = name.rsplit('.').next().unwrap_or(name);
    (is_error_name(last) && name.split('.').all(|s| !s.is_empty())).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_tools_and_lines() {
        assert!(
            is_shell_tool("bash")
                && is_shell_tool("execute_bash")
                && is_shell_tool("Bash")
                && is_shell_tool("run_terminal_cmd")
                && is_shell_tool("shell")
        );
        assert!(
            !is_shell_tool("str_replace_editor")
                && !is_shell_tool("finish")
                && !is_shell_tool("Read")
        );
        assert_eq!(
            shell_command("{\"command\": [\"bash\", \"-lc\", \"ls -la\"]}").unwrap(),
            "ls -la"
        );
        assert_eq!(shell_command("ls -la").unwrap(), "ls -la");
        assert_eq!(
            command_line("cat <<EOF > x\nhello\nEOF", 160).unwrap(),
            "cat <<EOF > x ⏎ hello ⏎ EOF"
        );
        assert_eq!(
            failing_line("E       AssertionError: assert 1 == 2"),
            Some("AssertionError: assert 1 == 2")
        );
        assert_eq!(
            failing_line("error[E0425]: cannot find value `x`"),
            Some("error[E0425]: cannot find value `x`")
        );
        assert_eq!(
            failing_line("thread 'main' panicked at src/main.rs:2:5:"),
            Some("thread 'main' panicked at src/main.rs:2:5:")
        );
        assert_eq!(failing_line("def raise_error(x):"), None);
        assert_eq!(failing_line("Traceback (most recent call last):"), None);
    }
}
