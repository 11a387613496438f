//! How much a timing ratio can be trusted. A row's `samples` are the wall
//! seconds of its timed runs; their spread, `(max - min) / median`, is the
//! row's noise. Every timing ratio in REPORT.md is shown with a noise
//! (`1.23 ±8%`), and an average of ratios whose noise intervals do not
//! overlap says so instead of hiding the spread (issue 15: 3.51 at h64 and
//! 0.41 at h128 averaged into "mean 1.96").
//!
//! A ratio's noise depends on how its two rows were measured:
//!
//! - **Paired** ([`paired`]): two executors on one trace, measured in the
//!   same rounds with their order rotated (a replay spec with `rounds` ≥ 2).
//!   Sample i of each row comes from the same round, minutes apart at most,
//!   so a slow spell of the shared machine slows both: the noise is the
//!   spread of the per-round ratios. On the 2-core VM a row's own spread is
//!   often 20–60 % while its per-round ratio to the other executor moves by a
//!   few percent (fig6: lattice-gru h128 b128 `cavs`/`edbatch` 0.94–0.96 over
//!   five rounds, where the rows' spreads summed to ±37 %).
//! - **Unpaired**: anything else (different batch sizes, specs or runs): the
//!   sum of both rows' spreads, about how far a ratio of medians moves
//!   between sweeps.

use experiments::Row;
use experiments::config::RunConfig;
use experiments::rows::ReplayMetrics;

use crate::report::fmt::{mean, ratio, sig};
use crate::rows::Measured;

/// A ratio and its noise (relative, e.g. 0.08 for ±8 %; `None` when a row
/// has fewer than two timed runs, so no spread is known).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noisy {
    /// The ratio.
    pub value: f64,
    /// Relative noise.
    pub noise: Option<f64>,
}

impl Noisy {
    /// `1.23 ±8%`, or `1.23 (1 run)` when the spread is unknown.
    pub fn cell(&self) -> String {
        match self.noise {
            Some(n) => format!("{} ±{}%", ratio(self.value), pct(n)),
            None => format!("{} (1 run)", ratio(self.value)),
        }
    }

    /// `1.23× ±8%`.
    pub fn times(&self) -> String {
        match self.noise {
            Some(n) => format!("{}× ±{}%", ratio(self.value), pct(n)),
            None => format!("{}× (1 run)", ratio(self.value)),
        }
    }

    fn interval(&self) -> (f64, f64) {
        let n = self.noise.unwrap_or(0.0);
        (self.value * (1.0 - n), self.value * (1.0 + n))
    }
}

fn pct(n: f64) -> String {
    sig(n * 100.0, 2)
}

