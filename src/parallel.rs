//! The one rayon pool of the library, safe across `fork()`.
//!
//! Design note: rayon's global pool is shared with the host application and, after `fork()`,
//! exists in the child's memory without its threads (a job sent to it waits forever). So the
//! library builds its own pool on first parallel use, remembers the pid that built it, and a
//! forked child runs everything sequentially. Work goes to the pool only above a size where the
//! hand-off (~10 µs a batch, measured in `tokens/exact.rs`) is lost in the work.

use rayon::prelude::*;
use std::sync::OnceLock;

/// Our thread pool, or `None` in a process forked from the one that built it (its threads
/// do not exist there: using it would wait forever).
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<(u32, rayon::ThreadPool)>> = OnceLock::new();
    let (pid, pool) = POOL
        .get_or_init(|| {
            let pool = rayon::ThreadPoolBuilder::new()
                .thread_name(|i| format!("context-compactor-{i}"))
                .build()
                .ok()?;
            Some((std::process::id(), pool))
        })
        .as_ref()?;
    (*pid == std::process::id()).then_some(pool)
}

/// Text (in bytes) from which counting many messages goes to the pool.
pub const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// `items.iter().map(f)`, on the pool when `weight` (the bytes of text the work reads) is large
/// enough and there is more than one item.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    weight: usize,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    if items.len() > 1 && weight >= PARALLEL_MIN_BYTES {
        if let Some(pool) = pool() {
            let per_task = (16 * 1024 * items.len() / weight).max(1);
            return pool.install(|| items.par_iter().with_min_len(per_task).map(&f).collect());
        }
    }
    items.iter().map(f).collect()
}
