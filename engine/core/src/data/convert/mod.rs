//! Converters from the raw ED-Batch data sets to fixtures.
//!
//! The raw corpora are third-party texts; the project ships only their
//! shapes and, where the corpus has them, integer annotations: labels, tags
//! and word ids that are frequency ranks ([`Vocab`]), never the text.
//! Dev and test splits are ranked by their train split ([`rank_source`]).
//! `convert_all` reads the ED-Batch `benchmark/data` folder layout
//! (see [`raw_path`]) and writes the eight fixture files, each atomically
//! (`<name>.tmp` then rename) so an interrupted run never leaves a truncated
//! fixture behind. Every written text is parsed back and compared before it
//! is committed.

mod iwslt;
mod sst;
mod vocab;
mod weibo;
mod wikiner;

use std::path::Path;

use serde::Serialize;

pub use iwslt::{IwsltStats, SEPARATOR, iwslt_pairs, iwslt_pairs_detailed};
pub use sst::{SST_CLASSES, SstStats, sst_trees, sst_trees_detailed, sst_trees_ranked, sst_vocab};
pub use vocab::Vocab;
pub use weibo::{
    WeiboStats, WeiboVocab, weibo_lattices, weibo_lattices_detailed, weibo_lattices_ranked,
    weibo_vocab,
};
pub use wikiner::{RARE_BELOW, WIKINER_TAGS, wikiner_sentences};

use crate::data::dataset::Dataset;
use crate::data::error::DataError;
use crate::data::fixtures::{format_fixture, parse_fixture};
use crate::data::structures::{StructureKind, Structures};

/// The cut-off the conversion notes report token ids against: the models'
/// lookup tables have 1000 rows and the replay maps every id from 999 on to
/// the last row (the unknown-word row), see `data/README.md`.
pub const UNKNOWN_ROW_FROM: u32 = 999;

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

