//! Numeric axes: range, tick positions and tick labels.
//!
//! Charts are drawn in "transformed" coordinates (the value itself, its log2
//! or its log10), always on a linear plotters axis; this module maps values
//! into that space and picks ticks at round values of the original data.

use crate::model::Scale;

/// A fitted axis: range and ticks, all in transformed coordinates.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis {
    pub scale: Scale,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<f64>,
}

/// Maps a data value onto the (linear) drawing axis.
pub(crate) fn forward(scale: Scale, v: f64) -> f64 {
    match scale {
        Scale::Linear => v,
        Scale::Log2 => v.log2(),
        Scale::Log10 => v.log10(),
    }
}

/// Maps a drawing-axis position back to a data value.
pub(crate) fn inverse(scale: Scale, t: f64) -> f64 {
    match scale {
        Scale::Linear => t,
        Scale::Log2 => t.exp2(),
        Scale::Log10 => 10f64.powf(t),
    }
}

impl Axis {
    /// Fits an axis around data values `min..=max` (already validated: finite,
    /// and > 0 on a log scale). `zero` forces a linear axis to include 0 (bars).
    pub fn fit(scale: Scale, min: f64, max: f64, zero: bool) -> Axis {
        let (mut lo, mut hi) = (forward(scale, min), forward(scale, max));
        if scale == Scale::Linear && zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        let span = hi - lo;
        let pad = if span > 0.0 {
            0.06 * span
        } else if scale == Scale::Linear {
            0.1 * lo.abs().max(1.0)
        } else {
            0.25
        };
        // A linear bar axis starts exactly at 0; everything else gets padding.
        if !(scale == Scale::Linear && zero && lo == 0.0) {
            // Bars on a log axis start at its bottom: leave the smallest bar
            // a visible height.
            lo -= if zero { 2.0 * pad } else { pad };
        }
        if !(scale == Scale::Linear && zero && hi == 0.0) {
            hi += pad;
        }
        if scale.is_log() {
            // At least a third of a decade (or half an octave) is visible.
            let min_span = if scale == Scale::Log2 { 1.0 } else { 0.35 };
            if hi - lo < min_span {
                let mid = (hi + lo) / 2.0;
                lo = mid - min_span / 2.0;
                hi = mid + min_span / 2.0;
            }
        }
        if scale == Scale::Linear {
            // Extend the top to the next round tick when it is close, so the
            // highest value sits under a labelled grid line.
            let step = nice_step(hi - lo, 6);
            let next = (hi / step).ceil() * step;
            if next - hi < 0.5 * step {
                hi = next;
            }
        }
        let mut ticks = match scale {
            Scale::Linear => linear_ticks(lo, hi, 6),
            Scale::Log2 => log2_ticks(lo, hi),
            Scale::Log10 => log10_ticks(lo, hi),
        };
        // Ticks whose value under- or overflows f64 would be labelled 0 or inf.
        ticks.retain(|&t| {
            let v = inverse(scale, t);
            v.is_finite() && (scale == Scale::Linear || v > 0.0)
        });
        Axis {
            scale,
            lo,
            hi,
            ticks,
        }
    }

    /// Fits an axis around all `values` (see [`Axis::fit`]); no value at all
    /// gives an axis around 1.
    pub fn around(scale: Scale, values: impl IntoIterator<Item = f64>, zero: bool) -> Axis {
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            min = min.min(v);
            max = max.max(v);
        }
        if min > max {
            (min, max) = (1.0, 1.0);
        }
        Axis::fit(scale, min, max, zero)
    }

    /// Transformed position of a data value.
    pub fn t(&self, v: f64) -> f64 {
        forward(self.scale, v)
    }

    /// Tick label for a transformed position.
    pub fn label(&self, t: f64) -> String {
        let v = inverse(self.scale, t);
        match self.scale {
            Scale::Linear => {
                let step = match self.ticks.as_slice() {
                    [a, b, ..] => b - a,
                    _ => v.abs().max(1.0),
                };
                format_step(v, step)
            }
            Scale::Log2 | Scale::Log10 => format_value(v),
        }
    }
}

/// A round step (1, 2, 2.5 or 5 times a power of ten) for about `target` ticks.
fn nice_step(span: f64, target: usize) -> f64 {
    let raw = span / target as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Multiples of a round step inside `lo..=hi`.
pub(crate) fn linear_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if hi <= lo || !(hi - lo).is_finite() {
        return vec![lo];
    }
    let step = nice_step(hi - lo, target);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Powers of two inside the range, thinned to at most 12 ticks.
fn log2_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = ((lo - 1e-9).ceil() as i64, (hi + 1e-9).floor() as i64);
    if b - a + 1 >= 2 {
        return powers(a, b, 12);
    }
    value_space_ticks(Scale::Log2, lo, hi)
}

