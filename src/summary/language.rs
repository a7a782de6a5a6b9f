//! The conversation's language, for the summary's section labels and the summarizer prompt.
//!
//! A message votes Chinese when its prose (code spans, fenced blocks and `<tags>` left out) is
//! at least 20% Han characters among letters + Han, and kana does not dominate (Japanese).
//! The conversation is Chinese when at least 25% of the user and assistant messages that have
//! prose vote Chinese. Votes per message, not a share of all characters, because pasted
//! stack traces, English tool chatter and harness wrappers (`<task-notification>`, …) swamp
//! the characters of a few short Chinese requests: on the corpus the Chinese conversations
//! score 0.45–1.00 by message vote (their character shares go as low as 0.02 for the user
//! side of `cc_29`), every English one scores 0.00.

use crate::message::{BlockKind, Message, Role};
use crate::text::Text;

/// The language summaries are written and labelled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Language {
    #[default]
    En,
    Zh,
}

/// A fixed piece of summary text that exists in both languages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Label {
    /// Rule summary: what the user asked about.
    Topics,
    /// Rule summary: what the assistant concluded.
    Conclusions,
    /// Rule summary: code languages and tools used.
    Technical,
    /// Rule summary: files named in tool calls.
    Files,
    /// Rule summary: files created, edited, moved or deleted, with their operations.
    ArtifactTrail,
    /// Rule summary: the user's imperatives, verbatim.
    Constraints,
    /// Rule summary: the open items of the latest plan or to-do list.
    Todos,
    /// The last unresolved error, carried after the narrative (`continuation.rs`).
    LastError,
    /// An unresolved error older than the last one (its command was not run clean since).
    EarlierError,
    /// Rule summary: shell commands run.
    Commands,
    /// Rule summary: errors seen.
    Errors,
    /// Rule summary: how many messages were replaced.
    Counts,
    /// Truncation summary heading.
    Truncated,
    /// Facts the planner appends when an LLM summary left them out.
    PreservedDetails,
    /// The user's own messages carried verbatim.
    UserMessages,
    /// Marks a file that a tool call edited or created.
    Edited,
    /// "tools" inside the technical-context line.
    Tools,
    /// "code" inside the technical-context line.
    Code,
}

/// Share of Han among letters + Han at which one message votes Chinese.
const MESSAGE_HAN_SHARE: f64 = 0.2;
/// Share of voting messages at which the conversation is Chinese.
const CONVERSATION_ZH_SHARE: f64 = 0.25;
/// A message needs this much prose to vote: two Han characters or eight letters.
const MIN_HAN: usize = 2;
const MIN_LETTERS: usize = 8;

