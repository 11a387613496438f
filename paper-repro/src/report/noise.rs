//! How much a timing ratio can be trusted. A row's `samples` are the wall
//! seconds of its timed runs; their spread, `(max - min) / median`, is the
//! row's noise, and a ratio of two rows carries the sum of both (ratios of
//! medians move by about that much between sweeps). Every timing ratio in
//! REPORT.md is shown with it (`1.23 ±8%`), and an average of ratios whose
//! noise intervals do not overlap says so instead of hiding the spread
//! (issue 15: 3.51 at h64 and 0.41 at h128 averaged into "mean 1.96").

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

/// `num(a, path) / num(b, path)` with the noise of both rows.
pub fn ratio_of(a: &Value, b: &Value, path: &str) -> Option<Noisy> {
    let value = num(a, path)? / num(b, path)?;
    let noise = spread(a).zip(spread(b)).map(|(x, y)| x + y);
    value.is_finite().then_some(Noisy { value, noise })
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
