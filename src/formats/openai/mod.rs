//! Chat Completions in the core: messages with a role. Its rules are the ones the message-list
//! formats share (`crate::validate`), so what is its own here is its reader, written once for
//! both APIs over [`Source`](crate::formats::source::Source) (`read.rs`).

pub mod read;
