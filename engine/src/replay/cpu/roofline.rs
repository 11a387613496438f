//! The roofline of a CPU run: how close the whole run comes to doing only its
//! GEMMs. Every shared-weight product a run performs is logged as an `(M, N,
//! K)` shape; [`measure`] then times each distinct shape alone — same kernel,
//! same threads, weights and activations warm — and sums `count × time`. That
//! is the run's *GEMM-only time* on this machine, measured in the same
//! process: a run that took `t` is at `gemm_only / t` of its GEMM peak
//! (`docs/benchmarks.md` describes the method).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::gemm::{ASeg, COut, GemmScratch, Init, PackedB, gemm};
use super::threads::Threads;

/// The GEMM shapes of one run: `(M, N, K)` → calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GemmLog {
    calls: BTreeMap<(usize, usize, usize), u64>,
}

impl GemmLog {
    /// Records one call.
    pub fn add(&mut self, m: usize, n: usize, k: usize) {
        *self.calls.entry((m, n, k)).or_default() += 1;
    }

    /// Forgets every call (keeps nothing allocated beyond the map's nodes).
    pub fn clear(&mut self) {
        self.calls.clear();
    }

    /// Flops of the logged calls.
    pub fn flops(&self) -> u64 {
        self.calls
            .iter()
            .map(|(&(m, n, k), &c)| 2 * (m * n * k) as u64 * c)
            .sum()
    }

    /// Distinct shapes with their call counts.
    pub fn shapes(&self) -> impl Iterator<Item = ((usize, usize, usize), u64)> + '_ {
        self.calls.iter().map(|(&s, &c)| (s, c))
    }
}

/// The roofline of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Roofline {
    /// Shared-weight GEMM flops of the run.
    pub gemm_flops: u64,
    /// Distinct `(M, N, K)` shapes.
    pub shapes: usize,
    /// The run's GEMMs timed alone (seconds, sum of count × median time).
    pub gemm_only_s: f64,
    /// The same in process CPU time (sum of count × mean CPU time per call;
    /// robust where other processes share the cores).
    pub gemm_only_cpu_s: Option<f64>,
    /// `gemm_flops / gemm_only_s`: the GEMM rate this machine reaches on the
    /// run's own shapes (GFLOP/s).
    pub peak_gflops: f64,
    /// The best rate over the shapes (GFLOP/s): the large-M ceiling.
    pub best_shape_gflops: f64,
}

impl Roofline {
    /// Fraction of the GEMM peak a run of `run_s` (wall) seconds reaches.
    pub fn fraction(&self, run_s: f64) -> f64 {
        if run_s > 0.0 {
            self.gemm_only_s / run_s
        } else {
            0.0
        }
    }

    /// The same in CPU time: `gemm_only_cpu_s / run_cpu_s`.
    pub fn fraction_cpu(&self, run_cpu_s: f64) -> Option<f64> {
        let g = self.gemm_only_cpu_s?;
        (run_cpu_s > 0.0).then(|| g / run_cpu_s)
    }
}

/// Times every shape of `log` alone on `threads`: each shape is run until
/// at least `min_s` seconds have passed (at least 3 times), and the median
/// call time is taken.
pub fn measure(log: &GemmLog, threads: &Threads, min_s: f64) -> Roofline {
    let mut gemm_only_s = 0.0;
    let mut gemm_only_cpu_s = Some(0.0);
    let mut best: f64 = 0.0;
    let mut scratch = GemmScratch::default();
    for ((m, n, k), count) in log.shapes() {
        let w = PackedB::new(n, k, |i, p| ((i * 7 + p * 3) % 13) as f32 * 0.01, None);
        let a = vec![0.5f32; m * k];
        let mut c = vec![0.0f32; m * n];
        let mut times = Vec::new();
        let start = Instant::now();
        let cpu0 = crate::replay::usage::now();
        while times.len() < 3 || (start.elapsed().as_secs_f64() < min_s && times.len() < 10_000) {
            let t = Instant::now();
            let seg = [ASeg::new(&a, 0, k, k, m)];
            gemm(
                threads,
                m,
                &seg,
                &w,
                COut::new(&mut c, 0, n, m, n),
                Init::Overwrite,
                &mut scratch,
            );
            times.push(t.elapsed().as_secs_f64());
        }
        let cpu = crate::replay::usage::since(cpu0, crate::replay::usage::now());
        gemm_only_cpu_s = match (gemm_only_cpu_s, cpu) {
            (Some(acc), Some(u)) => Some(acc + u.cpu_s / times.len() as f64 * count as f64),
            _ => None,
        };
        times.sort_by(f64::total_cmp);
        let per_call = times[times.len() / 2];
        gemm_only_s += per_call * count as f64;
        best = best.max(2.0 * (m * n * k) as f64 / per_call.max(1e-12) / 1e9);
    }
    let gemm_flops = log.flops();
    Roofline {
        gemm_flops,
        shapes: log.calls.len(),
        gemm_only_s,
        gemm_only_cpu_s,
        peak_gflops: if gemm_only_s > 0.0 {
            gemm_flops as f64 / gemm_only_s / 1e9
        } else {
            0.0
        },
        best_shape_gflops: best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_counts_calls_and_flops() {
        let mut l = GemmLog::default();
        l.add(2, 3, 4);
        l.add(2, 3, 4);
        l.add(1, 1, 1);
        assert_eq!(l.flops(), 2 * 24 * 2 + 2);
        assert_eq!(l.shapes().count(), 2);
        let r = measure(&l, &Threads::new(1), 0.0);
        assert_eq!(r.shapes, 2);
        assert!(r.gemm_only_s > 0.0 && r.peak_gflops > 0.0);
    }
}