/// Exponents `a..=b`, thinned to multiples of a stride so that at most
/// `max` remain (1, 100, 10^4... rather than 10, 1000, 10^5...).
fn powers(a: i64, b: i64, max: i64) -> Vec<f64> {
    let stride = (b - a) / max + 1;
    (a..=b)
        .filter(|k| k.rem_euclid(stride) == 0)
        .map(|k| k as f64)
        .collect()
}

/// Decades, or 1-2-5, or 1..9 multiples: the first set giving >= 3 ticks.
fn log10_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = ((lo - 1e-9).ceil() as i64, (hi + 1e-9).floor() as i64);
    if b - a + 1 >= 4 {
        return powers(a, b, 11);
    }
    for mults in [
        &[1.0, 2.0, 5.0][..],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ] {
        let mut ticks = Vec::new();
        for k in (lo.floor() as i64)..=(hi.ceil() as i64) {
            for m in mults {
                let t = (m * 10f64.powi(k as i32)).log10();
                if t >= lo - 1e-9 && t <= hi + 1e-9 {
                    ticks.push(t);
                }
            }
        }
        if (3..=14).contains(&ticks.len()) {
            return ticks;
        }
    }
    if b - a + 1 >= 2 {
        return ((a..=b).map(|k| k as f64)).collect();
    }
    value_space_ticks(Scale::Log10, lo, hi)
}

/// Round values of the data itself, mapped into the transformed range.
fn value_space_ticks(scale: Scale, lo: f64, hi: f64) -> Vec<f64> {
    let (vlo, vhi) = (inverse(scale, lo), inverse(scale, hi));
    linear_ticks(vlo, vhi, 4)
        .into_iter()
        .filter(|v| *v > 0.0)
        .map(|v| forward(scale, v))
        .collect()
}

/// Formats `v` with as many decimals as `step` needs.
pub(crate) fn format_step(v: f64, step: f64) -> String {
    if v.abs() >= 1e6 {
        return format_value(v);
    }
    let mut decimals = 0;
    while decimals < 6 {
        let scaled = step * 10f64.powi(decimals);
        if (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0) {
            break;
        }
        decimals += 1;
    }
    let s = format!("{:.*}", decimals as usize, v);
    match s.strip_prefix('-') {
        Some(abs) if abs.chars().all(|c| c == '0' || c == '.') => abs.to_string(),
        _ => s,
    }
}

/// Formats a tick value compactly: `0.01`, `2.5`, `256`, `1e6`.
pub(crate) fn format_value(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        let s = format!("{v:.2e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mant = mant.trim_end_matches('0').trim_end_matches('.');
        return format!("{mant}e{exp}");
    }
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round() {
        assert_eq!(
            linear_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        let t = linear_ticks(0.0, 1.0, 6);
        assert_eq!(t.len(), 6, "{t:?}");
    }

    #[test]
    fn log2_axis_ticks_at_powers_of_two() {
        let axis = Axis::fit(Scale::Log2, 1.0, 256.0, false);
        let labels: Vec<String> = axis.ticks.iter().map(|&t| axis.label(t)).collect();
        assert_eq!(labels, ["1", "2", "4", "8", "16", "32", "64", "128", "256"]);
    }

    #[test]
    fn wide_log10_axis_ticks_at_round_powers() {
        let axis = Axis::fit(Scale::Log10, 1e-3, 1e12, false);
        assert!(axis.ticks.len() <= 11, "{:?}", axis.ticks);
        assert!(
            axis.ticks.iter().all(|t| t.rem_euclid(2.0) == 0.0),
            "{:?}",
            axis.ticks
        );
        let axis = Axis::fit(Scale::Log10, 1e-300, 1e300, true);
        assert!(
            axis.ticks.iter().all(|&t| 10f64.powf(t) > 0.0),
            "{:?}",
            axis.ticks
        );
    }

    #[test]
    fn narrow_log10_axis_still_has_ticks() {
        let axis = Axis::fit(Scale::Log10, 1.05, 3.2, true);
        let labels: Vec<String> = axis.ticks.iter().map(|&t| axis.label(t)).collect();
        assert!(labels.len() >= 3, "{labels:?}");
        assert!(labels.contains(&"2".to_string()), "{labels:?}");
    }

    #[test]
    fn values_format_compactly() {
        assert_eq!(format_value(0.5), "0.5");
        assert_eq!(format_value(1_000_000.0), "1e6");
        assert_eq!(format_value(0.0001), "1e-4");
        assert_eq!(format_step(0.30000000000000004, 0.1), "0.3");
        assert_eq!(format_step(-0.0, 0.5), "0.0");
        assert_eq!(format_step(0.0, 1.0), "0");
        assert_eq!(format_step(7.5, 2.5), "7.5");
    }
}
