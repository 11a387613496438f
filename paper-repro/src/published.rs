//! The papers' published numbers, as committed data files
//! (`paper-repro/published/{ed-batch,cavs,vpps}.yaml`, embedded in the
//! binary). Every value carries its `source` (table or figure, section, and
//! `<paper>.txt:<line>`) and the `quote` of the paper text it was read from;
//! a value not printed as such in the text (e.g. "23% more batches" read as
//! 1.23) says how it was `derived`. Statements are quotes without a number
//! we plot. Loading checks what can be checked without the paper text: ids
//! unique, sources and quotes present, each non-derived value among the
//! numbers of its quote; `tests/published.rs` also finds every quote in
//! `shared/papers/*.txt`.

use serde::Deserialize;

use crate::error::{ReproError, Result};
use crate::items::Paper;

/// One published number.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PubValue {
    /// Identifier used by the report, e.g. `table2.lstm.kb.baseline`.
    pub id: String,
    /// The number.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// The paper's name for the row (e.g. `LSTMCell`).
    #[serde(default)]
    pub label: Option<String>,
    /// Where in the paper: table/figure, section, `<paper>.txt:<line>`.
    pub source: String,
    /// The text it was read from, verbatim.
    pub quote: String,
    /// How the value follows from the quote when it is not printed there.
    #[serde(default)]
    pub derived: Option<String>,
}

/// A published statement (a quote).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// Identifier used by the report.
    pub id: String,
    /// Where in the paper.
    pub source: String,
    /// The text, verbatim.
    pub quote: String,
}

/// One paper's file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PaperData {
    /// `ed-batch`, `cavs` or `vpps`.
    pub paper: String,
    /// The paper's title.
    pub title: String,
    /// The text the quotes come from (relative to the project's parent).
    pub text: String,
    /// Numbers.
    pub values: Vec<PubValue>,
    /// Statements.
    #[serde(default)]
    pub statements: Vec<Statement>,
}

/// The embedded files: (file name, text).
pub const FILES: [(&str, &str); 3] = [
    (
        "published/ed-batch.yaml",
        include_str!("../published/ed-batch.yaml"),
    ),
    (
        "published/cavs.yaml",
        include_str!("../published/cavs.yaml"),
    ),
    (
        "published/vpps.yaml",
        include_str!("../published/vpps.yaml"),
    ),
];

/// All published data.
#[derive(Clone, Debug)]
pub struct Published {
    /// ED-Batch, Cavs, VPPS.
    pub papers: Vec<PaperData>,
}

impl Published {
    /// Parses and checks the embedded files.
    pub fn embedded() -> Result<Published> {
        let papers = FILES
            .iter()
            .map(|(file, text)| parse(text, file))
            .collect::<Result<Vec<_>>>()?;
        Ok(Published { papers })
    }

    /// The title of `paper`, as the report cites it.
    pub fn title(&self, paper: Paper) -> Option<&str> {
        self.paper(paper).map(|p| p.title.as_str())
    }

    fn paper(&self, paper: Paper) -> Option<&PaperData> {
        self.papers.iter().find(|p| p.paper == paper.name())
    }

    /// The value `id` of `paper`, if published.
    pub fn value(&self, paper: Paper, id: &str) -> Option<&PubValue> {
        self.paper(paper)?.values.iter().find(|v| v.id == id)
    }

    /// The number `id` of `paper`, if published.
    pub fn num(&self, paper: Paper, id: &str) -> Option<f64> {
        self.value(paper, id).map(|v| v.value)
    }

    /// The value `id` of `paper`, or an error naming it.
    pub fn get(&self, paper: Paper, id: &str) -> Result<&PubValue> {
        self.value(paper, id)
            .ok_or_else(|| ReproError::MissingPublished(format!("{}:{id}", paper.name())))
    }

    /// The statement `id` of `paper`, or an error naming it.
    pub fn statement(&self, paper: Paper, id: &str) -> Result<&Statement> {
        self.paper(paper)
            .and_then(|p| p.statements.iter().find(|s| s.id == id))
            .ok_or_else(|| ReproError::MissingPublished(format!("{}:{id}", paper.name())))
    }
}

