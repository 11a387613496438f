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

use serde_json::Value;

use crate::report::fmt::{mean, ratio, sig};
use crate::rows::num;

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
pub fn spread(row: &Value) -> Option<f64> {
    let mut s: Vec<f64> = row["samples"]
        .as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    if s.len() < 2 {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let median = s[s.len() / 2];
    (median > 0.0).then(|| (s[s.len() - 1] - s[0]) / median)
}

/// `num(a, path) / num(b, path)` with its noise: the spread of the
/// per-round ratios when the rows are [`paired`], else the sum of both rows'
/// spreads.
pub fn ratio_of(a: &Value, b: &Value, path: &str) -> Option<Noisy> {
    let value = num(a, path)? / num(b, path)?;
    let noise = match paired_spread(a, b) {
        Some(n) => Some(n),
        None => spread(a).zip(spread(b)).map(|(x, y)| x + y),
    };
    value.is_finite().then_some(Noisy { value, noise })
}

/// Config keys that tell apart the arms measured on one trace.
const ARM_KEYS: [&str; 3] = ["executor", "fsm", "layout_batch"];

/// Whether rows `a` and `b` are two arms measured together, round by round
/// on the same trace with their order rotated: the same spec, revision and
/// machine; configs equal but for the arm (`ARM_KEYS`) and with `rounds` ≥
/// 2; and as many timed runs each (at least two), sample i of both from
/// round i.
pub fn paired(a: &Value, b: &Value) -> bool {
    let same = |path: &str| {
        let (x, y) = (lookup(a, path), lookup(b, path));
        x.is_some() && x == y
    };
    let trace_config = |r: &Value| -> Option<serde_json::Map<String, Value>> {
        let mut c = r["config"].as_object()?.clone();
        for k in ARM_KEYS {
            c.remove(k);
        }
        Some(c)
    };
    let samples = |r: &Value| r["samples"].as_array().map_or(0, Vec::len);
    a["config"]["rounds"].as_u64().is_some_and(|n| n >= 2)
        && same("provenance.spec")
        && same("provenance.git_revision")
        && same("provenance.machine.hostname")
        && trace_config(a).is_some_and(|c| Some(c) == trace_config(b))
        && samples(a) >= 2
        && samples(a) == samples(b)
}

/// For [`paired`] rows, the relative spread of the per-round ratios
/// `a_i / b_i` of their samples (`None` for rows that are not paired).
pub fn paired_spread(a: &Value, b: &Value) -> Option<f64> {
    if !paired(a, b) {
        return None;
    }
    let s = |r: &Value| -> Vec<f64> {
        r["samples"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let (sa, sb) = (s(a), s(b));
    let mut r: Vec<f64> = sa
        .iter()
        .zip(&sb)
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

/// The value at a dotted `path` of `v`.
fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
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

/// One line on process CPU time beside wall time over `rows` (replay rows
/// carry `metrics.cpu_s` and `metrics.total_s`): CPU/wall above 1 means the
/// threads ran in parallel, below 1 that the process waited (contention).
pub fn cpu_note<'a>(rows: impl Iterator<Item = &'a Value>) -> Option<String> {
    let mut r: Vec<f64> = rows
        .filter_map(|row| Some(num(row, "metrics.cpu_s")? / num(row, "metrics.total_s")?))
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
    use serde_json::json;

    #[test]
    fn spread_and_ratio_noise() {
        let a = json!({"samples": [1.0, 1.1, 0.9], "metrics": {"t": 2.0}});
        let b = json!({"samples": [2.0, 2.0, 2.0], "metrics": {"t": 1.0}});
        assert!((spread(&a).unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(spread(&json!({"samples": [1.0]})), None);
        let r = ratio_of(&a, &b, "metrics.t").unwrap();
        assert_eq!(r.value, 2.0);
        assert!((r.noise.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(r.cell(), "2.00 ±20%");
    }

    fn arm(executor: &str, batch: u64, samples: &[f64]) -> Value {
        json!({
            "provenance": {"spec": "fig6", "git_revision": "abc", "machine": {"hostname": "vm"}},
            "config": {"kind": "replay", "workload": "lattice-gru", "batch": batch, "hidden": 128,
                       "seed": 101, "executor": executor, "rounds": samples.len()},
            "metrics": {"instances_per_s": 128.0 / samples[samples.len() / 2]},
            "samples": samples,
        })
    }

    /// Two executors in the same rotated rounds: a slow round slows both,
    /// and the noise is how much their per-round ratio moves, not the sum
    /// of the rows' spreads.
    #[test]
    fn rows_measured_in_the_same_rounds_carry_the_spread_of_their_per_round_ratios() {
        let cavs = arm("cavs", 128, &[0.010, 0.015, 0.011, 0.020, 0.012]);
        let ed = arm("edbatch", 128, &[0.0105, 0.0156, 0.0116, 0.0212, 0.0126]);
        assert!(paired(&cavs, &ed));
        // Per-round ratios cavs / edbatch of 1/1.05, 1/1.04, 1/1.0545…, 1/1.06
        // and 1/1.05: their spread is (1/1.04 − 1/1.06) / (1/1.05).
        let r = ratio_of(&cavs, &ed, "metrics.instances_per_s").unwrap();
        let want = (1.0 / 1.04 - 1.0 / 1.06) * 1.05;
        assert!((r.noise.unwrap() - want).abs() < 1e-9, "{r:?}");
        assert!(spread(&cavs).unwrap() + spread(&ed).unwrap() > 0.8);
        // Another batch size is another trace: unpaired, the rows' spreads summed.
        let other = arm("edbatch", 64, &[0.0105, 0.0156, 0.0116, 0.0212, 0.0126]);
        assert!(!paired(&cavs, &other));
        let r = ratio_of(&cavs, &other, "metrics.instances_per_s").unwrap();
        assert!(
            (r.noise.unwrap() - (spread(&cavs).unwrap() + spread(&other).unwrap())).abs() < 1e-12
        );
        // One round (no rotation), another revision or an unequal count of
        // timed runs: not paired either.
        let mut one = ed.clone();
        one["config"]["rounds"] = json!(1);
        assert!(!paired(&cavs, &one));
        let mut rev = ed.clone();
        rev["provenance"]["git_revision"] = json!("def");
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
