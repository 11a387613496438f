//! Number formatting for tables and readings.

/// `x` with about `digits` significant digits, without exponent for the
/// magnitudes a report shows (1e-4 .. 1e7); trailing zeros dropped.
pub fn sig(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (digits as i32 - 1 - mag).clamp(0, 6) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A ratio with two decimals and `×`, e.g. `1.23×`.
pub fn times(x: f64) -> String {
    format!("{x:.2}×")
}

/// A ratio as a table cell (two decimals, no unit).
pub fn ratio(x: f64) -> String {
    format!("{x:.2}")
}

/// An optional number as a table cell (`""` when absent).
pub fn opt(x: Option<f64>, digits: usize) -> String {
    x.map(|v| sig(v, digits)).unwrap_or_default()
}

/// Seconds as milliseconds with 3 significant digits.
pub fn ms(seconds: f64) -> String {
    sig(seconds * 1e3, 3)
}

/// A percentage with no decimals, e.g. `37%`.
pub fn pct(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

/// Arithmetic mean (None when empty).
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Smallest and largest value (None when empty).
pub fn range(v: &[f64]) -> Option<(f64, f64)> {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (!v.is_empty()).then_some((lo, hi))
}

/// `lo–hi` with `digits` significant digits, or one number when equal.
pub fn span(lo: f64, hi: f64, digits: usize) -> String {
    let (a, b) = (sig(lo, digits), sig(hi, digits));
    if a == b { a } else { format!("{a}–{b}") }
}

/// The UTC date `YYYY-MM-DD` of a UNIX timestamp.
pub fn date(unix: u64) -> String {
    // Howard Hinnant's civil-from-days.
    let z = (unix / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(sig(1163.4, 3), "1163");
        assert_eq!(sig(0.0015326, 3), "0.00153");
        assert_eq!(sig(65.875, 4), "65.88");
        assert_eq!(sig(2.0, 3), "2");
        assert_eq!(times(1.234), "1.23×");
        assert_eq!(pct(0.374), "37%");
        assert_eq!(span(1.0, 1.0, 3), "1");
        assert_eq!(mean(&[1.0, 2.0]), Some(1.5));
        assert_eq!(date(1_795_385_905), "2026-11-22");
        assert_eq!(date(0), "1970-01-01");
    }
}
