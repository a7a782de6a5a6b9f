//! Token counts of a text: the fast estimate and tiktoken's exact encodings.

use crate::text::Text;
pub use crate::tokens::exact::Encoding;

/// The built-in estimate of a text's tokens (no tables to load; errs high on purpose: an
/// overestimate compacts a little early, an underestimate fails the request). CJK text counts
/// about one token a character.
///
/// ```
/// use context_compactor::estimate_tokens;
/// assert_eq!(estimate_tokens(""), 0);
/// assert!(estimate_tokens("hello world") >= 2);
/// assert!(estimate_tokens("上下文压缩") >= 5);
/// ```
pub fn estimate_tokens(text: &str) -> usize {
    crate::tokens::estimate::estimate(Text::Utf8(text))
}

/// The exact token count of a text in a tiktoken encoding: `encode_ordinary`'s length (special
/// tokens counted as text). The encoding's tables load on first use (tens of milliseconds).
///
/// ```
/// use context_compactor::{count_tokens, Encoding};
/// assert_eq!(count_tokens("hello world", Encoding::O200kBase), 2);
/// assert_eq!(count_tokens("hello world", Encoding::Cl100kBase), 2);
/// ```
pub fn count_tokens(text: &str, encoding: Encoding) -> usize {
    crate::tokens::exact::count(encoding, text)
}
