//! The one instruction classifier (DESIGN, "Instruction"): a sentence of a user message that
//! prohibits, requires, sets a condition, states a rule for every reply or action, a
//! preference, a goal or a safety rule, in English or Chinese. Questions, quotes, code and
//! pasted tool output are not instructions.
//!
//! Used by the ledger (to rank eviction: what is not an instruction goes first, prohibitions
//! and safety rules last), the rule summary and the summarizer prompt (to list instructions).
//! The classifier ranks; it does not decide what the ledger carries (the ledger carries every
//! user sentence within its budget).
//!
//! Design notes. Rules, not a model: a sentence is an instruction when a clause of it is a
//! directive (an imperative verb first, "you must/should …", 请/先/再 + a verb) or holds a
//! prohibition, requirement, condition, every-rule, preference or goal form (`english`,
//! `chinese`), read on the text outside quotes and inline code; questions, quotes, code, markup,
//! pasted tool output (`error: …`, `TypeError: …`, 错误：…) and slash commands are not. The kind
//! is the first that applies of safety, prohibition, condition, every-rule, preference, goal,
//! requirement (the ledger evicts safety rules and prohibitions last, so they win). Measured on
//! `tests/data/instructions.jsonl` (451 sentences labelled by hand, README there): see
//! `docs/instructions.md` for the figures and `instruction_tests.rs` for the test that prints them.
//! A plain imperative ("make the charts 20% less tall", "现在修复") is a requirement: it requires
//! an action. Sentences come from [`instruction_sentences`].

mod chinese;
mod english;
mod memo;
mod sentences;

pub use memo::memoized;
pub use sentences::{instruction_sentences, looks_like_code, HARNESS_PREFIXES};

/// Longest sentence taken as an instruction (a longer "sentence" is pasted text, not an order).
pub const MAX_INSTRUCTION_CHARS: usize = 300;

/// What kind of instruction a sentence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstructionKind {
    /// "don't / never / do not / 不要 / 禁止 …"
    Prohibition,
    /// "you must / make sure / only … / 必须 / 务必 / 只 …", and a plain imperative ("run the tests")
    Requirement,
    /// "when / before / after / if / once …, do …" (如果…就…, 先…再…)
    Condition,
    /// "every / each / all / always …" (每次, 以后, 总是)
    EveryRule,
    /// "I prefer / please use / use X instead of Y"
    Preference,
    /// "the goal is / I want / we need"
    Goal,
    /// what must never happen to data, money, credentials, production
    Safety,
}

impl InstructionKind {
    /// Every kind, in declaration order.
    pub const ALL: [InstructionKind; 7] = [
        InstructionKind::Prohibition,
        InstructionKind::Requirement,
        InstructionKind::Condition,
        InstructionKind::EveryRule,
        InstructionKind::Preference,
        InstructionKind::Goal,
        InstructionKind::Safety,
    ];

    /// The kind's name (`"prohibition"`, `"every_rule"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            InstructionKind::Prohibition => "prohibition",
            InstructionKind::Requirement => "requirement",
            InstructionKind::Condition => "condition",
            InstructionKind::EveryRule => "every_rule",
            InstructionKind::Preference => "preference",
            InstructionKind::Goal => "goal",
            InstructionKind::Safety => "safety",
        }
    }

    /// Whether the ledger evicts this kind last (prohibitions and safety rules), after every
    /// other instruction.
    pub fn evicted_last(self) -> bool {
        matches!(self, InstructionKind::Prohibition | InstructionKind::Safety)
    }
}

/// What the language modules found in one sentence.
#[derive(Default, Debug)]
struct Signals {
    question: bool,
    directive: bool,
    prohibition: bool,
    requirement: bool,
    condition: bool,
    every_rule: bool,
    preference: bool,
    goal: bool,
    safety_object: bool,
}

/// The kind of instruction `sentence` is, or `None` when it is not one.
pub fn classify(sentence: &str) -> Option<InstructionKind> {
    memo::kind(sentence, classify_now)
}

