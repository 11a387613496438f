//! Converters from the raw ED-Batch data sets to structure-only fixtures.
//!
//! The raw corpora are third-party texts; the project ships only their
//! shapes. `convert_all` reads the ED-Batch `benchmark/data` folder layout
//! (see [`raw_path`]) and writes the eight fixture files, each atomically
//! (`<name>.tmp` then rename) so an interrupted run never leaves a truncated
//! fixture behind. Every written text is parsed back and compared before it
//! is committed.

mod iwslt;
mod sst;
mod weibo;
mod wikiner;

use std::path::Path;

use serde::Serialize;

pub use iwslt::{IwsltStats, SEPARATOR, iwslt_pairs, iwslt_pairs_detailed};
pub use sst::{SstStats, sst_trees, sst_trees_detailed};
pub use weibo::{WeiboStats, weibo_lattices, weibo_lattices_detailed};
pub use wikiner::{RARE_BELOW, wikiner_sentences};

use crate::data::dataset::Dataset;
use crate::data::error::DataError;
use crate::data::fixtures::{format_fixture, parse_fixture};
use crate::data::structures::{StructureKind, Structures};

/// What converting one data set produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConvertReport {
    /// The data set.
    pub dataset: Dataset,
    /// Samples written.
    pub samples: usize,
    /// Size of the written fixture in bytes.
    pub bytes: usize,
    /// Human-readable remarks: skipped/collapsed counts and size statistics.
    pub notes: Vec<String>,
}

/// Where `ds`'s raw file lives relative to the ED-Batch `benchmark/data`
/// folder.
pub fn raw_path(ds: Dataset) -> &'static str {
    match ds {
        Dataset::SstTrain => "trees/train.txt",
        Dataset::SstDev => "trees/dev.txt",
        Dataset::SstTest => "trees/test.txt",
        Dataset::WeiboTrain => "lattice/train.txt",
        Dataset::WeiboDev => "lattice/dev.txt",
        Dataset::WeiboTest => "lattice/test.txt",
        Dataset::WikinerDev => "tags/dev.txt",
        Dataset::Iwslt2012 => "iwslt15/tst2012.en-vi.capped",
    }
}

/// Converts every data set of [`Dataset::ALL`] from `source_dir` into
/// `out_dir` (created if missing). Stops at the first error.
pub fn convert_all(source_dir: &Path, out_dir: &Path) -> Result<Vec<ConvertReport>, DataError> {
    let out_name = out_dir.display().to_string();
    std::fs::create_dir_all(out_dir).map_err(|e| DataError::io(&out_name, e))?;
    Dataset::ALL
        .into_iter()
        .map(|ds| convert_dataset(ds, source_dir, out_dir))
        .collect()
}

/// Converts one data set from `source_dir` into `out_dir/<file_name>`.
pub fn convert_dataset(
    ds: Dataset,
    source_dir: &Path,
    out_dir: &Path,
) -> Result<ConvertReport, DataError> {
    let src = source_dir.join(raw_path(ds));
    let src_name = src.display().to_string();
    let raw = std::fs::read_to_string(&src).map_err(|e| DataError::io(&src_name, e))?;
    let (structures, mut notes) = convert_text(ds, &raw, &src_name)?;
    notes.push(structures.summary().to_string());
    let header = header_lines(ds, structures.len());
    let text = format_fixture(&structures, &header);

    let dest = out_dir.join(ds.file_name());
    let dest_name = dest.display().to_string();
    // A formatter bug must not ship a fixture the parser reads differently.
    if parse_fixture(&text, ds.kind(), &dest_name)? != structures {
        return Err(DataError::parse(
            &dest_name,
            0,
            "internal error: formatted fixture does not parse back to the converted data",
        ));
    }
    write_atomic(&dest, &text)?;
    Ok(ConvertReport {
        dataset: ds,
        samples: structures.len(),
        bytes: text.len(),
        notes,
    })
}