/// The relative spread of `row`'s timed runs (`None` with fewer than two).
pub fn spread(row: &Row) -> Option<f64> {
    let mut s = row.samples.clone();
    if s.len() < 2 {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let median = s[s.len() / 2];
    (median > 0.0).then(|| (s[s.len() - 1] - s[0]) / median)
}

/// `value(a) / value(b)` with its noise: the spread of the per-round ratios
/// when the rows are [`paired`], else the sum of both rows' spreads.
pub fn ratio_of<C, M>(
    a: Measured<'_, C, M>,
    b: Measured<'_, C, M>,
    value: impl Fn(&M) -> f64,
) -> Option<Noisy> {
    let value = value(a.metrics) / value(b.metrics);
    let noise = match paired_spread(a.row, b.row) {
        Some(n) => Some(n),
        None => spread(a.row).zip(spread(b.row)).map(|(x, y)| x + y),
    };
    value.is_finite().then_some(Noisy { value, noise })
}

/// The configuration of the trace an arm ran on: `config` without what
/// tells apart the arms measured on one trace (the executor, its FSM rule
/// and layout batch).
fn trace_config(config: &RunConfig) -> RunConfig {
    let mut c = config.clone();
    match &mut c {
        RunConfig::Replay(r) => {
            r.executor.clear();
            r.fsm = None;
            r.layout_batch = None;
        }
        RunConfig::Peers(p) => {
            p.fsm = None;
            p.layout_batch = None;
        }
        RunConfig::Policies(p) => p.fsm = None,
        RunConfig::Training(_) | RunConfig::PlannerMemory(_) | RunConfig::PlannerCompile(_) => {}
    }
    c
}

/// Rounds the run was measured in (1 for kinds without rounds).
fn rounds(config: &RunConfig) -> usize {
    match config {
        RunConfig::Replay(r) => r.rounds,
        RunConfig::Peers(p) => p.rounds,
        _ => 1,
    }
}

/// Whether rows `a` and `b` are two arms measured together, round by round
/// on the same trace with their order rotated: the same spec, revision and
/// machine; configs equal but for the arm (`trace_config`) and with
/// `rounds` ≥ 2; and as many timed runs each (at least two), sample i of
/// both from round i.
pub fn paired(a: &Row, b: &Row) -> bool {
    let (p, q) = (&a.provenance, &b.provenance);
    rounds(&a.config) >= 2
        && p.spec == q.spec
        && p.git_revision == q.git_revision
        && p.machine.hostname == q.machine.hostname
        && trace_config(&a.config) == trace_config(&b.config)
        && a.samples.len() >= 2
        && a.samples.len() == b.samples.len()
}

/// For [`paired`] rows, the relative spread of the per-round ratios
/// `a_i / b_i` of their samples (`None` for rows that are not paired).
pub fn paired_spread(a: &Row, b: &Row) -> Option<f64> {
    if !paired(a, b) {
        return None;
    }
    let (sa, sb) = (&a.samples, &b.samples);
    let mut r: Vec<f64> = sa
        .iter()
        .zip(sb)
        .filter(|(_, y)| **y > 0.0)
        .map(|(x, y)| x / y)
        .collect();
    if r.len() < 2 || r.len() != sa.len() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    let median = r[r.len() / 2];
    (median > 0.0).then(|| (r[r.len() - 1] - r[0]) / median)
}

/// The mean of `ratios`, with the noise of its parts (the largest), and a
/// warning when their noise intervals do not all overlap: the ratios then
/// disagree by more than the noise, and a mean would hide it.
pub fn mean_of(ratios: &[Noisy]) -> Option<(Noisy, Option<String>)> {
    let m = mean(&ratios.iter().map(|r| r.value).collect::<Vec<_>>())?;
    let noise = ratios
        .iter()
        .map(|r| r.noise)
        .try_fold(0.0f64, |acc, n| n.map(|n| acc.max(n)));
    let lo = ratios
        .iter()
        .map(|r| r.interval().1)
        .fold(f64::INFINITY, f64::min);
    let hi = ratios
        .iter()
        .map(|r| r.interval().0)
        .fold(f64::NEG_INFINITY, f64::max);
    let warn = (ratios.len() > 1 && hi > lo).then(|| {
        let vals: Vec<String> = ratios.iter().map(Noisy::cell).collect();
        format!(
            "the ratios averaged ({}) disagree by more than their noise",
            vals.join(", ")
        )
    });
    Some((Noisy { value: m, noise }, warn))
}

/// One line on process CPU time beside wall time over replay rows'
/// metrics (`cpu_s` beside `total_s`): CPU/wall above 1 means the threads
/// ran in parallel, below 1 that the process waited (contention).
pub fn cpu_note<'a>(metrics: impl Iterator<Item = &'a ReplayMetrics>) -> Option<String> {
    let mut r: Vec<f64> = metrics
        .filter_map(|m| Some(m.cpu_s? / m.total_s))
        .filter(|x| x.is_finite())
        .collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    Some(format!(
        "Process CPU time beside wall time (per run, all threads): CPU / wall {}–{} (median {}) \
         over {} rows; above 1 the worker threads ran in parallel, below 1 the process waited \
         (other load on the machine), which makes its timings noisier.",
        sig(r[0], 2),
        sig(r[r.len() - 1], 2),
        sig(r[r.len() / 2], 2),
        r.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::ReplayRow;
    use crate::rows::fixtures::replay;

    /// A replay row of `executor` on the batch-`batch` trace, measured in
    /// as many rounds as it has `samples`.
    fn arm(executor: &str, batch: usize, samples: &[f64]) -> Row {
        let mut r = replay(executor, "cpu", 128.0 / samples[samples.len() / 2], samples);
        let RunConfig::Replay(c) = &mut r.config else {
            unreachable!()
        };
        c.batch = batch;
        r
    }

    fn of(row: &Row) -> ReplayRow<'_> {
        ReplayRow::of(row).unwrap()
    }

    #[test]
    fn spread_and_ratio_noise() {
        let a = replay("cavs", "cpu", 2.0, &[1.0, 1.1, 0.9]);
        // On another trace (batch size), so the two are not paired.
        let mut b = replay("cavs", "cpu", 1.0, &[2.0, 2.0, 2.0]);
        let RunConfig::Replay(c) = &mut b.config else {
            unreachable!()
        };
        c.batch = 16;
        assert!((spread(&a).unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(spread(&replay("cavs", "cpu", 1.0, &[1.0])), None);
        let r = ratio_of(of(&a), of(&b), |m| m.instances_per_s).unwrap();
        assert_eq!(r.value, 2.0);
        assert!((r.noise.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(r.cell(), "2.00 ±20%");
    }

    /// Two executors in the same rotated rounds: a slow round slows both,
    /// and the noise is how much their per-round ratio moves, not the sum
    /// of the rows' spreads.
    #[test]
    fn rows_measured_in_the_same_rounds_carry_the_spread_of_their_per_round_ratios() {
        let ips = |m: &ReplayMetrics| m.instances_per_s;
        let cavs = arm("cavs", 128, &[0.010, 0.015, 0.011, 0.020, 0.012]);
        let ed = arm("edbatch", 128, &[0.0105, 0.0156, 0.0116, 0.0212, 0.0126]);
        assert!(paired(&cavs, &ed));
        // Per-round ratios cavs / edbatch of 1/1.05, 1/1.04, 1/1.0545…, 1/1.06
        // and 1/1.05: their spread is (1/1.04 − 1/1.06) / (1/1.05).
        let r = ratio_of(of(&cavs), of(&ed), ips).unwrap();
        let want = (1.0 / 1.04 - 1.0 / 1.06) * 1.05;
        assert!((r.noise.unwrap() - want).abs() < 1e-9, "{r:?}");
        assert!(spread(&cavs).unwrap() + spread(&ed).unwrap() > 0.8);
        // Another batch size is another trace: unpaired, the rows' spreads summed.
        let other = arm("edbatch", 64, &[0.0105, 0.0156, 0.0116, 0.0212, 0.0126]);
        assert!(!paired(&cavs, &other));
        let r = ratio_of(of(&cavs), of(&other), ips).unwrap();
        assert!(
            (r.noise.unwrap() - (spread(&cavs).unwrap() + spread(&other).unwrap())).abs() < 1e-12
        );
        // One round (no rotation), another revision or an unequal count of
        // timed runs: not paired either.
        let mut one = cavs.clone();
        let RunConfig::Replay(c) = &mut one.config else {
            unreachable!()
        };
        c.rounds = 1;
        assert!(!paired(&one, &ed));
        let mut rev = ed.clone();
        rev.provenance.git_revision = "def".into();
        assert!(!paired(&cavs, &rev));
        let short = arm("edbatch", 128, &[0.0105, 0.0156, 0.0116, 0.0212]);
        assert!(!paired(&cavs, &short));
    }

    /// Regression (issue 15): 3.51 and 0.41 were averaged into "mean 1.96".
    #[test]
    fn a_mean_of_ratios_that_disagree_beyond_their_noise_says_so() {
        let n = |value, noise| Noisy {
            value,
            noise: Some(noise),
        };
        let (m, warn) = mean_of(&[n(3.51, 0.1), n(0.41, 0.1)]).unwrap();
        assert!((m.value - 1.96).abs() < 1e-9);
        assert!(warn.unwrap().contains("disagree"));
        let (_, warn) = mean_of(&[n(1.0, 0.1), n(1.05, 0.1)]).unwrap();
        assert!(warn.is_none());
        let (m, _) = mean_of(&[
            n(1.0, 0.1),
            Noisy {
                value: 1.0,
                noise: None,
            },
        ])
        .unwrap();
        assert_eq!(
            m.noise, None,
            "an unknown part makes the mean's noise unknown"
        );
    }
}