/// [`classify`] without the memo.
fn classify_now(sentence: &str) -> Option<InstructionKind> {
    let s = sentence.trim();
    if s.is_empty() || s.chars().count() > MAX_INSTRUCTION_CHARS || not_prose(s) {
        return None;
    }
    let body = s.trim_end_matches(|c: char| c.is_whitespace() || "\"'”’)]」』".contains(c));
    if body.ends_with('?') || body.ends_with('？') {
        return None;
    }
    let outside = outside_quotes_and_code(s);
    if reported(&outside) {
        return None;
    }
    let mut sig = Signals::default();
    english::signals(&outside, &mut sig);
    chinese::signals(&outside, &mut sig);
    if commands_only(s, &outside) {
        sig.directive = true;
    }
    if sig.question && !sig.directive {
        return None;
    }
    let instruction =
        sig.prohibition || sig.requirement || sig.condition || sig.every_rule || sig.directive;
    use InstructionKind::*;
    Some(if sig.safety_object && instruction && !sig.goal {
        Safety
    } else if sig.prohibition {
        Prohibition
    } else if sig.condition {
        Condition
    } else if sig.every_rule {
        EveryRule
    } else if sig.preference {
        Preference
    } else if sig.goal {
        Goal
    } else if sig.requirement || sig.directive {
        Requirement
    } else {
        return None;
    })
}

/// Whether a sentence is a statement in the user's own prose (a stated fact when it is not an
/// instruction): at least three words of letters outside URLs, paths and identifiers (`at
/// Object.run (http://…)` has one), or four CJK characters, and not markup, code, a slash
/// command, pasted tool output or a "sentence" over [`MAX_INSTRUCTION_CHARS`] (`not_prose`).
/// The ledger evicts the words that are not (a pasted log's lines, `17`, `true`, `<task-id>…`)
/// before the user's stated facts.
pub fn is_stated(sentence: &str) -> bool {
    let s = sentence.trim();
    if s.is_empty() || s.chars().count() > MAX_INSTRUCTION_CHARS || not_prose(s) {
        return false;
    }
    if s.chars().filter(|&c| chinese::is_cjk(c)).count() >= 4 {
        return true;
    }
    // A log line opens with where it was written (`useSessionStream.ts:819 …`).
    let first = s.split_whitespace().next().unwrap_or("");
    if first.rsplit_once(':').is_some_and(|(a, n)| {
        !a.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
    }) {
        return false;
    }
    // A word: letters (a hyphen or apostrophe inside), lower case after its first letter; not an
    // identifier (`resetState`, `Object.current`, `CN-3D86F1`), a number or a path.
    let word = |t: &str| {
        let core = t.trim_matches(|c: char| !c.is_alphanumeric());
        core.chars().count() >= 2
            && core.chars().skip(1).all(|c| !c.is_uppercase())
            && core
                .chars()
                .all(|c| (c.is_alphabetic() && !chinese::is_cjk(c)) || c == '-' || c == '\'')
    };
    let tokens = s.split_whitespace().count();
    let words = s.split_whitespace().filter(|t| word(t)).count();
    words >= 3 && words * 2 >= tokens
}

/// Text that is not prose a user addresses to the agent: a quote (`> …`), markup or a harness
/// wrapper (`<…>`, `[Request interrupted …]`), a slash command or path (`/undo`), code, or pasted
/// tool output that opens with its label (`error: …`, `TypeError: …`, `错误：…`).
fn not_prose(s: &str) -> bool {
    if s.starts_with(['>', '<', '[', '/', '|', '{', '}']) || looks_like_code(s) {
        return true;
    }
    let label = s.split([':', '：']).next().unwrap_or("");
    let label_lower = label.trim().to_lowercase();
    s.len() > label.len()
        && !label_lower.contains(' ')
        && ([
            "error",
            "warning",
            "fatal",
            "note",
            "hint",
            "info",
            "debug",
            "traceback",
            "panic",
            "exception",
            "错误",
            "警告",
            "报错",
            "异常",
        ]
        .contains(&label_lower.as_str())
            || ["error", "exception", "warning"]
                .iter()
                .any(|e| label_lower.ends_with(e)))
}

