//! Descriptive statistics of a data set (for reports and documentation).

use std::fmt;

use serde::Serialize;

use crate::data::structures::Structures;

/// Count, total, minimum and maximum of a non-negative measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SizeStats {
    /// Number of observations.
    pub count: u64,
    /// Sum of the observations.
    pub total: u64,
    /// Smallest observation (0 when there is none).
    pub min: u64,
    /// Largest observation (0 when there is none).
    pub max: u64,
}

impl SizeStats {
    /// Statistics of the given observations.
    pub fn of(values: impl IntoIterator<Item = u64>) -> Self {
        let mut s = SizeStats::default();
        for v in values {
            s.min = if s.count == 0 { v } else { s.min.min(v) };
            s.max = s.max.max(v);
            s.total = s.total.saturating_add(v);
            s.count += 1;
        }
        s
    }

    /// Arithmetic mean (0 when there is no observation).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total as f64 / self.count as f64
        }
    }
}

/// One named measure of a [`Summary`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measure {
    /// What is measured, e.g. `leaves per tree`.
    pub name: &'static str,
    /// Its statistics.
    pub stats: SizeStats,
}

/// Size statistics of a data set; which measures appear depends on the kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: usize,
    /// Measures, in a fixed per-kind order.
    pub measures: Vec<Measure>,
}

impl Structures {
    /// Computes the size statistics: leaves/nodes/depth per tree; words and
    /// rare words per sentence, chars per word; source/target tokens per
    /// pair; nodes, word arcs and word-arc spans (`to - from`) for lattices.
    pub fn summary(&self) -> Summary {
        let m = |name, stats| Measure { name, stats };
        let measures = match self {
            Structures::Trees(v) => vec![
                m(
                    "leaves per tree",
                    SizeStats::of(v.iter().map(|t| t.leaves() as u64)),
                ),
                m(
                    "nodes per tree",
                    SizeStats::of(v.iter().map(|t| t.len() as u64)),
                ),
                m(
                    "depth per tree",
                    SizeStats::of(v.iter().map(|t| t.depth() as u64)),
                ),
            ],
            Structures::Sentences(v) => vec![
                m(
                    "words per sentence",
                    SizeStats::of(v.iter().map(|s| s.words.len() as u64)),
                ),
                m(
                    "rare words per sentence",
                    SizeStats::of(
                        v.iter()
                            .map(|s| s.words.iter().filter(|w| w.rare).count() as u64),
                    ),
                ),
                m(
                    "chars per word",
                    SizeStats::of(
                        v.iter()
                            .flat_map(|s| s.words.iter().map(|w| u64::from(w.chars))),
                    ),
                ),
            ],
            Structures::Pairs(v) => vec![
                m(
                    "source tokens",
                    SizeStats::of(v.iter().map(|p| u64::from(p.src))),
                ),
                m(
                    "target tokens",
                    SizeStats::of(v.iter().map(|p| u64::from(p.tgt))),
                ),
            ],
            Structures::Lattices(v) => vec![
                m(
                    "nodes per lattice",
                    SizeStats::of(v.iter().map(|l| u64::from(l.nodes))),
                ),
                m(
                    "word arcs per lattice",
                    SizeStats::of(v.iter().map(|l| l.word_arcs.len() as u64)),
                ),
                m(
                    "word arc span",
                    SizeStats::of(v.iter().flat_map(|l| {
                        l.word_arcs
                            .iter()
                            .map(|&(f, t)| u64::from(t.saturating_sub(f)))
                    })),
                ),
            ],
        };
        Summary {
            samples: self.len(),
            measures,
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} samples", self.samples)?;
        for m in &self.measures {
            let s = &m.stats;
            write!(
                f,
                "; {}: mean {:.2}, min {}, max {}, total {}",
                m.name,
                s.mean(),
                s.min,
                s.max,
                s.total
            )?;
        }
        Ok(())
    }
}
