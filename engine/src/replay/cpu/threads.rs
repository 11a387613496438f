//! The CPU replay's threads: a session owns one rayon pool of `n` threads and
//! splits every part of a batch over it — the GEMM's panels, and the rows of
//! gathers, elementwise chains and scatters — not only the GEMM. Work below a
//! size threshold runs on the calling thread, where a fork–join would cost
//! more than it saves.

use std::ops::Range;

/// GEMM flops below which a product stays on one thread: about 13 µs at
/// 150 GFLOP/s, several times the cost of waking the pool.
pub const MIN_PARALLEL_FLOPS: usize = 1 << 21;

/// Floats touched by a row step (copies, elementwise maps) below which it
/// stays on one thread: about 5–10 µs of memory-bound work.
pub const MIN_PARALLEL_FLOATS: usize = 1 << 14;

/// A fixed set of worker threads.
pub struct Threads {
    n: usize,
    pool: Option<rayon::ThreadPool>,
    min_flops: usize,
    min_floats: usize,
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Threads({})", self.n)
    }
}

impl Threads {
    /// `n` threads (`n ≤ 1`: one; steps then run on the calling thread).
    ///
    /// # Panics
    /// If the operating system refuses to start the pool's threads.
    pub fn new(n: usize) -> Threads {
        Threads::try_new(n).expect("the OS starts the replay's worker threads")
    }

    /// `n` threads, or the error of starting them.
    pub fn try_new(n: usize) -> Result<Threads, rayon::ThreadPoolBuildError> {
        let n = n.max(1);
        // A pool even for one thread: rayon code run through `install` (the
        // same-type DAG's search) then uses exactly the session's threads.
        let pool = Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("replay-{i}"))
                .build()?,
        );
        Ok(Threads {
            n,
            pool,
            min_flops: MIN_PARALLEL_FLOPS,
            min_floats: MIN_PARALLEL_FLOATS,
        })
    }

    /// The same threads with another parallel threshold (tests use 0 to
    /// exercise the parallel paths on small shapes).
    pub fn with_min_flops(mut self, min_flops: usize) -> Threads {
        self.min_flops = min_flops;
        self.min_floats = min_flops;
        self
    }

    /// Threads in the set.
    pub fn count(&self) -> usize {
        self.n
    }

    /// Threads worth using for `work` (flops, or floats moved).
    pub fn count_for(&self, work: usize) -> usize {
        if work < self.min_flops { 1 } else { self.n }
    }

    /// Runs `f` on `t` contiguous, near-equal chunks of `0..items` in
    /// parallel (the calling thread waits). `t ≤ 1` runs inline.
    pub fn split(&self, items: usize, t: usize, f: impl Fn(Range<usize>) + Sync) {
        let t = t.min(items).max(1);
        match &self.pool {
            Some(pool) if t > 1 => pool.scope(|s| {
                let f = &f;
                for c in 0..t {
                    let range = items * c / t..items * (c + 1) / t;
                    s.spawn(move |_| f(range));
                }
            }),
            _ => f(0..items),
        }
    }

    /// Splits the rows `0..rows` of a step touching `floats_per_row` each.
    pub fn rows(&self, rows: usize, floats_per_row: usize, f: impl Fn(Range<usize>) + Sync) {
        let t = if rows * floats_per_row < self.min_floats {
            1
        } else {
            self.n
        };
        self.split(rows, t, f);
    }

    /// Runs `f` inside the pool, so rayon's parallel iterators in it use
    /// these threads (and only these).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// A raw pointer that may cross threads: for steps whose threads write
/// disjoint parts of one buffer (rows of records, node slots of the store).
/// Every use states why the parts are disjoint.
#[derive(Clone, Copy, Debug)]
pub struct SharedMut<T>(pub *mut T);

// SAFETY: see the type's docs: users only write disjoint elements.
unsafe impl<T> Send for SharedMut<T> {}
unsafe impl<T> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// The pointer (a method, so closures capture the whole `SharedMut`).
    pub fn get(self) -> *mut T {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn split_covers_every_item_once() {
        for n in [1, 2, 3] {
            let th = Threads::new(n);
            for items in [0, 1, 5, 64] {
                let seen: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
                th.split(items, n, |r| {
                    for i in r {
                        seen[i].fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
            }
        }
    }
}
