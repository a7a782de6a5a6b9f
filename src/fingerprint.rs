//! Content fingerprints: the 64-bit keys of the count cache ([`crate::state`] says why a
//! message is keyed by its content). [`mix`] is the one hash step, shared by the fingerprints of
//! views built in Rust ([`fingerprint_of`]) and the Python boundary's walk of a message as plain
//! data (`src/python/fingerprint.rs`), which must mix the same way.

use crate::message::Message;

/// Mix one value into a fingerprint (splitmix64 finaliser over the running state).
#[inline]
pub fn mix(fp: u64, v: u64) -> u64 {
    let mut z = (fp ^ v).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A fingerprint of bytes, for text the boundary built itself (no Python hash to reuse).
pub fn hash_bytes(b: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

/// Fingerprint of a view built in Rust (pure-Rust callers and tests): hashes the texts.
pub fn fingerprint_of(m: &Message<'_>) -> u64 {
    let mut fp = mix(0, m.role as u64);
    for b in m.blocks.iter() {
        fp = mix(
            fp,
            b.kind as u64 | (u64::from(b.images) << 8) | (u64::from(b.is_error) << 40),
        );
        for t in b.id.iter().chain(b.name.iter()) {
            fp = mix(fp, hash_bytes(t.as_bytes()));
        }
        for p in &b.texts {
            fp = mix(fp, hash_bytes(p.text().to_utf8().as_bytes()));
        }
    }
    mix(fp, u64::from(m.empty))
}