/// Whether `sentence` is an instruction that states its rule with a marker word ("never",
/// "don't", "do not", "must", "only", "always"; 不要、别、禁止、必须、务必、一定、只、总是 …) rather
/// than as a plain request, a condition or a "make sure": where room is short (the task's cut),
/// marked rules are kept first.
pub fn is_marked_rule(sentence: &str) -> bool {
    if classify(sentence).is_none() {
        return false;
    }
    let outside = outside_quotes_and_code(sentence.trim());
    let lower = outside.to_lowercase().replace('’', "'");
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    ["never", "don't", "always", "must", "only"]
        .iter()
        .any(|m| words.contains(m))
        || words.windows(2).any(|p| p == ["do", "not"])
        || [
            "不要",
            "禁止",
            "必须",
            "务必",
            "一定",
            "只",
            "总是",
            "永远不",
            "绝不",
            "不许",
            "不准",
            "别",
        ]
        .iter()
        .any(|w| outside.contains(w))
}

/// The instructions among the sentences of one user message's text ([`instruction_sentences`]),
/// in order, with their kinds.
pub fn user_instructions(text: &str) -> Vec<(InstructionKind, String)> {
    memo::instructions(text, |text| {
        instruction_sentences(text)
            .into_iter()
            .filter_map(|s| classify(&s).map(|k| (k, s)))
            .collect()
    })
}

/// Reported speech: what someone else said ("She told us never to …", "老板说以后都不要 …").
fn reported(outside: &str) -> bool {
    let lower = outside.to_lowercase().replace('’', "'");
    let en = [
        "he",
        "she",
        "they",
        "someone",
        "everyone",
        "my boss",
        "my colleague",
        "the user",
    ]
    .iter()
    .any(|who| {
        // "<who> <verb> " at the start or after a space, matched in place (a format! per
        // pair and sentence was a tenth of the classifier's time).
        lower.match_indices(who).any(|(at, _)| {
            (at == 0 || lower[..at].ends_with(' '))
                && lower[at + who.len()..]
                    .strip_prefix(' ')
                    .is_some_and(|rest| {
                        ["said ", "says ", "told ", "tells ", "asked ", "wrote "]
                            .iter()
                            .any(|verb| rest.starts_with(verb))
                    })
        })
    });
    let zh = [
        "他说",
        "她说",
        "他们说",
        "老板说",
        "同事说",
        "用户说",
        "别人说",
        "有人说",
        "大家说",
    ]
    .iter()
    .any(|w| outside.contains(w));
    en || zh
}

/// `s` with inline code spans and quoted spans replaced by placeholder words (what a sentence
/// quotes or shows as code is not what it asks).
fn outside_quotes_and_code(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut close: Option<char> = None;
    for (i, c) in s.char_indices() {
        if let Some(end) = close {
            if c == end {
                close = None;
            }
            continue;
        }
        let end = match c {
            '`' => Some(('`', " xcodex ")),
            '"' => Some(('"', " xquotex ")),
            '“' => Some(('”', " xquotex ")),
            '「' => Some(('」', " xquotex ")),
            '『' => Some(('』', " xquotex ")),
            _ => None,
        };
        match end {
            Some((e, word)) if s[i + c.len_utf8()..].contains(e) => {
                close = Some(e);
                out.push_str(word);
            }
            _ => out.push(c),
        }
    }
    out
}