/// Parses and checks one file; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<PaperData> {
    let data: PaperData = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column, message) = engine::yaml::error_parts(&e, text);
        ReproError::Published {
            file: file.to_string(),
            message: format!("{line}:{column}: {message}"),
        }
    })?;
    let bad = |message: String| ReproError::Published {
        file: file.to_string(),
        message,
    };
    let mut ids = std::collections::HashSet::new();
    for v in &data.values {
        if !ids.insert(v.id.as_str()) {
            return Err(bad(format!("duplicate id {:?}", v.id)));
        }
        if v.source.trim().is_empty() || v.quote.trim().is_empty() {
            return Err(bad(format!("{}: source and quote are required", v.id)));
        }
        if !v.value.is_finite() {
            return Err(bad(format!("{}: value is not finite", v.id)));
        }
        let derived = v.derived.as_deref().is_some_and(|d| !d.trim().is_empty());
        if !derived && !numbers_in(&v.quote).iter().any(|n| same(*n, v.value)) {
            return Err(bad(format!(
                "{}: value {} does not occur in its quote (say how it is `derived`)",
                v.id, v.value
            )));
        }
    }
    for s in &data.statements {
        if !ids.insert(s.id.as_str()) {
            return Err(bad(format!("duplicate id {:?}", s.id)));
        }
        if s.source.trim().is_empty() || s.quote.trim().is_empty() {
            return Err(bad(format!("{}: source and quote are required", s.id)));
        }
    }
    Ok(data)
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The decimal numbers in `text` (`11,626` reads as 11626, `1.20x` as 1.2).
pub fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<f64>| {
        let t = cur.trim_end_matches(['.', ',']).replace(',', "");
        if let Ok(v) = t.parse::<f64>() {
            out.push(v);
        }
        cur.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() || (!cur.is_empty() && (c == '.' || c == ',')) {
            cur.push(c);
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// The text with whitespace and hyphens removed: how quotes are matched
/// against the paper text (line breaks and hyphenation vary).
pub fn normalise(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect()
}

/// A source as the report cites it: the paper's table or figure and section
/// (`Table 2 (§5.3, batch 8, model size 64), GRUCell row`), without the line
/// of our text copy (`, ed-batch.txt:796`), which only the tests read (a
/// reader has the paper, not that copy).
pub fn cite(source: &str) -> &str {
    match source.rfind(", ") {
        Some(i) if is_text_line(&source[i + 2..]) => &source[..i],
        _ if is_text_line(source) => "",
        _ => source,
    }
}

/// `name.txt:123`.
fn is_text_line(s: &str) -> bool {
    s.split_once(".txt:")
        .is_some_and(|(name, line)| !name.contains(' ') && line.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_drop_the_text_copy_line() {
        assert_eq!(
            cite("Table 2 (§5.3, batch 8), GRUCell row, ed-batch.txt:796"),
            "Table 2 (§5.3, batch 8), GRUCell row"
        );
        assert_eq!(cite("Abstract, ed-batch.txt:19"), "Abstract");
        assert_eq!(cite("Fig. 8 text"), "Fig. 8 text");
    }

    #[test]
    fn embedded_files_parse_and_every_value_has_a_source() {
        let p = Published::embedded().unwrap();
        assert_eq!(p.papers.len(), 3);
        for d in &p.papers {
            assert!(!d.values.is_empty(), "{}", d.paper);
            assert!(d.values.iter().all(|v| v.source.contains(".txt:")));
        }
        assert_eq!(p.num(Paper::EdBatch, "table6.cpu.edbatch"), Some(1163.0));
        assert_eq!(p.num(Paper::EdBatch, "table2.lstm.kb_ratio"), Some(65.88));
    }

    #[test]
    fn numbers_are_read_from_quotes() {
        assert_eq!(
            numbers_in("of 11,626 nodes, 1.20x, 23%."),
            [11626.0, 1.2, 23.0]
        );
        assert_eq!(numbers_in("268.0 / 8"), [268.0, 8.0]);
    }

    #[test]
    fn a_value_missing_from_its_quote_is_rejected() {
        let y = "paper: x\ntitle: t\ntext: t\nvalues:\n  - id: a\n    value: 3\n    unit: s\n    source: s\n    quote: \"took 2 s\"\n";
        let e = parse(y, "x.yaml").unwrap_err().to_string();
        assert!(e.contains("does not occur"), "{e}");
        let unknown = "paper: x\ntitle: t\ntext: t\nvalue: []\n";
        assert!(
            parse(unknown, "x.yaml")
                .unwrap_err()
                .to_string()
                .starts_with("x.yaml: ")
        );
    }
}
