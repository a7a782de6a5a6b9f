//! Reading an LLM reply: the summary inside it ([`extract_summary`]: `<summary>` tags, with
//! `<analysis>` and `<think>` blocks removed), capping it at a token count at a sentence end
//! ([`cap_to_tokens`]), and telling an error message or a refusal from a summary
//! ([`looks_like_error`], with its English and Chinese phrase tables). Every summarizer path
//! (the SDK wrappers, the standard-library HTTP client, a user's own callable) goes through
//! these, so a reply is read the same way whatever produced it.

use std::borrow::Cow;

/// Byte position of `needle` (ASCII, lower case) in `lower` searching backwards.
fn rfind_before(lower: &str, needle: &str, before: usize) -> Option<usize> {
    lower[..before].rfind(needle)
}

/// Removes `<analysis>…</analysis>` blocks (an unclosed one runs to the end).
fn strip_analysis(s: &str) -> Cow<'_, str> {
    let lower = s.to_ascii_lowercase();
    if !lower.contains("<analysis>") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    while let Some(open) = lower[at..].find("<analysis>").map(|i| i + at) {
        out.push_str(&s[at..open]);
        match lower[open..].find("</analysis>") {
            Some(close) => at = open + close + "</analysis>".len(),
            None => {
                at = s.len();
                break;
            }
        }
    }
    out.push_str(&s[at..]);
    Cow::Owned(out)
}

/// `reply` without a reasoning model's thinking: the `<think>…</think>` blocks it opens with
/// (any number, tags matched case-insensitively; one never closed runs to the end, so a reply
/// cut off while thinking is empty), or, when the reply holds a `</think>` with no `<think>` and
/// no `<summary>` before it, everything up to it (DeepSeek-R1 and QwQ chat templates put the
/// `<think>` in the prompt, so servers without a reasoning parser, e.g. vLLM or llama.cpp,
/// return only the closing tag). A `<think>` later in the text is the summary's own words and
/// is kept.
pub fn strip_think(reply: &str) -> &str {
    const OPEN: &[u8] = b"<think>";
    const CLOSE: &[u8] = b"</think>";
    let b = reply.as_bytes();
    let find = |from: usize, needle: &[u8]| {
        b[from..]
            .windows(needle.len())
            .position(|w| w.eq_ignore_ascii_case(needle))
            .map(|i| i + from)
    };
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if reply[i..].starts_with('\u{feff}') {
            i += '\u{feff}'.len_utf8();
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        i
    };
    let mut at = skip_ws(0);
    if b.len() - at >= OPEN.len() && b[at..at + OPEN.len()].eq_ignore_ascii_case(OPEN) {
        while b.len() - at >= OPEN.len() && b[at..at + OPEN.len()].eq_ignore_ascii_case(OPEN) {
            match find(at + OPEN.len(), CLOSE) {
                Some(close) => at = skip_ws(close + CLOSE.len()),
                None => return "",
            }
        }
        return &reply[at..];
    }
    if let Some(close) = find(0, CLOSE) {
        if find(0, OPEN).is_none_or(|o| o > close)
            && find(0, b"<summary>").is_none_or(|o| o > close)
        {
            return &reply[skip_ws(close + CLOSE.len())..];
        }
    }
    reply
}

/// The summary inside an LLM reply: the content of the last complete `<summary>…</summary>`
/// (tags matched case-insensitively), else the text after a `<summary>` that is never closed,
/// else the text before a lone `</summary>`, else the whole reply; the reply's leading
/// thinking ([`strip_think`]) and `<analysis>…</analysis>` blocks are removed and the result
/// trimmed. The flag says whether a summary tag was found.
pub fn extract_summary(reply: &str) -> (String, bool) {
    const OPEN: &str = "<summary>";
    const CLOSE: &str = "</summary>";
    let reply = strip_think(reply);
    let lower = reply.to_ascii_lowercase();
    let (content, found) = match lower.rfind(CLOSE) {
        Some(close) => match rfind_before(&lower, OPEN, close) {
            Some(open) => (&reply[open + OPEN.len()..close], true),
            None => (&reply[..close], true),
        },
        None => match lower.rfind(OPEN) {
            Some(open) => (&reply[open + OPEN.len()..], true),
            None => (reply, false),
        },
    };
    (strip_analysis(content).trim().to_owned(), found)
}

