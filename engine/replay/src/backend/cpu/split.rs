//! How a CPU run splits its work over the session's threads: a batch's rows
//! in chunks ([`chunk_rows`]), and the searches of the per-run same-type DAG
//! in parts ([`per_run_dag`]).

use super::threads::Threads;
use crate::sched::SameTypeDag;

/// Rows of a batch run at a time, per thread, at least. A batch's rows are
/// independent, and a large one (a tree batch's leaves: 4,800 rows at batch
/// 256) run whole had records far larger than the caches (96 MB at h512);
/// in chunks of 64 rows the records stay cached between a chunk's GEMMs and
/// row passes. Measured on tree-lstm, one thread: inference at batch 256
/// 10–11 % faster at h64 and h512 (64–256 rows alike, 32 slower), the
/// training backward at batch 64 4–6 % faster at h256/h512. Several threads
/// run chunks of `2 × rows × threads` (see [`chunk_rows`]). Batches and
/// kernels are still counted once per batch (what a device would launch).
/// Inference chunks of wide cells are longer: [`CpuPlan::chunk_rows`](super::plan::CpuPlan::chunk_rows).
pub(crate) const CHUNK_ROWS: usize = 64;

/// The longest inference chunk, per thread ([`CpuPlan::chunk_rows`](super::plan::CpuPlan::chunk_rows)).
pub(crate) const MAX_CHUNK_ROWS: usize = 4 * CHUNK_ROWS;

#[cfg(test)]
thread_local! {
    /// Tests shrink the chunks to split small batches (`None`: the plans'
    /// own sizes).
    pub(crate) static TEST_CHUNK_ROWS: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// Rows of a chunk on `threads`, for a role whose one-thread chunk is
/// `rows` (a plan's [`CpuPlan::chunk_rows`](super::plan::CpuPlan::chunk_rows), or [`CHUNK_ROWS`]; tests may
/// change it).
pub(crate) fn chunk_rows(threads: &Threads, rows: usize) -> usize {
    // Several threads split each step of a chunk, so a chunk holds twice
    // the rows per thread: tree-lstm b256 h512 `cavs`, two threads, 5
    // interleaved rounds: whole batches 166 ms, 64 rows a thread 150, 128
    // rows 147, 256 rows 155 (h64 and bilstm-tagger b256: 128 rows level or
    // better). With the rayon pool chunks were slower (a wake-up per step).
    // A wide cell's longer chunk is kept whole (never split finer than on
    // one thread).
    let scaled = |r: usize| {
        if threads.count() > 1 {
            2 * r * threads.count()
        } else {
            r
        }
    };
    #[cfg(test)]
    if let Some(r) = TEST_CHUNK_ROWS.with(std::cell::Cell::get) {
        return scaled(r);
    }
    scaled(CHUNK_ROWS).max(rows)
}

/// The same-type DAG a run's policy reads, built per run as the per-input
/// construction it is (forward, backward and op-level runs alike): exact when
/// `exact`, its searches split over the session's threads (one part per
/// thread; on one thread, inline), else edgeless
/// ([`SameTypeDag::without_edges`]).
pub(crate) fn per_run_dag(g: &crate::graph::Graph, exact: bool, threads: &Threads) -> SameTypeDag {
    if !exact {
        return SameTypeDag::without_edges(g);
    }
    let t = threads.count();
    if t <= 1 {
        return SameTypeDag::sequential(g);
    }
    SameTypeDag::with_parts(g, t, &|part| {
        threads.split(t, t, |parts| parts.for_each(part));
    })
}
