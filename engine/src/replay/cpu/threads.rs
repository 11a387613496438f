//! The CPU replay's threads: a session's `n` threads are the calling thread
//! and a [`Team`] of `n − 1` spinning workers; it splits every part of a
//! batch over them — the GEMM's panels, and the rows of
//! gathers, elementwise chains and scatters — not only the GEMM. Work below a
//! size threshold runs on the calling thread, where a fork–join would cost
//! more than it saves.

use std::ops::Range;

use super::team::Team;

/// GEMM flops below which a product stays on one thread: about 13 µs at
/// 150 GFLOP/s, several times the cost of waking the pool.
pub const MIN_PARALLEL_FLOPS: usize = 1 << 21;

/// Floats touched by a row step (copies, elementwise maps) below which it
/// stays on one thread: about 5–10 µs of memory-bound work.
pub const MIN_PARALLEL_FLOATS: usize = 1 << 14;

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
        Ok(Threads {
            n,
            team,
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
    /// parallel, the first on the calling thread. `t ≤ 1` runs inline.
    pub fn split(&self, items: usize, t: usize, f: impl Fn(Range<usize>) + Sync) {
        let t = t.min(items).min(self.n).max(1);
        let chunk = |c: usize| items * c / t..items * (c + 1) / t;
        match &self.team {
            Some(team) if t > 1 => team.run(t, &|c| f(chunk(c))),
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
