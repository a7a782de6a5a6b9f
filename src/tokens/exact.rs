//! Exact BPE token counts for OpenAI's encodings. (Provisional: not yet implemented.)

/// An exact encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    pub fn parse(name: &str) -> Option<Encoding> {
        match name {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }
}

/// Number of tokens of `text` (tiktoken's `encode_ordinary`).
pub fn count(_encoding: Encoding, text: &str) -> usize {
    crate::tokens::estimate::estimate_str(text)
}

/// [`count`] of many texts.
pub fn count_many(encoding: Encoding, texts: &[&str]) -> Vec<usize> {
    texts.iter().map(|t| count(encoding, t)).collect()
}
