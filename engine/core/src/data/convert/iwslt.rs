//! IWSLT `<s> src </s> ||| <s> tgt </s>` lines to token counts.
//!
//! Counts exclude the `<s>`/`</s>` markers wherever they occur. Lines without
//! the ` ||| ` separator, and lines with an empty side (no token besides the
//! markers), are skipped and counted rather than rejected, because an
//! encoder-decoder workload cannot use them anyway.

use crate::data::error::DataError;
use crate::data::structures::Pair;

/// The separator between source and target.
pub const SEPARATOR: &str = " ||| ";

/// What [`iwslt_pairs_detailed`] skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IwsltStats {
    /// Lines without the ` ||| ` separator (blank lines included).
    pub no_separator: usize,
    /// Lines whose source or target has no token.
    pub empty_side: usize,
}

impl IwsltStats {
    /// All skipped lines.
    pub fn skipped(&self) -> usize {
        self.no_separator + self.empty_side
    }
}

/// Converts an IWSLT pair file; returns the pairs and the number of skipped
/// lines. `file` names the input in errors.
pub fn iwslt_pairs(raw: &str, file: &str) -> Result<(Vec<Pair>, usize), DataError> {
    iwslt_pairs_detailed(raw, file).map(|(p, s)| (p, s.skipped()))
}

/// Like [`iwslt_pairs`], with the skipped lines broken down by reason.
pub fn iwslt_pairs_detailed(raw: &str, file: &str) -> Result<(Vec<Pair>, IwsltStats), DataError> {
    let mut stats = IwsltStats::default();
    let mut pairs = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        let Some((src, tgt)) = line.split_once(SEPARATOR) else {
            stats.no_separator += 1;
            continue;
        };
        if tgt.contains(SEPARATOR) {
            return Err(DataError::parse(
                file,
                i + 1,
                "more than one ' ||| ' separator",
            ));
        }
        let count = |side: &str| -> Result<u32, DataError> {
            let n = side
                .split([' ', '\t', '\r'])
                .filter(|t| !t.is_empty() && *t != "<s>" && *t != "</s>")
                .count();
            u32::try_from(n).map_err(|_| DataError::parse(file, i + 1, "too many tokens"))
        };
        let (src, tgt) = (count(src)?, count(tgt)?);
        if src == 0 || tgt == 0 {
            stats.empty_side += 1;
            continue;
        }
        pairs.push(Pair { src, tgt });
    }
    Ok((pairs, stats))
}