/// Byte offsets at which `text` may be cut after a sentence: after `.`, `!`, `?` followed by
/// whitespace or the end, after `。`, `！`, `？`, `；`, and before each newline.
fn sentence_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        match c {
            '\n' => ends.push(i),
            '.' | '!' | '?' if it.peek().is_none_or(|&(_, n)| n.is_whitespace()) => {
                ends.push(i + 1)
            }
            '。' | '！' | '？' | '；' => ends.push(i + c.len_utf8()),
            _ => {}
        }
    }
    ends
}

/// `text` cut to at most `max_tokens` (as `count` counts them) at the last sentence end that
/// fits (`.`, `!`, `?` before whitespace, `。`, `！`, `？`, `；`, a newline); when no sentence
/// fits, at the last word (or character) that does. Returns the text and whether it was cut.
/// Assumes `count` grows with the prefix; O(log n) calls of `count`.
pub fn cap_to_tokens(
    text: &str,
    max_tokens: usize,
    count: impl Fn(&str) -> usize,
) -> (String, bool) {
    if count(text) <= max_tokens {
        return (text.to_owned(), false);
    }
    let fits = |end: usize| count(text[..end].trim_end()) <= max_tokens;
    // Largest candidate index whose prefix fits (candidates ascending).
    let best = |cands: &[usize]| -> Option<usize> {
        let (mut lo, mut hi) = (0usize, cands.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if fits(cands[mid]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1).map(|i| cands[i])
    };
    let ends = sentence_ends(text);
    let end = best(&ends)
        .filter(|&e| !text[..e].trim().is_empty())
        .or_else(|| {
            let words: Vec<usize> = text
                .char_indices()
                .filter(|&(_, c)| c.is_whitespace())
                .map(|(i, _)| i)
                .collect();
            best(&words).filter(|&e| !text[..e].trim().is_empty())
        })
        .or_else(|| {
            let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).skip(1).collect();
            best(&chars)
        })
        .unwrap_or(0);
    (text[..end].trim_end().to_owned(), true)
}

/// How a reply that is an error message, a stack trace, an HTTP error body or a refusal
/// begins (lower case; matched at the start of the trimmed reply).
const ERROR_STARTS: &[&str] = &[
    "error:",
    "error code",
    "error -",
    "error occurred",
    "an error occurred",
    "exception:",
    "traceback (most recent call last)",
    "internal server error",
    "bad gateway",
    "service unavailable",
    "gateway timeout",
    "too many requests",
    "rate limit",
    "rate_limit",
    "request failed",
    "request timed out",
    "overloaded",
    "the server is overloaded",
    "unauthorized",
    "forbidden",
    "access denied",
    "<!doctype html",
    "<html",
    "http/1.",
    "http error",
    "status code",
    "upstream connect error",
    "错误：",
    "错误:",
    "错误码",
    "请求失败",
    "服务器错误",
    "服务繁忙",
    "系统繁忙",
];

/// Phrases that mark an error anywhere near the start of a tagless reply.
const ERROR_PHRASES: &[&str] = &[
    "traceback (most recent call last)",
    "internal server error",
    "rate limit exceeded",
    "rate_limit_error",
    "overloaded_error",
    "\"type\":\"error\"",
    "\"type\": \"error\"",
    "insufficient_quota",
    "context_length_exceeded",
    "maximum context length",
];

/// How a refusal begins (only looked for in short replies).
const REFUSAL_STARTS: &[&str] = &[
    "i'm sorry",
    "i’m sorry",
    "i am sorry",
    "sorry,",
    "sorry but",
    "i apologize",
    "i cannot",
    "i can't",
    "i can’t",
    "i'm unable",
    "i’m unable",
    "i am unable",
    "i'm not able",
    "i am not able",
    "i won't",
    "i will not",
    "unfortunately, i",
    "as an ai",
    "抱歉",
    "很抱歉",
    "对不起",
    "我无法",
    "我不能",
    "作为一个ai",
    "作为ai",
    "作为人工智能",
];

