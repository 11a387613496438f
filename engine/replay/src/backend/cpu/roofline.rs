//! The roofline of a CPU run: how close the whole run comes to doing only its
//! GEMMs. Every shared-weight product a run performs is logged as an `(M, N,
//! K)` shape; [`GemmOnly`] then executes exactly those products alone (same
//! kernel, same threads, one packed weight per `(N, K)`, operands warm), and
//! its time is the run's *GEMM-only time* on this machine. A run that took `t`
//! is at `gemm_only / t` of its GEMM peak.
//!
//! On a shared machine the GEMM rate itself moves by ±30 % within a minute,
//! so the two are measured in pairs: [`crate::measure::roofline`]
//! runs the trace and its GEMMs alone back to back, round after round (the
//! order alternating), and reports the median of the per-round ratios
//! (`docs/benchmarks.md` describes the method).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::gemm::{ASeg, COut, GemmScratch, Init, PackedB, gemm};
use super::threads::Threads;
use crate::run::median;
use crate::usage;

/// The shared-weight products of one run, in the order it ran them: each
/// call's rows and which weight it multiplied by (weights numbered in the
/// order the run first used them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GemmLog {
    /// `(M, weight)` per call.
    calls: Vec<(usize, u32)>,
    /// `(N, K)` of each weight.
    weights: Vec<(usize, usize)>,
    /// A weight's address → its number. Only identifies a weight within one
    /// run; never iterated, so the numbering is the run's order.
    ids: BTreeMap<usize, u32>,
}

impl GemmLog {
    /// Records one call: `m` rows times the packed weight `b`.
    pub fn add(&mut self, m: usize, b: &PackedB) {
        let next = self.weights.len() as u32;
        let id = *self.ids.entry(b as *const PackedB as usize).or_insert(next);
        if id == next {
            self.weights.push((b.n(), b.k()));
        }
        self.calls.push((m, id));
    }

    /// Forgets every call (keeps the buffers).
    pub fn clear(&mut self) {
        self.calls.clear();
        self.weights.clear();
        self.ids.clear();
    }

    /// Flops of the logged calls.
    pub fn flops(&self) -> u64 {
        self.calls
            .iter()
            .map(|&(m, w)| {
                let (n, k) = self.weights[w as usize];
                2 * (m * n * k) as u64
            })
            .sum()
    }

    /// Distinct `(M, N, K)` shapes with their call counts, in shape order.
    pub fn shapes(&self) -> impl Iterator<Item = ((usize, usize, usize), u64)> + '_ {
        let mut by: BTreeMap<(usize, usize, usize), u64> = BTreeMap::new();
        for &(m, w) in &self.calls {
            let (n, k) = self.weights[w as usize];
            *by.entry((m, n, k)).or_default() += 1;
        }
        by.into_iter()
    }
}

/// Wall and process CPU seconds of one timed piece of work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    /// Wall seconds.
    pub wall_s: f64,
    /// Process CPU seconds (all threads), where known.
    pub cpu_s: Option<f64>,
}

/// The roofline of a run, from paired rounds of the run and its GEMMs alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Roofline {
    /// Shared-weight GEMM flops of the run.
    pub gemm_flops: u64,
    /// Distinct `(M, N, K)` shapes.
    pub shapes: usize,
    /// Distinct weights (each executed alone as the run used it).
    pub weights: usize,
    /// Paired rounds.
    pub rounds: usize,
    /// The run's GEMMs alone: median over the rounds (seconds).
    pub gemm_only_s: f64,
    /// The same in process CPU time, where known.
    pub gemm_only_cpu_s: Option<f64>,
    /// `gemm_flops / gemm_only_s`: the GEMM rate this machine reaches on the
    /// run's own shapes (GFLOP/s).
    pub peak_gflops: f64,
    /// The best rate over the shapes (GFLOP/s; each shape's median over the
    /// rounds): the large-M ceiling.
    pub best_shape_gflops: f64,
    /// Median of the per-round `gemm_only / run` (wall time): the fraction of
    /// its GEMM peak the run reaches.
    pub fraction_of_peak: f64,
    /// Median of the per-round ratios in process CPU time (robust where
    /// other processes share the cores), where known.
    pub fraction_of_peak_cpu: Option<f64>,
    /// Every round's `gemm_only / run` (wall), in round order.
    pub round_fractions: Vec<f64>,
    /// Each shape alone, by `(M, N, K)`.
    pub by_shape: Vec<ShapeRate>,
}

