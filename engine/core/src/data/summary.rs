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

/// Distribution of the annotations of a data set: how often each label
/// occurs, and how many token ids fall below a vocabulary cut-off.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct AnnotationSummary {
    /// Per label value, the number of annotated elements carrying it: every
    /// tree node, every word's tag, every lattice node's tag.
    pub labels: Vec<u64>,
    /// Trees only: per label value, the number of roots carrying it.
    pub root_labels: Vec<u64>,
    /// Number of token ids (tree leaves, words, lattice char and word arcs).
    pub ids: u64,
    /// Of those, ids below the cut-off given to
    /// [`Structures::annotation_summary`].
    pub ids_below: u64,
    /// The cut-off.
    pub cutoff: u32,
}

impl AnnotationSummary {
    /// The most frequent label (ties: the smallest) and its share of `counts`,
    /// i.e. the accuracy of always predicting it; `None` without labels.
    pub fn majority(counts: &[u64]) -> Option<(usize, f64)> {
        let total: u64 = counts.iter().sum();
        let (best, &n) = counts
            .iter()
            .enumerate()
            .max_by_key(|&(i, &n)| (n, std::cmp::Reverse(i)))?;
        (total > 0).then(|| (best, n as f64 / total as f64))
    }
}

impl Structures {
    /// The label distribution and the share of token ids below `cutoff`
    /// (e.g. the rows a lookup table keeps apart); all zero for structure-only
    /// data.
    pub fn annotation_summary(&self, cutoff: u32) -> AnnotationSummary {
        fn count(into: &mut Vec<u64>, label: u32) {
            let i = label as usize;
            if into.len() <= i {
                into.resize(i + 1, 0);
            }
            into[i] += 1;
        }
        let mut s = AnnotationSummary {
            cutoff,
            ..AnnotationSummary::default()
        };
        let mut ids = |list: &[u32]| {
            s.ids += list.len() as u64;
            s.ids_below += list.iter().filter(|&&id| id < cutoff).count() as u64;
        };
        let mut labels = Vec::new();
        let mut roots = Vec::new();
        match self {
            Structures::Trees(v) => {
                for t in v {
                    ids(&t.word_ids);
                    t.labels.iter().for_each(|&l| count(&mut labels, l));
                    if let Some(&root) = t.labels.last() {
                        count(&mut roots, root);
                    }
                }
            }
            Structures::Sentences(v) => {
                for x in v {
                    ids(&x.word_ids);
                    x.tags.iter().for_each(|&l| count(&mut labels, l));
                }
            }
            Structures::Pairs(_) => {}
            Structures::Lattices(v) => {
                for l in v {
                    ids(&l.char_ids);
                    ids(&l.word_ids);
                    l.tags.iter().for_each(|&t| count(&mut labels, t));
                }
            }
        }
        s.labels = labels;
        s.root_labels = roots;
        s
    }
}

impl fmt::Display for AnnotationSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dist = |f: &mut fmt::Formatter<'_>, what: &str, counts: &[u64]| -> fmt::Result {
            let total: u64 = counts.iter().sum();
            write!(f, "{what} (label: count):")?;
            for (i, n) in counts.iter().enumerate() {
                write!(f, " {i}: {n}")?;
            }
            if let Some((best, share)) = AnnotationSummary::majority(counts) {
                write!(
                    f,
                    "; majority label {best} = {:.2} % of {total}",
                    100.0 * share
                )?;
            }
            Ok(())
        };
        dist(f, "labels", &self.labels)?;
        if !self.root_labels.is_empty() {
            f.write_str("; ")?;
            dist(f, "root labels", &self.root_labels)?;
        }
        let share = if self.ids == 0 {
            0.0
        } else {
            100.0 * self.ids_below as f64 / self.ids as f64
        };
        write!(
            f,
            "; token ids below {}: {} of {} ({share:.2} %)",
            self.cutoff, self.ids_below, self.ids
        )
    }
}