impl Language {
    /// `"en"` or `"zh"` (what `SummaryRequest.language` carries).
    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Zh => "zh",
        }
    }

    /// The language's name as a prompt names it.
    pub fn name(self) -> &'static str {
        match self {
            Language::En => "English",
            Language::Zh => "Chinese (简体中文)",
        }
    }

    /// Parses `"en"`/`"zh"` (and `"english"`, `"chinese"`, `"zh-cn"`, …).
    pub fn parse(s: &str) -> Option<Language> {
        let s = s.trim().to_ascii_lowercase();
        if s == "en" || s.starts_with("en-") || s.starts_with("en_") || s == "english" {
            Some(Language::En)
        } else if s == "zh" || s.starts_with("zh-") || s.starts_with("zh_") || s == "chinese" {
            Some(Language::Zh)
        } else {
            None
        }
    }

    /// The label in this language.
    pub fn label(self, label: Label) -> &'static str {
        use Label::*;
        match (self, label) {
            (Language::En, Topics) => "Topics",
            (Language::En, Conclusions) => "Key conclusions",
            (Language::En, Technical) => "Technical context",
            (Language::En, Files) => "Files touched",
            (Language::En, ArtifactTrail) => "Artifact trail (files changed, in order)",
            (Language::En, Constraints) => "The user's constraints (verbatim)",
            (Language::En, Todos) => "Open to-do items",
            (Language::En, LastError) => "Last unresolved error",
            (Language::En, EarlierError) => "Earlier unresolved error",
            (Language::En, Commands) => "Commands run",
            (Language::En, Errors) => "Errors seen",
            (Language::En, Counts) => "Replaced",
            (Language::En, Truncated) => "Earlier messages, truncated",
            (Language::En, PreservedDetails) => "Preserved details",
            (Language::En, UserMessages) => "The user's messages",
            (Language::En, Edited) => "edited",
            (Language::En, Tools) => "tools",
            (Language::En, Code) => "code",
            (Language::Zh, Topics) => "讨论主题",
            (Language::Zh, Conclusions) => "关键结论",
            (Language::Zh, Technical) => "技术上下文",
            (Language::Zh, Files) => "涉及文件",
            (Language::Zh, ArtifactTrail) => "文件变更记录（按顺序）",
            (Language::Zh, Constraints) => "用户的约束（原文）",
            (Language::Zh, Todos) => "未完成的待办事项",
            (Language::Zh, LastError) => "最近未解决的错误",
            (Language::Zh, EarlierError) => "更早未解决的错误",
            (Language::Zh, Commands) => "执行的命令",
            (Language::Zh, Errors) => "遇到的错误",
            (Language::Zh, Counts) => "已压缩",
            (Language::Zh, Truncated) => "早期消息（截断）",
            (Language::Zh, PreservedDetails) => "保留的细节",
            (Language::Zh, UserMessages) => "用户的原始消息",
            (Language::Zh, Edited) => "已修改",
            (Language::Zh, Tools) => "工具",
            (Language::Zh, Code) => "代码",
        }
    }

    /// The counts line: "24 messages replaced: 12 user, 11 assistant, 30 tool results".
    pub fn counts_line(
        self,
        total: usize,
        user: usize,
        assistant: usize,
        results: usize,
    ) -> String {
        match self {
            Language::En => format!(
                "{total} message{} replaced: {user} user, {assistant} assistant, {results} tool result{}",
                plural(total),
                plural(results)
            ),
            Language::Zh => format!(
                "已压缩 {total} 条消息，其中用户 {user} 条，助手 {assistant} 条，工具结果 {results} 条"
            ),
        }
    }

    /// The text between a label and its content (`": "` or `"："`).
    pub fn colon(self) -> &'static str {
        match self {
            Language::En => ": ",
            Language::Zh => "：",
        }
    }

    /// The separator between list items on one line.
    pub fn list_sep(self) -> &'static str {
        match self {
            Language::En => ", ",
            Language::Zh => "，",
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Whether `c` is a Han ideograph (CJK Unified Ideographs, extensions, compatibility).
pub(crate) fn is_han(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

/// Hiragana and katakana.
fn is_kana(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F)
}

/// Letter counts of a message's prose.
#[derive(Default, Clone, Copy, Debug)]
struct ProseCounts {
    han: usize,
    kana: usize,
    letters: usize,
}

impl ProseCounts {
    fn votes(&self) -> bool {
        self.han >= MIN_HAN || self.letters + self.kana >= MIN_LETTERS
    }

    fn is_zh(&self) -> bool {
        let total = (self.han + self.letters + self.kana) as f64;
        total > 0.0 && self.han as f64 >= MESSAGE_HAN_SHARE * total && self.kana * 2 <= self.han
    }
}

/// Counts letters outside code spans, fenced blocks and `<tags>`, in one pass, no allocation.
struct ProseScanner {
    counts: ProseCounts,
    backticks: usize,
    in_fence: bool,
    in_inline: bool,
    in_tag: bool,
    prev: char,
}

impl ProseScanner {
    fn new() -> Self {
        ProseScanner {
            counts: ProseCounts::default(),
            backticks: 0,
            in_fence: false,
            in_inline: false,
            in_tag: false,
            prev: '\n',
        }
    }

    fn feed(&mut self, text: Text<'_>) {
        for c in text.chars() {
            self.push(c);
        }
        self.flush_backticks();
        self.in_inline = false;
        self.in_tag = false;
        self.prev = '\n';
    }

    fn flush_backticks(&mut self) {
        match self.backticks {
            0 => {}
            1 | 2 if !self.in_fence => self.in_inline = !self.in_inline,
            1 | 2 => {}
            _ => {
                self.in_fence = !self.in_fence;
                self.in_inline = false;
            }
        }
        self.backticks = 0;
    }

    #[inline]
    fn push(&mut self, c: char) {
        if c == '`' {
            self.backticks += 1;
            self.prev = c;
            return;
        }
        self.flush_backticks();
        if c == '\n' {
            self.in_inline = false;
            self.in_tag = false;
        } else if self.in_tag {
            if c == '>' {
                self.in_tag = false;
            }
        } else if !self.in_fence && !self.in_inline {
            if c == '<' {
                // A tag starts only as `<x` or `</`; the letter after `<` is counted as
                // part of the tag, a harmless loss of one letter when it is not one.
                self.in_tag = true;
            } else if is_han(c) {
                self.counts.han += 1;
            } else if is_kana(c) {
                self.counts.kana += 1;
            } else if c.is_alphabetic() {
                self.counts.letters += 1;
            }
        }
        if self.in_tag && self.prev == '<' && !(c.is_ascii_alphabetic() || c == '/') {
            // `a < b`: not a tag after all.
            self.in_tag = false;
        }
        self.prev = c;
    }
}

/// Whether a message's prose is Chinese, or `None` when it has too little prose to vote.
pub fn message_is_zh(message: &Message<'_>) -> Option<bool> {
    if !matches!(message.role, Role::User | Role::Assistant) {
        return None;
    }
    let mut scanner = ProseScanner::new();
    for block in message.blocks.iter() {
        if matches!(block.kind, BlockKind::Text | BlockKind::Refusal) {
            for piece in &block.texts {
                scanner.feed(piece.text());
            }
        }
    }
    let counts = scanner.counts;
    counts.votes().then(|| counts.is_zh())
}

/// The language of the user's and assistant's prose (tool output and thinking are ignored):
/// Chinese when at least a quarter of the messages with prose are mostly Han, else English.
pub fn detect_language(messages: &[Message<'_>]) -> Language {
    let (mut zh, mut voters) = (0usize, 0usize);
    for m in messages {
        if let Some(is_zh) = message_is_zh(m) {
            voters += 1;
            zh += usize::from(is_zh);
        }
    }
    if voters > 0 && zh as f64 >= CONVERSATION_ZH_SHARE * voters as f64 {
        Language::Zh
    } else {
        Language::En
    }
}

/// The language of one text (for a summary or instructions given without a conversation).
pub fn detect_text_language(text: &str) -> Language {
    let mut scanner = ProseScanner::new();
    scanner.feed(Text::Utf8(text));
    if scanner.counts.votes() && scanner.counts.is_zh() {
        Language::Zh
    } else {
        Language::En
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Message, Role};

    #[test]
    fn english_and_chinese() {
        let en = [
            Message::text(Role::User, "Please fix the failing test in billing/tax.py"),
            Message::text(Role::Assistant, "I fixed the rounding error."),
        ];
        assert_eq!(detect_language(&en), Language::En);
        let zh = [
            Message::text(Role::User, "请帮我修复 billing/tax.py 里失败的测试"),
            Message::text(
                Role::Assistant,
                "I fixed the rounding error in `round_half_up`.",
            ),
        ];
        assert_eq!(detect_language(&zh), Language::Zh);
    }

    #[test]
    fn code_and_tags_do_not_vote() {
        // Chinese prose with lots of inline code and a fenced block stays Chinese.
        let text = "修改 `useEffect` 和 `visibilitychange` 的处理：\n```ts\nconst handler = () => { scrollerRef.current.scrollTop = saved; };\n```\n完成了。";
        let m = [Message::text(Role::User, text)];
        assert_eq!(detect_language(&m), Language::Zh);
        // English harness wrappers and a pasted trace do not outvote several Chinese requests.
        let msgs = [
            Message::text(Role::User, "<local-command-caveat>Caveat: The messages below were generated by the user</local-command-caveat>"),
            Message::text(Role::User, "TypeError: Cannot read properties of null (reading 'clear')\n    at Object.current (http://localhost:5173/src/hooks/useSessionStream.ts:1744:40)"),
            Message::text(Role::User, "回到原来的这个bug的分支"),
            Message::text(Role::User, "这个问题又出现了"),
            Message::text(Role::Assistant, "The error happens during cleanup. Let me look at resetState."),
            Message::text(Role::Assistant, "已切换回 `fix/web-websocket-reconnect-storm` 分支。"),
        ];
        assert_eq!(detect_language(&msgs), Language::Zh);
    }

    #[test]
    fn tool_output_and_thinking_are_ignored() {
        let msgs = [
            Message::text(Role::User, "List the files, please."),
            Message::new(
                Role::Assistant,
                vec![
                    Block::thinking("我应该列出文件。这是中文的思考。"),
                    Block::tool_call(Some("a"), "bash", "{\"cmd\":\"ls\"}"),
                ],
            ),
            Message::new(
                Role::Tool,
                vec![Block::tool_result(
                    Some("a"),
                    "中文文件名.txt 另一个中文文件.md 第三个文件",
                )],
            ),
        ];
        assert_eq!(detect_language(&msgs), Language::En);
    }

    #[test]
    fn japanese_is_not_chinese_and_empty_is_english() {
        let m = [Message::text(
            Role::User,
            "このファイルを修正してください。テストが失敗しています。",
        )];
        assert_eq!(detect_language(&m), Language::En);
        assert_eq!(detect_language(&[]), Language::En);
        assert_eq!(
            detect_language(&[Message::text(Role::User, "")]),
            Language::En
        );
    }

    #[test]
    fn wide_layouts_agree() {
        let s = "请修复这个错误 🙂 please";
        let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let m = [Message::new(
            Role::User,
            vec![Block::text(crate::message::Piece::Borrowed(Text::Ucs4(
                &ucs4,
            )))],
        )];
        assert_eq!(detect_language(&m), Language::Zh);
    }

    #[test]
    fn labels_and_parse() {
        assert_eq!(Language::Zh.label(Label::Topics), "讨论主题");
        assert_eq!(Language::En.label(Label::Files), "Files touched");
        assert_eq!(Language::parse("zh-CN"), Some(Language::Zh));
        assert_eq!(Language::parse("EN"), Some(Language::En));
        assert_eq!(Language::parse("fr"), None);
        assert_eq!(
            Language::En.counts_line(24, 12, 12, 1),
            "24 messages replaced: 12 user, 12 assistant, 1 tool result"
        );
        assert!(Language::Zh.counts_line(3, 1, 2, 0).contains("用户 1 条"));
        assert_eq!(detect_text_language("这是一个中文摘要。"), Language::Zh);
    }
}