/// Replies longer than this are not taken for refusals (a long tagless text is a summary).
const REFUSAL_MAX_CHARS: usize = 1500;

/// Whether a summarizer reply is an error or a refusal rather than a summary: it has no
/// `<summary>` tag and is empty, starts like an error message, a Python traceback, an HTTP
/// error page or JSON error body (`{"error": …}`, `{"type": "error", …}`), or (when short)
/// a refusal, in English or Chinese. A reasoning model's leading thinking is not read
/// ([`strip_think`]): a reply that is only thinking is empty.
pub fn looks_like_error(reply: &str) -> bool {
    let reply = strip_think(reply);
    let t = reply.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.trim_end().is_empty() {
        return true;
    }
    if reply
        .as_bytes()
        .windows(9)
        .any(|w| w.eq_ignore_ascii_case(b"<summary>"))
    {
        return false;
    }
    let head_end = t.char_indices().nth(600).map_or(t.len(), |(i, _)| i);
    let head = t[..head_end].to_lowercase();
    if head.starts_with('{') || head.starts_with('[') {
        let h = head.replace(char::is_whitespace, "");
        if h.contains("\"error\"") || h.contains("\"type\":\"error\"") || h.contains("\"detail\"") {
            return true;
        }
    }
    if ERROR_STARTS.iter().any(|p| head.starts_with(p))
        || ERROR_PHRASES.iter().any(|p| head.contains(p))
    {
        return true;
    }
    // `429 Too Many Requests`, `503: Service Unavailable`, `HTTP 500`.
    let code = head.trim_start_matches("http").trim_start();
    if code.len() >= 3
        && code.as_bytes()[..3].iter().all(u8::is_ascii_digit)
        && matches!(code.as_bytes()[0], b'4' | b'5')
        && code.as_bytes().get(3).is_none_or(|b| !b.is_ascii_digit())
    {
        return true;
    }
    let short = t.len() <= REFUSAL_MAX_CHARS * 4 && t.chars().count() <= REFUSAL_MAX_CHARS;
    short && REFUSAL_STARTS.iter().any(|p| head.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extract_summary_variants() {
        assert_eq!(
            extract_summary("<analysis>thinking</analysis>\n<summary>\nThe gist.\n</summary>"),
            ("The gist.".into(), true)
        );
        assert_eq!(
            extract_summary("<summary>old</summary> then <SUMMARY>new</Summary> tail"),
            ("new".into(), true)
        );
        assert_eq!(
            extract_summary("intro <summary>cut off at the end"),
            ("cut off at the end".into(), true)
        );
        assert_eq!(
            extract_summary("no tags here"),
            ("no tags here".into(), false)
        );
        assert_eq!(
            extract_summary("<analysis>a</analysis>plain"),
            ("plain".into(), false)
        );
        assert_eq!(
            extract_summary("<analysis>never closed"),
            ("".into(), false)
        );
        assert_eq!(
            extract_summary("body only</summary>"),
            ("body only".into(), true)
        );
        assert_eq!(
            extract_summary("<summary>摘要：完成。</summary>"),
            ("摘要：完成。".into(), true)
        );
        assert_eq!(extract_summary(""), ("".into(), false));
    }

    #[test]
    fn think_is_stripped() {
        // Leading blocks, any case, several, with or without summary tags after them.
        assert_eq!(
            extract_summary("<think>\nLet me see. <summary>draft</summary>\n</think>\n<summary>The gist.</summary>"),
            ("The gist.".into(), true)
        );
        assert_eq!(
            extract_summary("  <THINK>a</Think><think>b</think>\n用户要求修复 tax.py。"),
            ("用户要求修复 tax.py。".into(), false)
        );
        // Cut off while thinking: nothing is left.
        assert_eq!(
            extract_summary("<think>still reasoning about"),
            ("".into(), false)
        );
        assert_eq!(strip_think("\u{feff} <think>x"), "");
        // A template-opened block: only its closing tag is in the reply.
        assert_eq!(
            extract_summary("reasoning first\n</think>\n\nThe summary."),
            ("The summary.".into(), false)
        );
        // The summary's own words are kept: a tag after the start, a closing tag inside a summary.
        assert_eq!(
            strip_think("Fixed the <think> tag parser."),
            "Fixed the <think> tag parser."
        );
        assert_eq!(
            extract_summary("<summary>Handled </think> in replies.</summary>"),
            ("Handled </think> in replies.".into(), true)
        );
        assert_eq!(
            strip_think("The parser reads <think>x</think> blocks."),
            "The parser reads <think>x</think> blocks."
        );
        assert_eq!(strip_think("no tags"), "no tags");
        // Errors and refusals behind thinking are still errors; thinking alone is empty.
        assert!(looks_like_error(
            "<think>The user wants a summary.</think>\nI'm sorry, I can't help."
        ));
        assert!(looks_like_error("<think>only thinking</think>\n"));
        assert!(!looks_like_error(
            "<think>ok</think>The user asked to fix billing/tax.py."
        ));
    }

    fn words(s: &str) -> usize {
        s.split_whitespace().count() + s.chars().filter(|c| !c.is_ascii()).count()
    }

    #[test]
    fn cap_at_sentences() {
        let t = "One two three. Four five six! Seven eight nine? Ten.";
        assert_eq!(cap_to_tokens(t, 100, words), (t.to_owned(), false));
        assert_eq!(
            cap_to_tokens(t, 7, words),
            ("One two three. Four five six!".into(), true)
        );
        assert_eq!(cap_to_tokens(t, 3, words), ("One two three.".into(), true));
        // No sentence fits: cut at a word.
        assert_eq!(cap_to_tokens(t, 2, words), ("One two".into(), true));
        assert_eq!(cap_to_tokens(t, 0, words), ("".into(), true));
        // Decimal points and `e.g.` inside a word are not sentence ends.
        let t = "Pi is 3.14 and e.g.x works. Next.";
        assert_eq!(cap_to_tokens(t, 6, words).0, "Pi is 3.14 and e.g.x works.");
        // Chinese punctuation and newlines.
        let zh = "第一句。第二句！第三句？\n第四行";
        assert_eq!(
            cap_to_tokens(zh, 9, words),
            ("第一句。第二句！".into(), true)
        );
        assert_eq!(
            cap_to_tokens("a b\nc d\ne f", 4, words),
            ("a b\nc d".into(), true)
        );
    }

    #[test]
    fn errors_and_refusals() {
        for e in [
            "",
            "  \n",
            "Error: 529 overloaded",
            "Traceback (most recent call last):\n  File \"x.py\", line 1",
            "{\"error\": {\"message\": \"Rate limit reached\", \"type\": \"rate_limit_error\"}}",
            "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}",
            "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>",
            "429 Too Many Requests",
            "HTTP 503 Service Unavailable",
            "I'm sorry, but I can't help with that.",
            "I cannot summarize this conversation.",
            "As an AI language model, I do not have access.",
            "抱歉，我无法完成这个请求。",
            "对不起，我不能处理。",
            "我无法访问该对话。",
            "Internal Server Error",
            "rate limit exceeded, retry later",
        ] {
            assert!(looks_like_error(e), "{e:?}");
        }
        for ok in [
            "<summary>I'm sorry to report the tests failed.</summary>",
            "The user asked to fix billing/tax.py. Error handling was refactored.",
            "Errors and fixes: a KeyError in tax.py was fixed.",
            "用户要求修复 tax.py 中的错误处理。",
            "2024 was the year the project started.",
        ] {
            assert!(!looks_like_error(ok), "{ok:?}");
        }
        // A long tagless text that opens apologetically is still a summary.
        let long = format!("I'm sorry for the length. {}", "Details. ".repeat(400));
        assert!(!looks_like_error(&long));
    }
}
