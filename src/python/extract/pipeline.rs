//! Reading while counting: blocks of messages already read are counted on the pool while the
//! next ones are read (see [`Extractor::counting`]).

use super::Extractor;
use crate::message::Message;
use crate::tokens::counter::{message_tokens, Framing, Tokenizer};
use pyo3::prelude::*;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

impl<'py> Extractor<'py> {
    /// Read the messages in blocks of [`PIPELINE_CHUNK`] on this thread, each block counted on
    /// the pool as soon as it is read.
    pub(super) fn messages_counted(
        &mut self,
        items: &[Bound<'py, PyAny>],
        tok: Tokenizer,
        framing: Framing,
        pool: &rayon::ThreadPool,
    ) -> PyResult<(Vec<Message<'static>>, Vec<usize>)> {
        let py = self.py;
        let blocks = items.len().div_ceil(PIPELINE_CHUNK);
        let counted: Vec<OnceLock<Vec<usize>>> = (0..blocks).map(|_| OnceLock::new()).collect();
        // Blocks counted so far, to wait for the last ones with the GIL released.
        let finished = (Mutex::new(0usize), Condvar::new());
        let mut read: Vec<Arc<Vec<Message<'static>>>> = Vec::with_capacity(blocks);
        // The scope returns once every block is counted (also after an error, before the
        // strings the blocks borrow can be released).
        pool.in_place_scope(|scope| {
            for (k, part) in items.chunks(PIPELINE_CHUNK).enumerate() {
                let mut block = Vec::with_capacity(part.len());
                for (j, m) in part.iter().enumerate() {
                    block.push(self.message(m, k * PIPELINE_CHUNK + j)?);
                }
                let block = Arc::new(block);
                read.push(Arc::clone(&block));
                let (slot, finished) = (&counted[k], &finished);
                scope.spawn(move |_| {
                    let counts = block.iter().map(|m| message_tokens(tok, m, framing));
                    let _ = slot.set(counts.collect());
                    *finished.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                    finished.1.notify_one();
                });
            }
            // Everything is read: wait for the counting without holding the GIL.
            py.detach(|| {
                let mut done = finished.0.lock().unwrap_or_else(|e| e.into_inner());
                while *done < blocks {
                    done = finished.1.wait(done).unwrap_or_else(|e| e.into_inner());
                }
            });
            Ok::<_, PyErr>(())
        })?;
        let mut msgs = Vec::with_capacity(items.len());
        let mut counts = Vec::with_capacity(items.len());
        for (block, slot) in read.into_iter().zip(counted) {
            counts.extend(slot.into_inner().unwrap_or_default());
            msgs.extend(Arc::try_unwrap(block).unwrap_or_else(|shared| (*shared).clone()));
        }
        Ok((msgs, counts))
    }
}

/// Messages per block of [`Extractor::messages_counted`]: large enough that handing a block to
/// the pool (~1 µs) is lost in counting it, small enough that little is left to count after the
/// last message is read.
pub(super) const PIPELINE_CHUNK: usize = 128;
/// Below this, reading then counting in one go is as fast (and needs no pool).
pub(super) const PIPELINE_MIN_MESSAGES: usize = 4 * PIPELINE_CHUNK;