/// A sentence of commands only: "`make format-*` and `make check-*`".
fn commands_only(s: &str, outside: &str) -> bool {
    let connectives = ["xcodex", "and", "then", "or", "&", "和", "然后", "再"];
    let words: Vec<&str> = outside
        .split(|c: char| c.is_whitespace() || ",，、。.".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty()
        || !words.contains(&"xcodex")
        || !words.iter().all(|w| connectives.contains(w))
    {
        return false;
    }
    let first = s.split('`').nth(1).unwrap_or("").trim_start_matches("./");
    let tool = first.split_whitespace().next().unwrap_or("");
    [
        "make", "git", "npm", "pnpm", "yarn", "cargo", "pytest", "python", "python3", "uv", "pip",
        "go", "docker", "just", "tox", "ruff",
    ]
    .contains(&tool)
}

/// Whether `word` (lowercase) is an English verb that opens an imperative.
fn english_verb(word: &str) -> bool {
    english::is_verb(word)
}

/// Whether `text` opens with an English directive clause ("run the tests", "you must …").
fn english_directive(text: &str) -> bool {
    let mut sig = Signals::default();
    english::signals(text, &mut sig);
    sig.directive || sig.prohibition
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stated_prose_and_what_is_not() {
        for s in [
            "Remember that the staging server is called stg-4.",
            "记住，预发布服务器叫 stg-4。",
            "The hover is showing \"undefined: NaN%\".",
        ] {
            assert!(is_stated(s), "{s}");
        }
        for s in [
            "17",
            "true",
            ":",
            "count",
            "<task-id>bv1xsvv0r</task-id>",
            "/clear",
            "at Object.current (http://localhost:5173/src/hooks/use.ts:1744:40)",
            "TypeError: Cannot read properties of null (reading 'clear')",
            "{sessionId: '411b1245'}",
            "useSessionStream.ts:2643 [SlashCmd] useLayoutEffect sessionId change Object",
        ] {
            assert!(!is_stated(s), "{s}");
        }
    }

    #[test]
    fn interface() {
        assert_eq!(
            classify("Never push to main."),
            Some(InstructionKind::Prohibition)
        );
        assert_eq!(classify("What is this?"), None);
        assert_eq!(
            classify("When you finish, run the tests."),
            Some(InstructionKind::Condition)
        );
        assert_eq!(
            classify("如果测试失败就先修复再提交。"),
            Some(InstructionKind::Condition)
        );
        assert_eq!(
            classify("以后每次回复都用中文。"),
            Some(InstructionKind::EveryRule)
        );
        assert_eq!(
            classify("Never touch the production database."),
            Some(InstructionKind::Safety)
        );
        assert_eq!(classify("The function always returns None."), None);
        assert_eq!(classify("他说“不要推送到 main”，但那是开玩笑。"), None);
        assert_eq!(
            classify("The patch must only contain changes to the source files."),
            Some(InstructionKind::Requirement)
        );
        assert_eq!(
            classify("Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME."),
            Some(InstructionKind::Requirement)
        );
        assert_eq!(
            classify("rm has no output, so that must have worked."),
            None
        );
        assert_eq!(classify("This must be a caching issue."), None);
        assert_eq!(
            classify("This means you DON'T have to modify the tests."),
            None
        );
        assert!(is_marked_rule(
            "Always check the code after you issue an edit."
        ));
        assert!(!is_marked_rule("Run the tests."));
        assert!(InstructionKind::Safety.evicted_last());
    }

    /// A numbered rule of a list is a rule; "we recommend …" is a preference (SWE-agent's tips:
    /// both went first from the ledger's user words over a budget, as if they were not orders).
    #[test]
    fn numbered_rules_and_recommendations() {
        for s in [
            "1. Always start by trying to replicate the bug that the issues discusses.",
            "2) Run the tests before you commit.",
            "12. Never push to main.",
        ] {
            assert!(classify(s).is_some(), "{s}");
        }
        assert_eq!(
            classify("1. Always start by trying to replicate the bug."),
            classify("Always start by trying to replicate the bug."),
        );
        assert_eq!(
            classify("If the script prints nothing, we recommend adding a print at the end."),
            Some(InstructionKind::Preference)
        );
        assert!(classify(
            "If the bug reproduction script does not print anything when it succesfully runs, we \
             recommend adding a print(\"Script completed successfully, no errors.\") command at \
             the end of the file,"
        )
        .is_some());
        assert_eq!(
            classify("I recommend keeping the old API for one release."),
            Some(InstructionKind::Preference)
        );
        assert_eq!(classify("3 files changed, 12 insertions."), None);
        assert_eq!(classify("1. The function always returns None."), None);
    }

    /// Every cut of mixed Chinese, English, code and emoji text at a char boundary: no panic
    /// (no slice inside a character), and a sentence never classified differently from itself.
    #[test]
    fn any_cut_of_cjk_text() {
        let text = "如果测试失败就先修复再提交。先读文件再修改！`make check` 通过；\n- 以后每次回复都用中文\n\
                    ```\nlet x = 1;\n```\n> 他说“不要推送”。Don't touch 生产数据库 🚀. 别人的代码？每个请求大概要 200 毫秒。";
        let bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        for &a in bounds.iter().step_by(2) {
            for &b in bounds.iter().filter(|&&b| b >= a).step_by(7) {
                let part = &text[a..b];
                for s in instruction_sentences(part) {
                    assert_eq!(classify(&s), classify(&s));
                }
                let _ = classify(part);
                let _ = is_marked_rule(part);
            }
        }
        assert!(!InstructionKind::Goal.evicted_last());
    }
}

#[cfg(test)]
#[path = "instruction/labelled_tests.rs"]
mod labelled_tests;
