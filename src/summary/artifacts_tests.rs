//! Tests of the artifact trail (`artifacts.rs`).

use super::*;

fn trail(calls: &[(&str, &str)]) -> Vec<String> {
    let mut t = Trail::new();
    for (n, a) in calls {
        t.call(n, a);
    }
    t.lines(false)
}

#[test]
fn edit_tools_patches_and_shell_commands() {
    let lines = trail(&[
        ("Write", r#"{"file_path": "/w/a.py", "content": "x"}"#),
        (
            "Edit",
            r#"{"file_path": "/w/a.py", "old_string": "x", "new_string": "y"}"#,
        ),
        (
            "str_replace_editor",
            r#"{"command": "view", "path": "/w/b.py"}"#,
        ),
        (
            "str_replace_editor",
            r#"{"command": "create", "path": "/w/c.py"}"#,
        ),
        (
            "bash",
            r#"{"command": "cat <<'EOF' > notes.md\nrm -rf not_a_command\nEOF\necho hi >> log.txt 2>&1"}"#,
        ),
        (
            "bash",
            r#"{"command": "sed -i 's/a > b/c/' src/x.py && git mv old.py new.py; rm -f tmp.txt"}"#,
        ),
        (
            "bash",
            r#"{"command": "echo \"a > b\" > /dev/null; ls >&2"}"#,
        ),
        (
            "apply_patch",
            r#"{"input": "*** Begin Patch\n*** Add File: d.rs\n+x\n*** Update File: e.rs\n*** Move to: f.rs\n*** Delete File: g.rs\n*** End Patch"}"#,
        ),
    ]);
    assert_eq!(
        lines,
        [
            "/w/a.py: created → edited",
            "/w/c.py: created",
            "notes.md: created",
            "log.txt: edited",
            "src/x.py: edited",
            "old.py: moved (new.py)",
            "new.py: moved",
            "tmp.txt: deleted",
            "d.rs: created",
            "e.rs: edited → moved (f.rs)",
            "f.rs: moved",
            "g.rs: deleted",
        ]
    );
}

#[test]
fn absorb_reads_the_rule_summarys_file_list() {
    let mut t = Trail::new();
    t.absorb(&[
        "src/app.py (edited)".to_owned(),
        "web/src/页面.tsx（修改）".to_owned(),
        "docs/readme.md".to_owned(),
    ]);
    assert_eq!(t.ops_of("src/app.py", false).as_deref(), Some("edited"));
    assert_eq!(t.ops_of("web/src/页面.tsx", true).as_deref(), Some("修改"));
    assert_eq!(t.ops_of("docs/readme.md", false), None);
}

#[test]
fn absorb_keeps_the_earlier_trail_first() {
    let mut t = Trail::new();
    t.call("Edit", r#"{"file_path": "b.py"}"#);
    t.call("bash", r#"{"command": "rm a.py"}"#);
    t.absorb(&[
        "a.py: created → edited".to_owned(),
        "old.py: moved (new.py)".to_owned(),
    ]);
    assert_eq!(
        t.lines(false),
        [
            "a.py: created → edited → deleted",
            "old.py: moved (new.py)",
            "b.py: edited"
        ]
    );
    assert_eq!(t.lines(true)[0], "a.py: 创建 → 修改 → 删除");
}

#[test]
fn a_write_to_a_file_an_earlier_summary_lists_edits_it() {
    // cc_29 of the corpus: the plan file was created before one compaction and written
    // again before the next; the chained summary said "created" only.
    let mut t = Trail::new();
    t.call("Write", r#"{"file_path": "/p/plan.md", "content": "v2"}"#);
    t.call(
        "Write",
        r#"{"file_path": "/p/gone.md", "content": "again"}"#,
    );
    t.absorb(&[
        "/p/plan.md: 创建".to_owned(),
        "/p/gone.md: created → deleted".to_owned(),
    ]);
    assert_eq!(
        t.lines(false),
        [
            "/p/plan.md: created → edited",
            "/p/gone.md: created → deleted → created"
        ]
    );
}

#[test]
fn an_edit_whose_open_was_summarised_earlier_names_the_file_from_its_result() {
    use crate::message::{Block, Message, Role};
    let call = Block::tool_call(Some("c1"), "edit", r#"{"search": "a", "replace": "b"}"#);
    let result = Block::tool_result(
        Some("c1"),
        "Text replaced.\n(Open file: /testbed/src/fields.py)\n(Current directory: /testbed)",
    );
    let msgs = [
        Message::new(Role::Assistant, vec![call]),
        Message::new(Role::Tool, vec![result]),
    ];
    let t = Trail::of(Some("- reproduce.py: created"), &msgs);
    assert_eq!(
        t.lines(false),
        ["reproduce.py: created", "/testbed/src/fields.py: edited"]
    );
}

#[test]
fn a_file_read_before_an_earlier_summary_and_written_now_is_edited() {
    use crate::message::{Block, Message, Role};
    let write = Block::tool_call(
        Some("c1"),
        "write_file",
        r#"{"path": "/srv/app/billing/tax.py", "content": "x"}"#,
    );
    let msgs = [Message::new(Role::Assistant, vec![write])];
    // The earlier summary listed it as read (files section), or a command named it.
    for earlier in [
        "Files touched:\n- /srv/app/billing/tax.py\n- /srv/app/billing/money.py",
        "涉及文件：\n- /srv/app/billing/tax.py（已修改）",
        "Commands run:\n- cat /srv/app/billing/tax.py",
    ] {
        let t = Trail::of(Some(earlier), &msgs);
        assert_eq!(
            t.lines(false),
            ["/srv/app/billing/tax.py: edited"],
            "{earlier}"
        );
    }
    // A file the user only named in prose (preserved details) may be one still to create.
    let t = Trail::of(Some("Preserved details:\n- /srv/app/billing/tax.py"), &msgs);
    assert_eq!(t.lines(false), ["/srv/app/billing/tax.py: created"]);
}

#[test]
fn edit_file_without_a_command_edits() {
    let lines = trail(&[(
        "edit_file",
        r#"{"path": "/w/t.py", "old": "a", "new": "b"}"#,
    )]);
    assert_eq!(lines, ["/w/t.py: edited"]);
}

#[test]
fn a_command_line_is_not_read_back_as_a_trail_line() {
    let mut t = Trail::new();
    t.absorb(&[
        "cd /srv/app && python /tmp/repro_tax.py: created".to_owned(),
        "python /tmp/repro_tax.py (edited)".to_owned(),
        "/tmp/repro_tax.py: created".to_owned(),
    ]);
    assert_eq!(t.lines(false), ["/tmp/repro_tax.py: created"]);
}
