//! Tests of the rule summary (`rule.rs`).

use super::*;
use crate::message::{Block, Message, Role};

fn sample<'a>(big: &'a str) -> Vec<Message<'a>> {
    let mut err = Block::tool_result(Some("c3"), "Traceback (most recent call last):\n  File \"tax.py\", line 3\nZeroDivisionError: division by zero");
    err.is_error = true;
    vec![
        Message::text(Role::User, "Please fix the failing test in billing/tax.py. It crashes on empty carts."),
        Message::new(
            Role::Assistant,
            vec![
                Block::text("Let me run the tests."),
                Block::tool_call(Some("c1"), "bash", "{\"command\": \"cd /srv/app && pytest tests/test_tax.py -q\"}"),
            ],
        ),
        Message::new(Role::Tool, vec![Block::tool_result(Some("c1"), big)]),
        Message::new(
            Role::Assistant,
            vec![Block::tool_call(Some("c2"), "str_replace_editor", "{\"command\": \"view\", \"path\": \"/srv/app/billing/tax.py\"}")],
        ),
        Message::new(Role::Tool, vec![Block::tool_result(Some("c2"), "def tax(total, n): return total / n")]),
        Message::new(
            Role::Assistant,
            vec![Block::tool_call(
                Some("c3"),
                "str_replace_editor",
                "{\"command\": \"str_replace\", \"path\": \"/srv/app/billing/tax.py\", \"old_str\": \"total / n\", \"new_str\": \"total / n if n else 0\"}",
            )],
        ),
        Message::new(Role::Tool, vec![err]),
        Message::text(
            Role::Assistant,
            "The fix guards the division by zero in `tax()`. All tests pass now.\n\n```python\nreturn total / n if n else 0\n```",
        ),
        Message::text(Role::User, "Thanks! Now add a changelog entry."),
    ]
}

#[test]
fn english_rule_summary_has_every_section() {
    let big = format!(
        "{}\nFAILED tests/test_tax.py::test_empty - ZeroDivisionError: division by zero\n1 failed",
        "collecting ...\n".repeat(50)
    );
    let msgs = sample(&big);
    let s = rule_summary(&msgs, Language::En, 4000);
    println!("{s}");
    assert!(s.contains("Topics:\n- Please fix the failing test in billing/tax.py."));
    assert!(s.contains("- Thanks! Now add a changelog entry."));
    assert!(s.contains(
        "Key conclusions:\n- The fix guards the division by zero in `tax()`. All tests pass now."
    ));
    assert!(s.contains("tools: str_replace_editor ×2, bash"));
    assert!(s.contains("code: python"));
    assert!(s.contains(
        "Artifact trail (files changed, in order):\n- /srv/app/billing/tax.py: edited\n"
    ));
    assert!(
        !s.contains("- /srv/app/billing/tax.py\n"),
        "a changed file is not listed again"
    );
    assert!(
        !s.contains("- /srv/app\n"),
        "a parent directory is not listed"
    );
    assert!(s.contains("Commands run:\n- cd /srv/app && pytest tests/test_tax.py -q"));
    assert!(s.contains("ZeroDivisionError ×"));
    assert!(
        s.contains("- FAILED tests/test_tax.py::test_empty - ZeroDivisionError: division by zero")
    );
    assert!(s.ends_with("9 messages replaced: 2 user, 4 assistant, 3 tool results"));
    assert_eq!(s, rule_summary(&msgs, Language::En, 4000), "deterministic");
}

#[test]
fn bounded_and_drops_least_important_first() {
    let big = "ok".to_owned();
    let msgs = sample(&big);
    let full = rule_summary(&msgs, Language::En, 10_000);
    for max in [600, 300, 200, 120, 60, 10, 0] {
        let s = rule_summary(&msgs, Language::En, max);
        assert!(s.chars().count() <= max, "{max}: {}", s.chars().count());
        if max >= 120 {
            assert!(s.contains("messages replaced"), "{max}: {s}");
        }
        if max >= 200 {
            assert!(s.contains("Please fix the failing test"), "{max}: {s}");
        }
    }
    let small = rule_summary(&msgs, Language::En, 300);
    assert!(small.len() < full.len());
    for line in small.lines().filter(|l| l.starts_with("- ")) {
        assert!(full.contains(line), "{line}");
    }
    // A section cut short says so.
    let cmds: Vec<String> = (0..50)
        .map(|i| format!("{{\"command\": \"echo step {i}\"}}"))
        .collect();
    let many: Vec<Message<'_>> = cmds
        .iter()
        .map(|c| {
            Message::new(
                Role::Assistant,
                vec![Block::tool_call(None, "bash", c.as_str())],
            )
        })
        .collect();
    let s = rule_summary(&many, Language::En, 400);
    assert!(s.contains("Commands run ("), "{s}");
    assert!(
        s.contains("echo step 49") && !s.contains("echo step 0\n"),
        "{s}"
    );
    assert_eq!(
        rule_summary(&[], Language::En, 100),
        "0 messages replaced: 0 user, 0 assistant, 0 tool results"
    );
}

