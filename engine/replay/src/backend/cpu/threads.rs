//! The CPU replay's threads: a session's `n` threads are the calling thread
//! and a [`Team`] of `n − 1` spinning workers; every part of a batch runs on
//! them — the GEMM's panels, and the rows of gathers, elementwise chains and
//! scatters — not only the GEMM. A batch whose weights are within
//! `exec::ROW_SPLIT_MAX_WEIGHT_BYTES` runs as one step, each thread taking
//! its share of the rows through the whole cell; larger ones split step by
//! step (`exec::split_by_rows`). Work below
//! a size threshold runs on the calling thread, where a fork–join would cost
//! more than it saves.

use std::ops::Range;

use super::team::Team;

/// GEMM flops below which a product stays on one thread: about 13 µs at
/// 150 GFLOP/s, several times the cost of waking the pool.
pub const MIN_PARALLEL_FLOPS: usize = 1 << 21;

/// Floats touched by a row step (copies, elementwise maps) below which it
/// stays on one thread: about 5–10 µs of memory-bound work.
pub const MIN_PARALLEL_FLOATS: usize = 1 << 14;

#[cfg(test)]
thread_local! {
    /// Tests lower the parallel thresholds of the threads made on this
    /// thread (sessions' threads included), so small batches split.
    pub(crate) static TEST_MIN_WORK: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// A fixed set of worker threads.
pub struct Threads {
    n: usize,
    team: Option<Team>,
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
    /// If the operating system refuses to start the worker threads.
    pub fn new(n: usize) -> Threads {
        Threads::try_new(n).expect("the OS starts the replay's worker threads")
    }

    /// `n` threads, or the error of starting them: the calling thread and a
    /// [`Team`] of `n − 1` spinning workers (none for one thread). The caller
    /// runs a share of every split step itself, so no more than `n` threads
    /// compete for the cores.
    pub fn try_new(n: usize) -> std::io::Result<Threads> {
        let n = n.max(1);
        let team = if n > 1 {
            Some(Team::new(n - 1, "replay")?)
        } else {
            None
        };
        #[cfg(test)]
        let (min_flops, min_floats) = TEST_MIN_WORK
            .with(std::cell::Cell::get)
            .map_or((MIN_PARALLEL_FLOPS, MIN_PARALLEL_FLOATS), |w| (w, w));
        #[cfg(not(test))]
        let (min_flops, min_floats) = (MIN_PARALLEL_FLOPS, MIN_PARALLEL_FLOATS);
        Ok(Threads {
            n,
            team,
            min_flops,
            min_floats,
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
    /// parallel, the first on the calling thread. `t ≤ 1` runs inline.
    pub fn split(&self, items: usize, t: usize, f: impl Fn(Range<usize>) + Sync) {
        self.split_indexed(items, t, |_, r| f(r));
    }

    /// [`split`](Self::split), telling `f` its chunk's index too (`0..t'`,
    /// `t'` the chunks really used): for work that needs per-thread scratch.
    pub fn split_indexed(&self, items: usize, t: usize, f: impl Fn(usize, Range<usize>) + Sync) {
        let t = t.min(items).min(self.n).max(1);
        let chunk = |c: usize| items * c / t..items * (c + 1) / t;
        match &self.team {
            Some(team) if t > 1 => team.run(t, &|c| f(c, chunk(c))),
            _ => f(0, 0..items),
        }
    }

    /// Splits the rows `0..rows` of a step touching `floats_per_row` each.
    pub fn rows(&self, rows: usize, floats_per_row: usize, f: impl Fn(Range<usize>) + Sync) {
        self.split(rows, self.rows_for(rows, floats_per_row), f);
    }

    /// Threads worth using for `rows` rows touching `floats_per_row` each.
    pub fn rows_for(&self, rows: usize, floats_per_row: usize) -> usize {
        if rows * floats_per_row < self.min_floats {
            1
        } else {
            self.n
        }
    }
}

/// A raw pointer that may cross threads: for steps whose threads write
/// disjoint parts of one buffer (rows of records, node slots of the store).
/// Every use states why the parts are disjoint.
#[derive(Debug)]
pub struct SharedMut<T>(pub *mut T);

// By hand: a raw pointer is `Copy` whatever it points to (the derive would
// ask `T: Copy`).
impl<T> Clone for SharedMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedMut<T> {}

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
