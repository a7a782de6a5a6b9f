//! The default token estimate. (Provisional rule, to be replaced by the fitted one.)

use crate::text::Text;

/// Estimated tokens of `text`, erring high.
pub fn estimate(text: Text<'_>) -> usize {
    let mut t = 0.0f64;
    for c in text.chars() {
        t += if (c as u32) >= 0x2E80 {
            1.0
        } else if c.is_whitespace() {
            0.25
        } else {
            0.3
        };
    }
    t.ceil() as usize
}

/// [`estimate`] of a Rust string.
pub fn estimate_str(s: &str) -> usize {
    estimate(Text::Utf8(s))
}
