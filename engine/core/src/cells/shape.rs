//! Dimension expressions: the tiny language cell files use for shapes and slice bounds.
//!
//! A cell is written once and instantiated at many hidden sizes, so shapes are
//! expressions in `h` rather than numbers. The grammar is deliberately minimal
//! (`h`, `<int>h`, `<int>`): every builtin model needs only multiples of `h` and
//! constants (vocabulary and class counts), and a closed grammar makes a typo a
//! clear error instead of a surprising value.
//!
//! YAML reads `1000` as an integer and `4h` as a string, so the raw form
//! ([`DimText`]) accepts any scalar and keeps its text; parsing into [`DimExpr`]
//! happens during validation, where the error can name the cell and field.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A dim expression exactly as written in the file (integer or string scalar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DimText(pub String);

impl fmt::Display for DimText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for DimText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DimTextVisitor)
    }
}

impl Serialize for DimText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Integers go back out as integers so a round trip keeps `1000` a number.
        match self.0.parse::<u64>() {
            Ok(n) => serializer.serialize_u64(n),
            Err(_) => serializer.serialize_str(&self.0),
        }
    }
}

struct DimTextVisitor;

impl Visitor<'_> for DimTextVisitor {
    type Value = DimText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a dim expression: `h`, `<int>h` or `<int>`")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<DimText, E> {
        Ok(DimText(v.to_owned()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<DimText, E> {
        Ok(DimText(v.to_string()))
    }

    // Negative numbers, floats and booleans are kept as text so that validation,
    // not the YAML layer, reports them with the cell and field.
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<DimText, E> {
        Ok(DimText(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<DimText, E> {
        Ok(DimText(v.to_string()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<DimText, E> {
        Ok(DimText(v.to_string()))
    }
}

/// A parsed dim expression: `coeff * h` or a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimExpr {
    /// `<int>` (an absolute size, e.g. a vocabulary).
    Const(u64),
    /// `h` (coefficient 1) or `<int>h`.
    Hidden(u64),
}

impl DimExpr {
    /// Parses `h`, `<int>h` or `<int>`; the error is a short reason for the user.
    pub fn parse(text: &str) -> Result<DimExpr, String> {
        if text.is_empty() {
            return Err("empty".to_owned());
        }
        let (digits, hidden) = match text.strip_suffix('h') {
            Some(d) => (d, true),
            None => (text, false),
        };
        if hidden && digits.is_empty() {
            return Ok(DimExpr::Hidden(1));
        }
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err("expected `h`, `<int>h` or `<int>` (e.g. `4h`, `1000`)".to_owned());
        }
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("integer `{digits}` is too large"))?;
        Ok(if hidden {
            DimExpr::Hidden(n)
        } else {
            DimExpr::Const(n)
        })
    }

    /// The value at hidden size `hidden`; `None` on overflow.
    pub fn eval(self, hidden: usize) -> Option<usize> {
        match self {
            DimExpr::Const(n) => usize::try_from(n).ok(),
            DimExpr::Hidden(k) => usize::try_from(k).ok()?.checked_mul(hidden),
        }
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimExpr::Const(n) => write!(f, "{n}"),
            DimExpr::Hidden(1) => f.write_str("h"),
            DimExpr::Hidden(k) => write!(f, "{k}h"),
        }
    }
}

/// Number of elements of `shape`, `None` on overflow.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Formats a shape as `[a, b]` for error messages.
pub fn show_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(DimExpr::parse("h"), Ok(DimExpr::Hidden(1)));
        assert_eq!(DimExpr::parse("4h"), Ok(DimExpr::Hidden(4)));
        assert_eq!(DimExpr::parse("1000"), Ok(DimExpr::Const(1000)));
        assert_eq!(DimExpr::parse("0"), Ok(DimExpr::Const(0)));
    }

    #[test]
    fn rejects_other_text() {
        for bad in [
            "",
            "hh",
            "h4",
            "2*h",
            "-1",
            " h",
            "4H",
            "1.5",
            "x",
            "99999999999999999999",
        ] {
            assert!(DimExpr::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn eval_scales_and_detects_overflow() {
        assert_eq!(DimExpr::Hidden(4).eval(64), Some(256));
        assert_eq!(DimExpr::Const(9).eval(64), Some(9));
        assert_eq!(DimExpr::Hidden(u64::MAX).eval(2), None);
        assert_eq!(checked_numel(&[usize::MAX, 2]), None);
        assert_eq!(checked_numel(&[3, 4, 5]), Some(60));
    }

    #[test]
    fn display_round_trips() {
        for text in ["h", "4h", "1000"] {
            let parsed = DimExpr::parse(text).expect("valid by construction of the list");
            assert_eq!(parsed.to_string(), text);
        }
    }
}