/// One GEMM shape of a run, executed alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShapeRate {
    /// Rows (instances of the batch).
    pub m: usize,
    /// Output features.
    pub n: usize,
    /// Input features (every term's, concatenated).
    pub k: usize,
    /// Calls per run.
    pub calls: u64,
    /// Median over the rounds of all its calls' time (seconds).
    pub seconds: f64,
    /// Its GFLOP/s alone.
    pub gflops: f64,
}

/// A run's GEMMs, ready to execute alone: the same calls in the same order,
/// each by a weight of its own as in the run (so the weights' cache traffic
/// is the run's: five gate weights of one shape are five matrices, not one
/// kept warm), with `A` and `C` buffers for the largest call.
pub struct GemmOnly {
    /// `(M, weight)` per call, the run's order.
    calls: Vec<(usize, u32)>,
    weights: Vec<PackedB>,
    /// Distinct `(M, N, K)` shapes and each call's shape index.
    shapes: Vec<((usize, usize, usize), u64)>,
    /// Flops of all the calls ([`GemmLog::flops`]).
    flops: u64,
    shape_of: Vec<usize>,
    a: Vec<f32>,
    c: Vec<f32>,
    scratch: GemmScratch,
    /// Per shape, each execution's seconds for its calls.
    per_shape: Vec<Vec<f64>>,
}