/// The split whose token frequencies number `ds`'s word ids: the train split
/// of the same corpus for dev and test, `None` when `ds` is ranked by itself
/// (train splits; WikiNER, of which ED-Batch ships one split) or has no ids.
pub fn rank_source(ds: Dataset) -> Option<Dataset> {
    match ds {
        Dataset::SstDev | Dataset::SstTest => Some(Dataset::SstTrain),
        Dataset::WeiboDev | Dataset::WeiboTest => Some(Dataset::WeiboTrain),
        Dataset::SstTrain | Dataset::WeiboTrain | Dataset::WikinerDev | Dataset::Iwslt2012 => None,
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
    let read = |d: Dataset| -> Result<(String, String), DataError> {
        let src = source_dir.join(raw_path(d));
        let name = src.display().to_string();
        let raw = std::fs::read_to_string(&src).map_err(|e| DataError::io(&name, e))?;
        Ok((raw, name))
    };
    let (raw, src_name) = read(ds)?;
    let reference = rank_source(ds).map(read).transpose()?;
    let reference = reference.as_ref().map(|(r, n)| (r.as_str(), n.as_str()));
    let (structures, mut notes) = convert_text(ds, &raw, &src_name, reference)?;
    notes.push(structures.summary().to_string());
    if structures.is_annotated() {
        notes.push(structures.annotation_summary(UNKNOWN_ROW_FROM).to_string());
    }
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
/// `reference` is the raw text and name of the split that ranks the word ids
/// ([`rank_source`]); `None` ranks them within `raw` itself.
pub fn convert_text(
    ds: Dataset,
    raw: &str,
    file: &str,
    reference: Option<(&str, &str)>,
) -> Result<(Structures, Vec<String>), DataError> {
    let ranked_by = match (reference, rank_source(ds)) {
        (Some(_), Some(r)) => r.name().to_string(),
        (Some((_, name)), None) => name.to_string(),
        (None, _) => "this file".to_string(),
    };
    Ok(match ds {
        Dataset::SstTrain | Dataset::SstDev | Dataset::SstTest => {
            let vocab = match reference {
                Some((text, name)) => sst_vocab(text, name)?,
                None => sst_vocab(raw, file)?,
            };
            let (trees, st) = sst_trees_ranked(raw, file, &vocab)?;
            let unseen = trees
                .iter()
                .flat_map(|t| &t.word_ids)
                .filter(|&&id| id == vocab.unseen())
                .count();
            let notes = vec![
                format!("unary nodes collapsed: {}", st.unary_collapsed),
                format!("blank lines skipped: {}", st.blank_lines),
                format!(
                    "word ids: ranks in {ranked_by} ({} distinct words); tokens not in it: {unseen}",
                    vocab.len()
                ),
            ];
            (Structures::Trees(trees), notes)
        }
        Dataset::WeiboTrain | Dataset::WeiboDev | Dataset::WeiboTest => {
            let vocab = match reference {
                Some((text, name)) => weibo_vocab(text, name)?,
                None => weibo_vocab(raw, file)?,
            };
            let (lattices, st) = weibo_lattices_ranked(raw, file, &vocab)?;
            let notes = vec![
                format!("duplicate arcs merged: {}", st.duplicate_arcs),
                format!("start nodes besides node 0: {}", st.start_nodes),
                format!(
                    "char/word ids: ranks in {ranked_by} ({} chars, {} words)",
                    vocab.chars.len(),
                    vocab.words.len()
                ),
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
    let ranked_by = match rank_source(ds) {
        Some(r) => format!("{r} (the train split)"),
        None => "this file".to_string(),
    };
    let ranks = format!(
        "frequency rank in {ranked_by}, 0 = most frequent, ties by first occurrence; \
         a token absent from it gets the number of distinct tokens there"
    );
    let (origin, licence, format, annotations) = match ds.kind() {
        StructureKind::Trees => (
            "Stanford Sentiment Treebank (Socher et al., EMNLP 2013), nlp.stanford.edu/sentiment",
            "Stanford research data, no explicit licence known; see original distribution",
            "one binary tree per line: (<label> w<word id>) = leaf, (<label> <left> <right>) \
             = internal node; unary nodes collapsed"
                .to_string(),
            Some(format!(
                "label = SST sentiment 0..=4 of the node; word id = {ranks}"
            )),
        ),
        StructureKind::Lattices => (
            "lattices built by ED-Batch over the Chinese Weibo NER corpus (Peng & Dredze, \
             EMNLP 2015; github.com/OYE93/Chinese-NLP-Corpus NER/Weibo)",
            "see original distribution",
            "one lattice per line: <nodes> [!<start node> ...] [<from>-<to>:<word id> ...] | \
             <tag>[:<char id>] per node; char arcs i-1 -> i implicit except at !-marked nodes \
             (a node has a char id iff it has a char arc); word arcs sorted by (to, from)"
                .to_string(),
            Some(format!(
                "tag = ED-Batch's NER tag id of the node (0 = start); char and word ids = {ranks}, \
                 over char arcs and word arcs separately, of ED-Batch's vocabulary ids"
            )),
        ),
        StructureKind::Sentences => (
            "WikiNER English (Nothman et al., Artificial Intelligence 2013), from Wikipedia",
            "Wikipedia text is CC BY-SA; WikiNER release terms: see original distribution",
            format!(
                "one sentence per line: <length in chars>[*]:<word id>:<tag> per word, \
                 '*' = fewer than {RARE_BELOW} occurrences in this corpus (exact match)"
            ),
            Some(format!(
                "tag = index in {}; word id = {ranks}",
                WIKINER_TAGS.join(" ")
            )),
        ),
        StructureKind::Pairs => (
            "IWSLT 2015 English-Vietnamese, tst2012 (TED talks via WIT3)",
            "TED talks are CC BY-NC-ND 4.0 as best known; see original distribution",
            "one pair per line: <source tokens> <target tokens>, without <s> and </s>".to_string(),
            None,
        ),
    };
    let keeps = if annotations.is_some() {
        "this file keeps structure and integer annotations only (labels, tags, \
         frequency-rank ids; no text)"
    } else {
        "this file keeps structure only (no words, no labels)"
    };
    let mut lines = vec![
        format!("dataset: {}", ds.name()),
        format!("description: {}", ds.description()),
        format!(
            "source: ED-Batch (github.com/gulang2019/ED-Batch) benchmark/data/{}",
            raw_path(ds)
        ),
        format!("original: {origin}"),
        format!("licence: {licence}; {keeps}"),
        format!("format: {format}"),
    ];
    if let Some(a) = annotations {
        lines.push(format!("annotations: {a}"));
    }
    lines.push("produced by: engine fixtures --source <ED-Batch benchmark/data> --out data".into());
    lines.push(format!("samples: {samples}"));
    lines
}

/// Writes `text` to `dest` atomically ([`crate::io::write_atomic`]).
fn write_atomic(dest: &Path, text: &str) -> Result<(), DataError> {
    crate::io::write_atomic(dest, text.as_bytes())
        .map_err(|e| DataError::io(&dest.display().to_string(), e))
}