/// Converts raw text of `ds`'s format; returns the structures and notes.
pub fn convert_text(
    ds: Dataset,
    raw: &str,
    file: &str,
) -> Result<(Structures, Vec<String>), DataError> {
    Ok(match ds {
        Dataset::SstTrain | Dataset::SstDev | Dataset::SstTest => {
            let (trees, st) = sst_trees_detailed(raw, file)?;
            let notes = vec![
                format!("unary nodes collapsed: {}", st.unary_collapsed),
                format!("blank lines skipped: {}", st.blank_lines),
            ];
            (Structures::Trees(trees), notes)
        }
        Dataset::WeiboTrain | Dataset::WeiboDev | Dataset::WeiboTest => {
            let (lattices, st) = weibo_lattices_detailed(raw, file)?;
            let notes = vec![
                format!("duplicate arcs merged: {}", st.duplicate_arcs),
                format!("start nodes besides node 0: {}", st.start_nodes),
            ];
            (Structures::Lattices(lattices), notes)
        }
        Dataset::WikinerDev => {
            let sentences = wikiner_sentences(raw, file)?;
            let notes = vec![format!("rare = fewer than {RARE_BELOW} occurrences")];
            (Structures::Sentences(sentences), notes)
        }
        Dataset::Iwslt2012 => {
            let (pairs, st) = iwslt_pairs_detailed(raw, file)?;
            let notes = vec![
                format!("lines without ' ||| ' skipped: {}", st.no_separator),
                format!("lines with an empty side skipped: {}", st.empty_side),
            ];
            (Structures::Pairs(pairs), notes)
        }
    })
}

/// The comment header of `ds`'s fixture (without the magic line).
pub fn header_lines(ds: Dataset, samples: usize) -> Vec<String> {
    let (origin, licence, format) = match ds.kind() {
        StructureKind::Trees => (
            "Stanford Sentiment Treebank (Socher et al., EMNLP 2013), nlp.stanford.edu/sentiment",
            "Stanford research data, no explicit licence known; see original distribution",
            "one binary tree per line; x = leaf, (LR) = internal node; unary nodes collapsed",
        ),
        StructureKind::Lattices => (
            "lattices built by ED-Batch over the Chinese Weibo NER corpus (Peng & Dredze, \
             EMNLP 2015; github.com/OYE93/Chinese-NLP-Corpus NER/Weibo)",
            "see original distribution",
            "one lattice per line: <nodes> [!<start node> ...] [<from>-<to> ...]; char arcs \
             i-1 -> i implicit except at !-marked nodes; word arcs sorted by (to, from)",
        ),
        StructureKind::Sentences => (
            "WikiNER English (Nothman et al., Artificial Intelligence 2013), from Wikipedia",
            "Wikipedia text is CC BY-SA; WikiNER release terms: see original distribution",
            "one sentence per line: word lengths in chars, '*' = fewer than 5 occurrences \
             in this corpus (exact match)",
        ),
        StructureKind::Pairs => (
            "IWSLT 2015 English-Vietnamese, tst2012 (TED talks via WIT3)",
            "TED talks are CC BY-NC-ND 4.0 as best known; see original distribution",
            "one pair per line: <source tokens> <target tokens>, without <s> and </s>",
        ),
    };
    vec![
        format!("dataset: {}", ds.name()),
        format!("description: {}", ds.description()),
        format!(
            "source: ED-Batch (github.com/gulang2019/ED-Batch) benchmark/data/{}",
            raw_path(ds)
        ),
        format!("original: {origin}"),
        format!("licence: {licence}; this file keeps structure only (no words, no labels)"),
        format!("format: {format}"),
        "produced by: engine fixtures --source <ED-Batch benchmark/data> --out data".into(),
        format!("samples: {samples}"),
    ]
}

/// Writes `text` to `dest` via `<dest>.tmp` in the same folder and a rename,
/// so readers never observe a partial file.
fn write_atomic(dest: &Path, text: &str) -> Result<(), DataError> {
    let mut tmp_name = dest.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = Path::new(&tmp_name);
    let tmp_disp = tmp.display().to_string();
    if let Err(e) = std::fs::write(tmp, text) {
        // Best effort: a partial temp file is harmless but untidy.
        let _ = std::fs::remove_file(tmp);
        return Err(DataError::io(&tmp_disp, e));
    }
    std::fs::rename(tmp, dest).map_err(|e| DataError::io(&dest.display().to_string(), e))
}