#[test]
fn chinese_rule_summary() {
    let msgs = vec![
        Message::text(Role::User, "<command-name>/clear</command-name>"),
        Message::text(
            Role::User,
            "请修复 web/src/hooks/useSessionStream.ts 里的 TypeError。切换标签页后报错。",
        ),
        Message::new(
            Role::Assistant,
            vec![
                Block::text("我先看一下代码。"),
                Block::tool_call(
                    Some("a"),
                    "Read",
                    "{\"file_path\": \"/Users/me/kimi/web/src/hooks/useSessionStream.ts\"}",
                ),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![Block::tool_result(
                Some("a"),
                "const x = ref.current.clear();",
            )],
        ),
        Message::new(
            Role::Assistant,
            vec![Block::tool_call(
                Some("b"),
                "Bash",
                "{\"command\": \"make check\"}",
            )],
        ),
        Message::new(
            Role::Tool,
            vec![Block::tool_result(Some("b"), "All checks passed")],
        ),
        Message::text(
            Role::Assistant,
            "已修复：给三个 `.clear()` 调用加上了可选链。检查全部通过。",
        ),
    ];
    let s = rule_summary(&msgs, Language::Zh, 2000);
    println!("{s}");
    assert!(s.contains("讨论主题：\n- 请修复 web/src/hooks/useSessionStream.ts 里的 TypeError。"));
    assert!(!s.contains("/clear"));
    assert!(s.contains("关键结论：\n- 已修复：给三个 `.clear()` 调用加上了可选链。"));
    assert!(s.contains("工具：Read，Bash") || s.contains("工具：Bash，Read"));
    assert!(s.contains("涉及文件：\n- /Users/me/kimi/web/src/hooks/useSessionStream.ts"));
    assert!(s.contains("执行的命令：\n- make check"));
    assert!(s.contains("遇到的错误：\n- TypeError"));
    assert!(s.ends_with("已压缩 7 条消息，其中用户 2 条，助手 3 条，工具结果 2 条"));
}

#[test]
fn topics() {
    assert_eq!(
        topic("Implement the following plan:\n\n# Fix: scroll lost\n\nmore").unwrap(),
        "Implement the following plan: Fix: scroll lost"
    );
    assert_eq!(
        topic("<local-command-caveat>Caveat</local-command-caveat>"),
        None
    );
    assert_eq!(topic("<pr_description>\nConsider the following PR description:\nModeling's `separability_matrix` is wrong. More text.").unwrap(),
        "Consider the following PR description: Modeling's `separability_matrix` is wrong.");
}

#[test]
fn constraints_todos_and_a_chain_that_merges() {
    let first = vec![
        Message::text(
            Role::User,
            "Fix the parser. Never edit the tests. 只修改 src 目录。",
        ),
        Message::new(
            Role::Assistant,
            vec![
                Block::tool_call(
                    Some("t1"),
                    "TodoWrite",
                    r#"{"todos": [{"content": "Reproduce the bug", "status": "completed"}, {"content": "Patch parse()", "status": "in_progress"}]}"#,
                ),
                Block::tool_call(
                    Some("w1"),
                    "Write",
                    r#"{"file_path": "src/parse.py", "content": "x"}"#,
                ),
            ],
        ),
    ];
    let s1 = rule_summary(&first, Language::En, 4000);
    assert!(
        s1.contains(
            // "Fix the parser." is an instruction too (a plain imperative requires an action).
            "The user's constraints (verbatim):\n- Fix the parser.\n- Never edit the tests.\n- 只修改 src 目录。\n"
        ),
        "{s1}"
    );
    assert!(s1.contains("Open to-do items:\n- Patch parse()\n"), "{s1}");
    assert!(
        !s1.contains("Reproduce the bug"),
        "done items are not open: {s1}"
    );
    assert!(s1.contains("- src/parse.py: created\n"), "{s1}");
    let second = vec![Message::new(
        Role::Assistant,
        vec![
            Block::tool_call(
                Some("e1"),
                "Edit",
                r#"{"file_path": "src/parse.py", "old_string": "x", "new_string": "y"}"#,
            ),
            Block::tool_call(
                Some("b1"),
                "bash",
                r#"{"command": "git mv src/old.py src/new.py"}"#,
            ),
        ],
    )];
    let s2 = rule_summary_chained(Some(&s1), &second, Language::En, 4000);
    assert!(
        s2.contains("- src/parse.py: created → edited\n- src/old.py: moved (src/new.py)\n"),
        "{s2}"
    );
    assert!(
        s2.contains("- Never edit the tests."),
        "the earlier constraints stay: {s2}"
    );
    assert!(s2.contains("- Patch parse()"), "{s2}");
    assert_eq!(
        s2.matches("Artifact trail").count(),
        1,
        "one summary, not two: {s2}"
    );
    // Chained again and again: the size stays within the bound.
    let mut s = s2.clone();
    for _ in 0..5 {
        s = rule_summary_chained(Some(&s), &second, Language::En, 600);
        assert!(s.chars().count() <= 600, "{}", s.chars().count());
        assert!(s.contains("src/parse.py: created → edited"), "{s}");
    }
    // An earlier summary that is not a rule summary is kept in front.
    let s3 = rule_summary_chained(Some("The LLM summary."), &second, Language::En, 4000);
    assert!(s3.starts_with("The LLM summary.\n\n"), "{s3}");
}