impl GemmOnly {
    /// Prepares the products of `log`.
    pub fn new(log: &GemmLog) -> GemmOnly {
        let weights: Vec<PackedB> = log
            .weights
            .iter()
            .enumerate()
            .map(|(w, &(n, k))| {
                PackedB::new(n, k, |i, p| ((i * 7 + p * 3 + w) % 13) as f32 * 0.01, None)
            })
            .collect();
        let shapes: Vec<_> = log.shapes().collect();
        let index: BTreeMap<(usize, usize, usize), usize> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(s, _))| (s, i))
            .collect();
        let (mut a_len, mut c_len) = (0, 0);
        let shape_of = log
            .calls
            .iter()
            .map(|&(m, w)| {
                let (n, k) = log.weights[w as usize];
                a_len = a_len.max(m * k);
                c_len = c_len.max(m * n);
                index[&(m, n, k)]
            })
            .collect();
        GemmOnly {
            per_shape: vec![Vec::new(); shapes.len()],
            calls: log.calls.clone(),
            weights,
            shapes,
            flops: log.flops(),
            shape_of,
            a: vec![0.5; a_len],
            c: vec![0.0; c_len],
            scratch: GemmScratch::default(),
        }
    }

    /// Executes every logged call once, in the run's order.
    pub fn run(&mut self, threads: &Threads) -> Timed {
        let mut seconds = vec![0.0; self.shapes.len()];
        let t0 = Instant::now();
        let u0 = usage::now();
        for (&(m, w), &s) in self.calls.iter().zip(&self.shape_of) {
            let b = &self.weights[w as usize];
            let (n, k) = (b.n(), b.k());
            let t = Instant::now();
            let seg = [ASeg::new(&self.a, 0, k, k, m)];
            gemm(
                threads,
                m,
                &seg,
                b,
                COut::new(&mut self.c, 0, n, m, n),
                Init::Overwrite,
                &mut self.scratch,
            );
            seconds[s] += t.elapsed().as_secs_f64();
        }
        let timed = Timed {
            wall_s: t0.elapsed().as_secs_f64(),
            cpu_s: usage::since(u0, usage::now()).map(|u| u.cpu_s),
        };
        for (all, s) in self.per_shape.iter_mut().zip(seconds) {
            all.push(s);
        }
        timed
    }

    /// The roofline of paired rounds: round `i` ran the trace (`runs[i]`)
    /// and these GEMMs alone (`alone[i]`, from [`GemmOnly::run`]).
    pub fn roofline(&self, runs: &[Timed], alone: &[Timed]) -> Roofline {
        assert_eq!(runs.len(), alone.len(), "one GEMM-only time per run");
        let gemm_flops = self.flops;
        let ratio = |g: f64, r: f64| if r > 0.0 { g / r } else { 0.0 };
        let round_fractions: Vec<f64> = runs
            .iter()
            .zip(alone)
            .map(|(r, g)| ratio(g.wall_s, r.wall_s))
            .collect();
        let cpu_fractions: Option<Vec<f64>> = runs
            .iter()
            .zip(alone)
            .map(|(r, g)| Some(ratio(g.cpu_s?, r.cpu_s?)))
            .collect();
        let alone_cpu: Option<Vec<f64>> = alone.iter().map(|g| g.cpu_s).collect();
        let gemm_only_s = median(&alone.iter().map(|g| g.wall_s).collect::<Vec<_>>());
        let by_shape: Vec<ShapeRate> = self
            .shapes
            .iter()
            .zip(&self.per_shape)
            .map(|(&((m, n, k), calls), t)| {
                let seconds = median(t);
                ShapeRate {
                    m,
                    n,
                    k,
                    calls,
                    seconds,
                    gflops: 2.0 * (m * n * k) as f64 * calls as f64 / seconds.max(1e-12) / 1e9,
                }
            })
            .collect();
        let best_shape_gflops = by_shape.iter().map(|s| s.gflops).fold(0.0, f64::max);
        let nonempty = |v: Vec<f64>| (!v.is_empty()).then(|| median(&v));
        Roofline {
            gemm_flops,
            shapes: self.shapes.len(),
            weights: self.weights.len(),
            rounds: runs.len(),
            gemm_only_s,
            gemm_only_cpu_s: alone_cpu.and_then(nonempty),
            peak_gflops: if gemm_only_s > 0.0 {
                gemm_flops as f64 / gemm_only_s / 1e9
            } else {
                0.0
            },
            best_shape_gflops,
            fraction_of_peak: median(&round_fractions),
            fraction_of_peak_cpu: cpu_fractions.and_then(nonempty),
            round_fractions,
            by_shape,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weight(n: usize, k: usize) -> PackedB {
        PackedB::new(n, k, |i, p| (i + p) as f32 * 0.01, None)
    }

    #[test]
    fn the_log_numbers_weights_in_first_use_order_and_counts_flops() {
        let (w1, w2) = (weight(3, 4), weight(1, 1));
        let mut l = GemmLog::default();
        l.add(2, &w1);
        l.add(1, &w2);
        l.add(2, &w1);
        assert_eq!(l.calls, [(2, 0), (1, 1), (2, 0)]);
        assert_eq!(l.flops(), 2 * 24 * 2 + 2);
        assert_eq!(l.shapes().count(), 2);
        assert_eq!(l.weights.len(), 2);
        l.clear();
        l.add(1, &w2);
        assert_eq!(l.calls, [(1, 0)]);
    }

    #[test]
    fn gemm_only_executes_every_logged_call_with_its_own_weight_and_pairs_rounds_by_index() {
        // Two weights of one shape stay two matrices (the run's cache
        // traffic), and shapes are counted across weights.
        let (g1, g2, out) = (weight(40, 8), weight(40, 8), weight(7, 5));
        let mut l = GemmLog::default();
        for (m, w) in [(2, &g1), (2, &g2), (13, &g1), (3, &out)] {
            l.add(m, w);
        }
        let mut g = GemmOnly::new(&l);
        assert_eq!(g.weights.len(), 3);
        let threads = Threads::new(1);
        let alone: Vec<Timed> = (0..3).map(|_| g.run(&threads)).collect();
        assert!(g.per_shape.iter().all(|t| t.len() == 3));
        let r = g.roofline(&alone, &alone);
        let shapes: Vec<_> = r
            .by_shape
            .iter()
            .map(|s| (s.m, s.n, s.k, s.calls))
            .collect();
        assert_eq!(shapes, [(2, 40, 8, 2), (3, 7, 5, 1), (13, 40, 8, 1)]);
        assert_eq!((r.shapes, r.weights), (3, 3));
        // Runs that take eight, two and four times as long as the GEMMs
        // alone: the median ratio is the middle one, whatever the order.
        let runs: Vec<Timed> = alone
            .iter()
            .zip([8.0, 2.0, 4.0])
            .map(|(a, f)| Timed {
                wall_s: a.wall_s * f,
                cpu_s: a.cpu_s.map(|c| c * f),
            })
            .collect();
        let r = g.roofline(&runs, &alone);
        assert_eq!(r.rounds, 3);
        assert_eq!(r.gemm_flops, l.flops());
        assert!((r.fraction_of_peak - 0.25).abs() < 1e-9, "{r:?}");
        for (got, want) in r.round_fractions.iter().zip([0.125, 0.5, 0.25]) {
            assert!((got - want).abs() < 1e-9, "{r:?}");
        }
        assert!(r.gemm_only_s > 0.0 && r.peak_gflops > 0.0 && r.best_shape_gflops > 0.0);
    }
}
